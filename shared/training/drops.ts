/**
 * What a worker the class let go (member:dropped) shows and does: the code and the words on
 * its page, and whether it joins again by itself and when.
 *
 * A device whose links would not open, or whose own run failed, comes back by itself: the
 * class went on without it, and the next generation may well reach it. One that keeps
 * failing backs off, doubling its wait, so that it costs the class a generation now and then
 * rather than every few seconds.
 *
 * A straggler comes back by itself too, MAX_STRAGGLER_RETURNS times within
 * REJOIN_FORGIVEN_AFTER_MS: a device is most often slow for a moment (a join storm saturating
 * a laptop, a background task), not for good. Before it rejoins it measures its speed again
 * (the admission probe), so that its share of each step fits the speed it has now. Past the
 * last return it waits for its student to press Join again: a device that is slow for good
 * would otherwise cost the class a drop every few minutes. An evicted member and a hub the
 * teacher removed never come back by themselves.
 */
import type { ErrorBody } from '../protocol/errors';
import type { MemberDropped } from '../protocol';

/** The first rejoin after a drop waits this long: time for the class's new generation to settle. */
export const FIRST_REJOIN_DELAY_MS = 500;
/** The wait doubles with each drop, up to this. */
export const MAX_REJOIN_DELAY_MS = 60_000;
/** A worker that stayed this long since its last drop starts again from the first delay. */
export const REJOIN_FORGIVEN_AFTER_MS = 120_000;
/** A straggler comes back by itself this many times in a row (drops less than REJOIN_FORGIVEN_AFTER_MS apart). */
export const MAX_STRAGGLER_RETURNS = 3;
/**
 * A straggler's first return waits this long, doubling with each return: the class trains a
 * few quick steps without it, and the moment that slowed it (a join storm, a background
 * task) may pass.
 */
export const STRAGGLER_REJOIN_DELAY_MS = 10_000;

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
      return `this device took ${Math.round(d.computeMs)} ms per step; the ring's deadline is ${Math.round(d.deadlineMs)} ms.`;
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
  /** Measure the device's speed again before that join (a straggler's share must fit its speed now). */
  reprobe: boolean;
}

export class DropPolicy {
  private drops = 0;
  private lastDropAt = Number.NEGATIVE_INFINITY;
  private stragglerReturns = 0;
  private lastStragglerDropAt = Number.NEGATIVE_INFINITY;

  /** A drop told at `now` (clock ms): what the page shows, and when to join again. */
  dropped(d: MemberDropped, now: number): DropOutcome {
    const code = DROPPED_CODES[d.reason];
    if (d.reason === 'straggler') return this.straggler(code, droppedMessage(d), now);
    const error = { code, message: droppedMessage(d) };
    if (d.reason !== 'unreachable' && d.reason !== 'failed') return { error, rejoinInMs: null, reprobe: false };
    if (now - this.lastDropAt > REJOIN_FORGIVEN_AFTER_MS) this.drops = 0;
    this.lastDropAt = now;
    const rejoinInMs = Math.min(MAX_REJOIN_DELAY_MS, FIRST_REJOIN_DELAY_MS * 2 ** this.drops);
    this.drops++;
    return { error, rejoinInMs, reprobe: false };
  }

  private straggler(code: ErrorBody['code'], said: string, now: number): DropOutcome {
    if (now - this.lastStragglerDropAt > REJOIN_FORGIVEN_AFTER_MS) this.stragglerReturns = 0;
    this.lastStragglerDropAt = now;
    if (this.stragglerReturns >= MAX_STRAGGLER_RETURNS) {
      const message = `${said} It was dropped ${MAX_STRAGGLER_RETURNS + 1} times in a row, so it no longer rejoins by itself: Join again when it is less busy.`;
      return { error: { code, message }, rejoinInMs: null, reprobe: false };
    }
    const rejoinInMs = STRAGGLER_REJOIN_DELAY_MS * 2 ** this.stragglerReturns;
    this.stragglerReturns++;
    const message = `${said} It measures its speed again and rejoins by itself in ${Math.round(rejoinInMs / 1000)} s, with a share that fits (return ${this.stragglerReturns} of ${MAX_STRAGGLER_RETURNS}).`;
    return { error: { code, message }, rejoinInMs, reprobe: true };
  }
}
