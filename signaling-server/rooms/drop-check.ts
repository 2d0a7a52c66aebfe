/**
 * What the server can check of a chief's drop of a straggler against what it saw (issue 25):
 * the chief's word decides a drop, but only within what the other members' own reports
 * allow. Pure: the room hands in the members and the run's dropped records, and removes the
 * straggler only when this does not throw.
 */
import { WebringError } from '../../shared/protocol/errors';
import { DEFAULT_STRAGGLER_POLICY, type DroppedMember, type DropRequest } from '../../shared/protocol';
import type { Member } from './membership';
import { medianStep } from './formation';

/**
 * How far past the other members' reported step a chief's drop may be. The chief drops after
 * its step's report; the others' reports of the step before have reached the server by
 * then (they sent them before taking part in this step's all-reduce), so one step would do;
 * the second absorbs a report still in flight between signaling nodes.
 */
export const DROP_STEPS_AHEAD = 2;

/**
 * At most this many stragglers dropped per DROP_WINDOW_MS of wall-clock time (issue 57). An
 * honest chief drops one per generation, and the next takes the detector's samples
 * (StragglerPolicy.minSamples steps) and its strikes of at least its floor, plus the re-form:
 * a real storm drops a few a minute, and a refused drop is asked for again at the next missed
 * step, so a storm still clears, a little later. A chief whose extra tabs outvote the class
 * cannot empty it in seconds: it removes at most this many honest members a minute, each in
 * the teacher's log, while the teacher can remove the chief.
 */
export const MAX_DROPS_PER_WINDOW = 6;
export const DROP_WINDOW_MS = 60_000;

/** What the room knows that bounds a drop: its step, a turn's steps and the time now. */
export interface DropContext {
  roomStep: number;
  stepsPerTurn: number;
  now: number;
}

/**
 * Throws unless chief `reporter` may drop `accused` from `ring` as `request` says, given the
 * run's `dropped` records and the room's counters `room`. What it cannot check (a plausible compute time the accused never
 * reported) stays the chief's word. Refused drops change nothing:
 * - the chief cannot drop itself, and the numbers must be a miss the straggler detector
 *   can report: a deadline at or above its floor, and a compute time past it
 *   (ERR_BAD_ACCUSATION);
 * - the step must be one most of the other ring members have reached, give or take
 *   DROP_STEPS_AHEAD (their own progress reports, not the chief's: ERR_BAD_ACCUSATION). A
 *   majority, not the highest: one extra tab of the chief's reporting step 10⁹ let it
 *   drop the whole class in under a second (issue 38);
 * - the step must be no further than one turn past the room's step, which only the chief's
 *   own counted reports move (ERR_STEP_OUT_OF_RANGE): the chief drops after its step's
 *   report, which arrived first on the same connection (issue 57);
 * - one drop per step in a run, and MAX_DROPS_PER_WINDOW a minute (ERR_RATE_LIMITED): an
 *   honest chief drops one straggler per generation, and a new generation takes at least a step;
 * - the accused's own reports must not contradict it: a report of one of the steps it is
 *   said to have missed with a compute time under the floor, or of the step itself
 *   within the deadline (ERR_BAD_ACCUSATION). Every rank learns every rank's compute time
 *   from the same all-reduce, so an honest straggler's report carries the very number
 *   the chief saw.
 */
export function checkDrop(reporter: Member, accused: Member, ring: readonly Member[], dropped: readonly DroppedMember[], request: DropRequest, room: DropContext): void {
  const { step, computeMs, deadlineMs } = request;
  if (accused === reporter) throw new WebringError('ERR_BAD_ACCUSATION', 'the chief does not drop itself');
  const floorMs = DEFAULT_STRAGGLER_POLICY.floorMs;
  if (deadlineMs < floorMs || computeMs <= deadlineMs) {
    throw new WebringError('ERR_BAD_ACCUSATION', `a straggler takes longer than a deadline of at least ${floorMs} ms; ${Math.round(computeMs)} ms against ${Math.round(deadlineMs)} ms is no miss`);
  }
  const others = ring.filter((m) => m !== reporter);
  const reached = others.filter((m) => m.step + DROP_STEPS_AHEAD >= step).length;
  if (reached * 2 <= others.length) {
    const classStep = medianStep(others);
    throw new WebringError('ERR_BAD_ACCUSATION', `drop at step ${step}; ${others.length - reached} of the other ${others.length} ring members have not reached it (their median report is step ${classStep})`);
  }
  const highest = room.roomStep + room.stepsPerTurn;
  if (step > highest) throw new WebringError('ERR_STEP_OUT_OF_RANGE', `drop at step ${step}; the class has reported step ${room.roomStep}, so at most ${highest}`, 'step');
  const lastDrop = dropped.filter((d) => d.reason === 'straggler').reduce((top, d) => Math.max(top, d.step), -1);
  if (step <= lastDrop) throw new WebringError('ERR_RATE_LIMITED', `a straggler was already dropped at step ${lastDrop} of this run; one drop per step`);
  const recent = dropped.filter((d) => d.reason === 'straggler' && d.at > room.now - DROP_WINDOW_MS).length;
  if (recent >= MAX_DROPS_PER_WINDOW) {
    throw new WebringError('ERR_RATE_LIMITED', `${recent} stragglers dropped in the last ${DROP_WINDOW_MS / 1000} s; at most ${MAX_DROPS_PER_WINDOW} a minute`);
  }
  const missed = accused.step <= step && accused.step > step - DEFAULT_STRAGGLER_POLICY.strikes;
  if ((missed && accused.computeMs > 0 && accused.computeMs <= floorMs) || (accused.step === step && accused.computeMs <= deadlineMs)) {
    throw new WebringError('ERR_BAD_ACCUSATION', `${accused.name} reported ${Math.round(accused.computeMs)} ms at step ${accused.step}: no miss of the ${Math.round(deadlineMs)} ms deadline`);
  }
}
