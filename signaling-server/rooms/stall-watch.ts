/**
 * The class never waits for ever. Every wait inside a run has its own bound (a collective's
 * timeout, a request's, a key's deadline), but a class can still sit still with nobody
 * timing out: every tab retrying a data service that refuses it, a device whose maths never
 * answers, a ring re-formed again and again. So the server watches each training room from
 * outside: a run whose class makes no progress (no step reported by the chief, no epoch
 * scored) for longer than its own pace allows ends, with ERR_RUN_STALLED and what the server
 * saw last, and every member is told to stop. The teacher's page shows why; Start resumes
 * from the latest checkpoint. It does not resume by itself: a stall that comes back at the
 * same place would loop for the rest of the lesson.
 *
 * Its pace: the longest turn measured in the run (a turn is a step, or a round of local
 * steps, with whatever ran between two reports: an evaluation, a hand-over), or before any,
 * a round's worth of the slowest member's admission probe; STALL_TURN_FACTOR times that,
 * and never less than a floor that covers a start on a slow device (shader compiles, the
 * hand-over, the links measured).
 */
import type { ErrorBody } from '../../shared/protocol/errors';
import { MIN_SECURE_MEMBERS } from '../../shared/protocol';
import type { RoomCore } from './room-core';
import type { Generation } from '../../shared/protocol';

/** No class counts as stalled before this long without progress. */
export const STALL_FLOOR_MS = 180_000;
/** A class counts as stalled after this many of its longest turns without progress. */
export const STALL_TURN_FACTOR = 4;
/** How often the server looks at a training room. */
export const STALL_CHECK_MS = 5_000;

/** What the class's pace allows between two signs of progress, ms. */
export function stallPatienceMs(core: RoomCore, floorMs: number = STALL_FLOOR_MS): number {
  const run = core.runState;
  const config = run.config;
  const measured = run.record.longestTurnMs ?? 0;
  let probed = 0;
  if (config) {
    const slowest = Math.max(0, ...core.members.ring.map((m) => m.probe?.msPerExample ?? 0));
    probed = run.stepsPerTurn * config.batchSizePerWorker * slowest;
  }
  return Math.max(floorMs, STALL_TURN_FACTOR * Math.max(measured, probed));
}

/** A stalled run the room ended: the error the teacher sees, and the fresh generation its members re-form in. */
export interface Stall {
  error: ErrorBody;
  generation: Generation;
}

/**
 * Why `core`'s run counts as stalled at `now`, or null while its class is fine, paused by
 * the teacher, or holding by design (a secure run below its minimum of distinct devices
 * waits for more to join, and says so).
 */
export function stallOf(core: RoomCore, now: number, floorMs: number = STALL_FLOOR_MS): ErrorBody | null {
  const run = core.runState;
  if (run.record.state !== 'training') return null;
  if (run.config?.secureAggregation && core.clients < MIN_SECURE_MEMBERS) return null;
  const since = run.record.progressAt;
  if (since === undefined) return null;
  const quietMs = now - since;
  const patienceMs = stallPatienceMs(core, floorMs);
  if (quietMs <= patienceMs) return null;
  const where = run.config?.sync === 'local-steps' ? `step ${run.step}, round ${run.record.round ?? run.step}` : `step ${run.step}`;
  return {
    code: 'ERR_RUN_STALLED',
    message: `the class made no progress for ${Math.round(quietMs / 1000)} s at ${where}, epoch ${run.record.epoch + 1} (its pace allows ${Math.round(patienceMs / 1000)} s); Start resumes from the latest checkpoint`,
  };
}

/** Ends `core`'s run if it is stalled at `now` (stallOf), in a fresh generation: its members abort the ring that sat still. */
export function endIfStalled(core: RoomCore, now: number, floorMs: number = STALL_FLOOR_MS): Stall | null {
  const error = stallOf(core, now, floorMs);
  if (!error) return null;
  core.runState.end('idle', error);
  core.log('stalled', [], error.message);
  return { error, generation: core.bumpGeneration() };
}
