/**
 * What a worker the class let go (member:dropped) shows and does: the code and the words on
 * its page, and whether it joins again by itself and when.
 *
 * A device whose links would not open, or whose own run failed, comes back by itself: the
 * class went on without it, and the next generation may well reach it. One that keeps
 * failing backs off, doubling its wait, so that it costs the class a generation now and then
 * rather than every few seconds. A straggler does not come back by itself (still too slow,
 * it would be dropped again and again; its student presses Join again), nor does an evicted
 * member or a hub the teacher removed.
 */
import type { ErrorBody } from '../protocol/errors';
import type { MemberDropped } from '../protocol';

/** The first rejoin after a drop waits this long: time for the class's new generation to settle. */
export const FIRST_REJOIN_DELAY_MS = 500;
/** The wait doubles with each drop, up to this. */
export const MAX_REJOIN_DELAY_MS = 60_000;
/** A worker that stayed this long since its last drop starts again from the first delay. */
export const REJOIN_FORGIVEN_AFTER_MS = 120_000;

/** The code a dropped worker shows for each reason. */
const DROPPED_CODES: Record<MemberDropped['reason'], ErrorBody['code']> = {
  straggler: 'ERR_DROPPED',
  unreachable: 'ERR_RING_UNREACHABLE',
  failed: 'ERR_TRAINING_FAILED',
  evicted: 'ERR_PEER_MISBEHAVED',
  removed: 'ERR_DROPPED',
};

/** What a dropped worker's page says, in the student's words. */
function droppedMessage(d: MemberDropped): string {
  switch (d.reason) {
    case 'straggler':
      return `this device took ${Math.round(d.computeMs)} ms per step; the ring's deadline is ${Math.round(d.deadlineMs)} ms. Join again to rejoin.`;
    case 'unreachable':
      return `this device's links to its classmates would not open (${d.detail}). It joins again by itself.`;
    case 'failed':
      return `training failed on this device (${d.detail}); the class trains on. It joins again by itself.`;
    case 'evicted':
      return `evicted from the ring at step ${d.step}: ${d.detail}. Join again to rejoin.`;
    case 'removed':
      return `removed by the teacher: ${d.detail}`;
  }
}

export interface DropOutcome {
  error: ErrorBody;
  /** When to join again by itself, ms from now; null when only the student's Join brings it back. */
  rejoinInMs: number | null;
}

export class DropPolicy {
  private drops = 0;
  private lastDropAt = Number.NEGATIVE_INFINITY;

  /** A drop told at `now` (clock ms): what the page shows, and when to join again. */
  dropped(d: MemberDropped, now: number): DropOutcome {
    const error = { code: DROPPED_CODES[d.reason], message: droppedMessage(d) };
    if (d.reason !== 'unreachable' && d.reason !== 'failed') return { error, rejoinInMs: null };
    if (now - this.lastDropAt > REJOIN_FORGIVEN_AFTER_MS) this.drops = 0;
    this.lastDropAt = now;
    const rejoinInMs = Math.min(MAX_REJOIN_DELAY_MS, FIRST_REJOIN_DELAY_MS * 2 ** this.drops);
    this.drops++;
    return { error, rejoinInMs };
  }
}
