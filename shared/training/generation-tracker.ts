/**
 * Which ring generation this worker is in, and which one is coming. The server announces
 * every generation; a pure admission of joiners is prepared while the current ring trains
 * on (the switch happens at a step boundary, by vote), anything else replaces the ring at
 * once. Whoever waits for the ring to change (a paused run, a run recovering from an
 * interrupted step) waits here.
 */
import { WebringError } from '../protocol/errors';
import { REFORM_AFTER_MS, type Generation } from '../protocol';
import type { CollectiveEngine } from '../collectives/collective';
import type { Clock } from '../util/clock';

/** A ring that has not re-formed this long after an interrupted step gives up (the run fails). */
export const RECOVERY_TIMEOUT_MS = 60_000;

/** The part of RingNetwork that the tracker and a training run use; a unit test passes its own. */
export interface RingView {
  /** The collective of the latest generation this worker belongs to, or null. */
  readonly collective: CollectiveEngine | null;
  /** The generation applied last. */
  readonly generation: Generation | null;
  /** Every link halving-doubling needs in the applied generation is open. */
  readonly meshReady: boolean;
  /** This worker's link to the generation's hub is open (false without a hub). */
  readonly hubReady: boolean;
  /** Re-forms the ring for `g`; the previous generation's collective is aborted. */
  applyGeneration(g: Generation): unknown;
  /** Opens the links `g` needs while the current ring keeps training. */
  prepare(g: Generation): void;
  /** Both of this worker's ring links in `g` are open. */
  isReadyFor(g: Generation): boolean;
  /** This worker's ring neighbours in `g` whose links are not open. */
  unreachableIn(g: Generation): string[];
}

/** Asks the server to re-form generation `generation`, naming the ring neighbours this worker cannot reach (if any). */
export type AskReform = (generation: number, reason: string, unreachable: string[]) => void;

/** What a generation did on arrival. */
export type GenerationOutcome =
  /** Older than one already known: ignored. */
  | 'stale'
  /** No ring yet (the join ack is on its way): kept, and replayed after it. */
  | 'deferred'
  /** The generation the ring already has (a rejoin repeats it). */
  | 'repeated'
  /** Joiners only, while training: their links open, the ring switches at a step boundary. */
  | 'prepared'
  /** The ring was re-formed for it. */
  | 'applied';

/** True when `next` is `current` with members added at the end: a pure admission of joiners. */
export function extendsRing(current: Generation, next: Generation): boolean {
  return (
    next.generation > current.generation &&
    next.members.length > current.members.length &&
    current.members.every((m, i) => next.members[i]?.id === m.id)
  );
}

export class GenerationTracker {
  /** The newest generation the server announced. */
  latest: Generation | null = null;
  /** A generation that admits joiners, while its links open; the ring switches at a step boundary. */
  pending: Generation | null = null;
  private waiters: Array<() => void> = [];

  constructor(
    private readonly clock: Clock,
    private readonly log: (message: string) => void,
  ) {}

  /** Takes in a generation the server announced, and prepares or applies it on `network`. */
  receive(g: Generation, network: RingView | null, training: boolean): GenerationOutcome {
    const applied = network?.generation ?? null;
    if (this.latest && g.generation < this.latest.generation) return 'stale';
    this.latest = g;
    if (!network) return 'deferred';
    if (applied?.generation === g.generation && network.collective?.generation === g.generation) {
      this.notify();
      return 'repeated';
    }
    const ring = network.collective;
    let outcome: GenerationOutcome;
    if (training && applied && ring && !ring.isAborted && !g.switchNow && extendsRing(applied, g)) {
      network.prepare(g);
      this.pending = g;
      this.log(`generation ${g.generation} admits ${g.members.length - applied.members.length} joiner(s); connecting`);
      outcome = 'prepared';
    } else {
      // Someone left (or this worker is not training): the old ring is over now.
      network.applyGeneration(g);
      this.pending = null;
      outcome = 'applied';
    }
    this.notify();
    return outcome;
  }

  /** The ring switched to `g` at a step boundary: it is no longer pending. */
  admitted(g: Generation): void {
    if (this.pending === g) this.pending = null;
  }

  /** Forgets every generation: this worker joins afresh. */
  reset(): void {
    this.latest = null;
    this.pending = null;
  }

  /** Wakes everyone waiting in nextChange (a generation, a resume, a stop). */
  notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Resolves at the next notify(), or after `timeoutMs` when given. */
  nextChange(timeoutMs?: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (timeoutMs === undefined) {
        this.waiters.push(resolve);
        return;
      }
      const timer = this.clock.setTimeout(resolve, timeoutMs);
      this.waiters.push(() => {
        this.clock.clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * After an interrupted collective on `ring`: waits until a newer generation is applied.
   * An admission still being prepared is applied at once: the server has moved on to it,
   * and the old ring is broken anyway. A broken link with nobody gone brings no new
   * generation by itself, so after a grace period (and again after each one) this asks,
   * through `askReform`, for the ring to be re-formed, naming the neighbours whose links
   * are shut: the server sheds those it cannot reach rather than wait on them.
   */
  async awaitRingChange(network: RingView, ring: CollectiveEngine, cause: WebringError, selfId: string | null, askReform: AskReform): Promise<void> {
    const pending = this.pending;
    if (pending && network.collective === ring && pending.generation > ring.generation) {
      this.log(`interrupted while generation ${pending.generation} was forming; switching to it now`);
      network.applyGeneration(pending);
      this.pending = null;
    }
    const started = this.clock.now();
    let askedAt = started;
    while (network.collective === ring || (network.collective === null && network.generation?.members.some((m) => m.id === selfId))) {
      const now = this.clock.now();
      if (now - started > RECOVERY_TIMEOUT_MS) throw new WebringError('ERR_TIMEOUT', `the ring did not re-form within ${RECOVERY_TIMEOUT_MS} ms after ${cause.code}`);
      const applied = network.generation;
      if (now - askedAt >= REFORM_AFTER_MS && applied && ring.generation === applied.generation) {
        askedAt = now;
        askReform(ring.generation, `${cause.code}: ${cause.message}`.slice(0, 200), network.unreachableIn(applied));
      }
      await this.nextChange(REFORM_AFTER_MS);
    }
  }
}
