/**
 * The public keys of a secure run, generation by generation. A member makes a key pair for
 * every generation it belongs to and publishes the public half through the signaling
 * server (`secagg:key`), which relays it to the room; the directory keeps what it hears and
 * answers, per generation, the pairwise secrets with a rank's mask partners once their keys
 * are in. The private keys never leave this device, and a generation's keys are forgotten
 * once a newer one is in use (forward secrecy between generations).
 *
 * What it cannot tell: whether the server relayed a classmate's real key. A malicious server
 * could swap keys and read masked values (docs/privacy.md says so).
 */
import { WebringError } from '../protocol/errors';
import type { Clock } from '../util/clock';
import { makeKeyPair, pairSecret, type MemberKeyPair } from './pair-keys';

/** A generation whose partners' keys have not all arrived after this long fails its step; the class re-forms with fresh keys. */
export const KEY_WAIT_MS = 15_000;

/** Where this member's public keys go (the signaling server, or a test's relay). */
export type PublishKey = (generation: number, publicKey: string) => void;

interface GenerationKeys {
  own: Promise<MemberKeyPair> | null;
  /** Heard public keys by member id: the first one heard stands. */
  heard: Map<string, string>;
  /** Secrets already derived, by member id. */
  secrets: Map<string, Promise<CryptoKey>>;
}

export class KeyDirectory {
  private readonly generations = new Map<number, GenerationKeys>();
  private waiters: Array<() => void> = [];

  constructor(
    private readonly publish: PublishKey,
    private readonly clock: Clock,
    private readonly log: (message: string) => void,
    private readonly keyWaitMs = KEY_WAIT_MS,
  ) {}

  private entry(generation: number): GenerationKeys {
    let e = this.generations.get(generation);
    if (!e) {
      e = { own: null, heard: new Map(), secrets: new Map() };
      this.generations.set(generation, e);
    }
    return e;
  }

  /** Makes and publishes this member's key pair for `generation`, once. */
  ensureOwn(generation: number): Promise<MemberKeyPair> {
    const e = this.entry(generation);
    e.own ??= makeKeyPair().then((pair) => {
      this.publish(generation, pair.publicKey);
      return pair;
    });
    return e.own;
  }

  /** A classmate's public key for `generation`, relayed by the server. */
  heard(generation: number, memberId: string, publicKey: string): void {
    const e = this.entry(generation);
    const known = e.heard.get(memberId);
    if (known !== undefined && known !== publicKey) {
      this.log(`a second, different key for ${memberId} in generation ${generation}; the first one stands`);
      return;
    }
    e.heard.set(memberId, publicKey);
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /**
   * The pairwise secrets with `partners` (member ids) in `generation`, waiting up to
   * keyWaitMs (KEY_WAIT_MS) for their keys. ERR_TIMEOUT names who never published: a recoverable
   * failure, after which the class re-forms and everyone makes fresh keys.
   */
  async secrets(generation: number, partners: readonly string[]): Promise<CryptoKey[]> {
    const own = await this.ensureOwn(generation);
    const e = this.entry(generation);
    const deadline = this.clock.now() + this.keyWaitMs;
    for (;;) {
      const missing = partners.filter((id) => !e.heard.has(id));
      if (missing.length === 0) break;
      const left = deadline - this.clock.now();
      if (left <= 0) throw new WebringError('ERR_TIMEOUT', `no public key from ${missing.join(', ')} for generation ${generation} within ${this.keyWaitMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = this.clock.setTimeout(resolve, left);
        this.waiters.push(() => {
          this.clock.clearTimeout(timer);
          resolve();
        });
      });
    }
    return Promise.all(
      partners.map((id) => {
        let s = e.secrets.get(id);
        if (!s) {
          s = pairSecret(own.privateKey, e.heard.get(id)!);
          e.secrets.set(id, s);
        }
        return s;
      }),
    );
  }

  /** Forgets every generation before `generation`: their private keys and secrets are gone. */
  forgetBefore(generation: number): void {
    for (const g of this.generations.keys()) if (g < generation) this.generations.delete(g);
  }

  /** Generations whose keys this directory still holds (for tests: old keys are really gone). */
  get held(): number[] {
    return [...this.generations.keys()];
  }
}
