/**
 * The public keys of secure runs, ring by ring: a ring is a (run, generation), since a new
 * run on an unchanged class keeps its generation number. A member makes a key pair for
 * every ring it belongs to and publishes the public half through the signaling server
 * (`secagg:key`), which relays it to the room; the directory keeps what it hears and
 * answers, per ring, the pairwise secrets with a rank's mask partners once their keys are
 * in. The private keys never leave this device, and a ring's keys are forgotten once a
 * newer one is in use (forward secrecy between generations and runs).
 *
 * What it cannot tell: whether the server relayed a classmate's real key. A malicious server
 * could swap keys and read masked values (docs/privacy.md says so).
 */
import { WebringError } from '../protocol/errors';
import type { Clock } from '../util/clock';
import { makeKeyPair, pairSecret, type MemberKeyPair } from './pair-keys';

/** A generation whose partners' keys have not all arrived after this long fails its step; the class re-forms with fresh keys. */
export const KEY_WAIT_MS = 15_000;

/** Which ring a key is for: a generation of a run. */
export interface KeyRing {
  run: number;
  generation: number;
}

/** Where this member's public keys go (the signaling server, or a test's relay). */
export type PublishKey = (ring: KeyRing, publicKey: string) => void;

/** Rings in order, as one safe integer: run < 2^16 (MAX_RUN), generation < 2^32. */
const ringKey = ({ run, generation }: KeyRing): number => run * 2 ** 32 + generation;
const describe = ({ run, generation }: KeyRing): string => `run ${run}, generation ${generation}`;

interface GenerationKeys {
  own: Promise<MemberKeyPair> | null;
  /** Heard public keys by member id: the first one heard stands. */
  heard: Map<string, string>;
  /** Secrets already derived, by member id. */
  secrets: Map<string, Promise<CryptoKey>>;
}

export class KeyDirectory {
  private readonly rings = new Map<number, GenerationKeys>();
  private waiters: Array<() => void> = [];

  constructor(
    private readonly publish: PublishKey,
    private readonly clock: Clock,
    private readonly log: (message: string) => void,
    private readonly keyWaitMs = KEY_WAIT_MS,
  ) {}

  private entry(ring: KeyRing): GenerationKeys {
    let e = this.rings.get(ringKey(ring));
    if (!e) {
      e = { own: null, heard: new Map(), secrets: new Map() };
      this.rings.set(ringKey(ring), e);
    }
    return e;
  }

  /** Makes and publishes this member's key pair for `ring`, once. */
  ensureOwn(ring: KeyRing): Promise<MemberKeyPair> {
    const e = this.entry(ring);
    e.own ??= makeKeyPair().then((pair) => {
      this.publish(ring, pair.publicKey);
      return pair;
    });
    return e.own;
  }

  /** A classmate's public key for `ring`, relayed by the server. */
  heard(ring: KeyRing, memberId: string, publicKey: string): void {
    const e = this.entry(ring);
    const known = e.heard.get(memberId);
    if (known !== undefined && known !== publicKey) {
      this.log(`a second, different key for ${memberId} in ${describe(ring)}; the first one stands`);
      return;
    }
    e.heard.set(memberId, publicKey);
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /**
   * The pairwise secrets with `partners` (member ids) in `ring`, waiting up to keyWaitMs
   * (KEY_WAIT_MS) for their keys. ERR_TIMEOUT names who never published, and
   * ERR_PEER_MISBEHAVED whose key is unusable: recoverable failures, after which the class
   * re-forms and everyone makes fresh keys (the server evicts a member that publishes none:
   * signaling-server/rooms/keyless.ts).
   */
  async secrets(ring: KeyRing, partners: readonly string[]): Promise<CryptoKey[]> {
    const own = await this.ensureOwn(ring);
    const e = this.entry(ring);
    const deadline = this.clock.now() + this.keyWaitMs;
    for (;;) {
      const missing = partners.filter((id) => !e.heard.has(id));
      if (missing.length === 0) break;
      const left = deadline - this.clock.now();
      if (left <= 0) throw new WebringError('ERR_TIMEOUT', `no public key from ${missing.join(', ')} for ${describe(ring)} within ${this.keyWaitMs} ms`);
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
          // A key that does not import is its owner's fault, not this member's: a recoverable
          // error that names the owner (the server refuses such keys, so only a relay that
          // changed one gets here), after which the class re-forms with fresh keys.
          s = pairSecret(own.privateKey, e.heard.get(id)!).catch((err: unknown) => {
            e.secrets.delete(id);
            throw new WebringError('ERR_PEER_MISBEHAVED', `the public key of ${id} for ${describe(ring)} is unusable (${(err as Error).message}); the class re-forms with fresh keys`);
          });
          e.secrets.set(id, s);
        }
        return s;
      }),
    );
  }

  /** Forgets every ring before `ring` (earlier runs, earlier generations): their private keys and secrets are gone. */
  forgetBefore(ring: KeyRing): void {
    for (const k of this.rings.keys()) if (k < ringKey(ring)) this.rings.delete(k);
  }

  /** The rings whose keys this directory still holds (for tests: old keys are really gone). */
  get held(): KeyRing[] {
    return [...this.rings.keys()].map((k) => ({ run: Math.floor(k / 2 ** 32), generation: k % 2 ** 32 }));
  }
}
