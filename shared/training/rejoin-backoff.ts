/**
 * When a worker the class let go (an unreachable link, its own failed run) joins again by
 * itself. (A straggler does not: still too slow, it would be dropped again and again, each
 * time costing the class a generation; its student presses Join again.) A phone that locked for a minute is back in the class the moment
 * it thaws, with no button to press; a device that keeps failing backs off, doubling its
 * wait, so that it costs the class a generation now and then rather than every few seconds.
 */

/** The first rejoin after a drop waits this long: time for the class's new generation to settle. */
export const FIRST_REJOIN_DELAY_MS = 500;
/** The wait doubles with each drop, up to this. */
export const MAX_REJOIN_DELAY_MS = 60_000;
/** A worker that stayed this long since its last drop starts again from the first delay. */
export const REJOIN_FORGIVEN_AFTER_MS = 120_000;

export class RejoinBackoff {
  private drops = 0;
  private lastDropAt = Number.NEGATIVE_INFINITY;

  /** A drop at `now` (clock ms): how long to wait before joining again. */
  dropped(now: number): number {
    if (now - this.lastDropAt > REJOIN_FORGIVEN_AFTER_MS) this.drops = 0;
    this.lastDropAt = now;
    const delay = Math.min(MAX_REJOIN_DELAY_MS, FIRST_REJOIN_DELAY_MS * 2 ** this.drops);
    this.drops++;
    return delay;
  }
}
