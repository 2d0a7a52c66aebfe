/**
 * Watches the ring links of each generation this worker is in, applied or being prepared,
 * and names to the server the ring neighbours whose links are still shut after
 * LINK_OPEN_DEADLINE_MS (ring:reform with `unreachable`). The server sheds whoever cannot
 * be reached (signaling-server/rooms/formation.ts), so a joiner whose links never open, or a
 * member whose re-formed links fail again, costs the class one generation and never the
 * run. Without it a pending admission with one dead link waited forever, and a re-form
 * that could not connect failed the whole run after a minute.
 */
import type { Generation, ReformRequest } from '../protocol';
import type { Clock } from '../util/clock';

/**
 * A ring link still shut this long after its generation arrived is reported. Links open in
 * well under a second on a class network and within a few seconds on a loaded laptop
 * running thirty workers; ICE gives up on a pair after about 10 s (libdatachannel) to 30 s
 * (Chromium), and the auto-redials (ring-network.ts) have had their turns by then.
 */
export const LINK_OPEN_DEADLINE_MS = 10_000;

export interface LinkWatchdogOptions {
  clock: Clock;
  /** This worker's ring neighbours in `g` whose links are not open (RingNetwork.unreachableIn); null without a network. */
  unreachableIn(g: Generation): string[] | null;
  /** The newest generation the server announced: a report is only ever of that one. */
  latest(): Generation | null;
  report(request: ReformRequest): void;
  log(message: string): void;
}

export class LinkWatchdog {
  private timer: unknown = null;

  constructor(private readonly options: LinkWatchdogOptions) {}

  /** Starts watching `g` (the previous generation's watch ends). */
  watch(g: Generation): void {
    this.stop();
    this.arm(g);
  }

  stop(): void {
    if (this.timer !== null) this.options.clock.clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(g: Generation): void {
    const { clock } = this.options;
    this.timer = clock.setTimeout(() => this.check(g), LINK_OPEN_DEADLINE_MS);
  }

  private check(g: Generation): void {
    this.timer = null;
    const { latest, unreachableIn, report, log } = this.options;
    if (latest()?.generation !== g.generation) return;
    const unreachable = unreachableIn(g);
    if (!unreachable || unreachable.length === 0) return;
    log(`links to ${unreachable.join(', ')} still shut ${LINK_OPEN_DEADLINE_MS} ms into generation ${g.generation}; telling the server`);
    report({ generation: g.generation, reason: `ring links did not open within ${LINK_OPEN_DEADLINE_MS} ms`, unreachable });
    // Still shut at the next deadline: report again (the server keeps one report per member).
    this.arm(g);
  }
}
