/**
 * How far the server lets a reported step run ahead of what it already knows (issue 57,
 * defect 7): a step of 10⁹ used to be accepted, and a chief whose extra tabs were most of
 * the ring could then drop every honest member, one claimed step each. Pure: the room hands
 * in its own counters (the chief's last counted step, the run's start, when it last heard
 * progress) and a report is refused past the bound, so one forged number cannot carry the
 * room's step, its checkpoints' window or a drop anywhere.
 */
import { WebringError } from '../../shared/protocol/errors';
import { MAX_RUN_STEPS, type StartConfig } from '../../shared/protocol';
import { datasetFacts } from '../../shared/tasks/registry';
import { stepsPerEpoch } from '../../shared/data/sharding';

/**
 * How many turns past the room's step a report may be (a turn: one step, or a round of
 * `localSteps` in a local-steps run). The room's step follows the chief's counted reports;
 * other members' reports come on other connections (or other signaling nodes) and ran ahead
 * of it by 3 steps in honest classes in the browser suite (a two-node cluster, a class of
 * thirty), so the bound is generous: it still refuses a step of 10⁹ and keeps a forger's
 * claim within a few seconds of training.
 */
export const REPORT_TURNS_AHEAD = 32;

/**
 * Past this long without a sign of progress (or the class's longest turn so far, if
 * longer), the bound starts to grow with the wall clock: the ring trains on while the server
 * restarts or a connection is down, and what comes back on the new connection is only the
 * latest report (signaling-session.ts keeps one per kind), many turns past the room's step.
 * Without this a class whose server restarted would have every report refused for the rest
 * of the lesson. A forger gains steps only by keeping the class's progress still this long,
 * which the teacher sees, and never more than CATCH_UP_TURN_MS allows.
 */
export const CATCH_UP_SILENCE_MS = 5_000;
/**
 * After the silence, one more turn per this many ms: no ring all-reduce over WebRTC
 * completes a turn in under a millisecond, so the bound overtakes any honest class within
 * about one silence, however fast it trains.
 */
export const CATCH_UP_TURN_MS = 1;

/**
 * Runs over a known dataset: a report is never past the run's start plus this many times
 * its plan (every epoch's steps at a ring of one, the most any membership makes), plus
 * PLAN_EXTRA_STEPS. A ring that changes mid-epoch rounds each part of that epoch up, so the
 * plan is not exact; twice it is far past any honest run and far below 10⁹.
 */
export const PLAN_SLACK = 2;
export const PLAN_EXTRA_STEPS = 1_000;

/** The room's own counters that bound a report. */
export interface RoomProgress {
  /** The chief's last counted step (the run's start step before any). */
  step: number;
  /** 1, or `localSteps` in a local-steps run. */
  stepsPerTurn: number;
  /** The run's first step: 0, or the step of the checkpoint it resumed. */
  startStep: number;
  config: StartConfig | null;
  /** Server time of the class's last sign of progress (run-state.ts), and its longest turn so far; absent in old records. */
  progressAt?: number;
  longestTurnMs?: number;
}

/**
 * The last step any member's report may carry at `now`: the room's step plus
 * REPORT_TURNS_AHEAD turns, growing after a silence (CATCH_UP_SILENCE_MS), and never past
 * the run's plan (planLimit).
 */
export function highestReportableStep(room: RoomProgress, now: number): number {
  const silence = room.progressAt === undefined ? 0 : now - room.progressAt;
  const quiet = Math.max(CATCH_UP_SILENCE_MS, room.longestTurnMs ?? 0);
  const catchUpTurns = silence > quiet ? Math.floor((silence - quiet) / CATCH_UP_TURN_MS) : 0;
  return Math.min(room.step + (REPORT_TURNS_AHEAD + catchUpTurns) * room.stepsPerTurn, planLimit(room));
}

/**
 * The most steps the run's plan allows: the teacher's maxSteps where set; for a known
 * dataset its epochs at a ring of one with PLAN_SLACK; on the class's own data (only the
 * devices know how many examples an epoch has) MAX_RUN_STEPS.
 */
export function planLimit(room: Pick<RoomProgress, 'startStep' | 'config'>): number {
  const config = room.config;
  if (!config) return MAX_RUN_STEPS;
  if (config.maxSteps !== undefined) return config.maxSteps;
  const facts = config.data === 'dataset' ? datasetFacts(config.dataset) : null;
  if (!facts) return MAX_RUN_STEPS;
  const plan = config.epochs * stepsPerEpoch(facts.trainCount, config.batchSizePerWorker);
  return Math.min(room.startStep + PLAN_SLACK * plan + PLAN_EXTRA_STEPS, MAX_RUN_STEPS);
}

/**
 * Throws ERR_STEP_OUT_OF_RANGE (field `step`) for a report's step past what the room allows
 * at `now`; `what` names the report in the message.
 */
export function checkReportedStep(room: RoomProgress, step: number, now: number, what: string): void {
  const highest = highestReportableStep(room, now);
  if (step > highest) {
    throw new WebringError('ERR_STEP_OUT_OF_RANGE', `${what} of step ${step}; the class has reported step ${room.step}, so at most ${highest} is accepted now`, 'step');
  }
}

/** Throws ERR_BAD_REQUEST (field `totalSteps`) for an estimate of the run's end past its plan. */
export function checkTotalSteps(room: RoomProgress, totalSteps: number): void {
  const limit = planLimit(room);
  if (totalSteps > limit) throw new WebringError('ERR_BAD_REQUEST', `a run's end at step ${totalSteps}; its plan allows at most ${limit}`, 'totalSteps');
}
