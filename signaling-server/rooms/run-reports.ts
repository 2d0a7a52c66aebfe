/**
 * What ring members report of the run, applied to the room: each step's progress (and the
 * checkpoint trust a report vouches for), evaluations, the run's end, the chief's
 * checkpoint writes, and the students' counts of their own examples.
 */
import { WebringError } from '../../shared/protocol/errors';
import type { EvaluationReport, FinishReport, OwnExamplesReport, ProgressReport } from '../../shared/protocol';
import type { CheckpointTrust } from '../../shared/checkpoints/checkpoint';
import type { TrustChange } from './checkpoint-guard';
import { NO_CHANGE, type MembershipChange, type RoomCore } from './room-core';

/**
 * A ring member's report of a step. The chief's is the room's progress; any other
 * member's weights hash may vouch for a checkpoint of that step (checkpoint-guard.ts):
 * the checkpoints whose trust it changed are returned, for the store to write down.
 */
export function recordProgress(core: RoomCore, memberId: string, report: ProgressReport): TrustChange[] {
  const m = core.requireMemberOfRun(memberId, report.run);
  core.members.noteProgress(m, report);
  core.runState.recordJoinCost(report, core.members.chief === m);
  if (core.members.chief !== m) {
    return core.runState.checkpointGuard.noteReport(m.id, report.step, report.weightsHash, core.runState.step, core.runState.saveEverySteps);
  }
  const { resynced } = core.runState.recordChiefProgress(report, core.clock.now());
  if (resynced) core.log('resynced', [], `weights differed at step ${report.step}; every replica reloaded the chief's state`);
  return [];
}

/**
 * Throws unless member `writerId` may store a checkpoint of `run` at `step` now: it is the
 * current chief (ERR_NOT_CHIEF), a run is in progress (ERR_BAD_STATE), the checkpoint is
 * this run's (ERR_STALE_RUN), and its step lies between the run's start and the class's
 * reported step plus a margin (ERR_STEP_OUT_OF_RANGE). Returns the writer's name.
 */
export function admitCheckpoint(core: RoomCore, writerId: string, run: number, step: number): string {
  const chief = core.members.chief;
  if (!chief || chief.id !== writerId) throw new WebringError('ERR_NOT_CHIEF', 'only the current chief writes checkpoints');
  if (!core.isTraining) throw new WebringError('ERR_BAD_STATE', `room ${core.name} has no run in progress: checkpoints are stored only during a run`);
  if (run !== core.runState.run) throw new WebringError('ERR_STALE_RUN', `a checkpoint of run ${run}; the room's run is ${core.runState.run}`, 'run');
  core.runState.checkpointGuard.admitStep(step, core.runState.step);
  return chief.name;
}

/**
 * Checkpoint `id` passed admitCheckpoint and is about to be stored: whether another rank
 * already vouched for its hash (a chief alone in the ring vouches for itself); otherwise it
 * waits for a report of its step.
 */
export function noteCheckpoint(core: RoomCore, id: string, writerId: string, step: number, weightsHash: string): CheckpointTrust {
  const ring = core.members.ring;
  const alone = ring.length === 1 && ring[0]!.id === writerId;
  return core.runState.checkpointGuard.noteCheckpoint(id, step, weightsHash, writerId, alone);
}

/**
 * A member's own examples per class (counts only): the teacher's page shows them live.
 * Only for the classes the room collects for, or else those of its run on own data (the
 * running one, or the last); ERR_BAD_STATE while it has neither, ERR_BAD_REQUEST for any
 * other label, and nothing changes: a student cannot fill the teacher's page with labels of
 * its own.
 */
export function recordOwnExamples(core: RoomCore, memberId: string, report: OwnExamplesReport): void {
  const m = core.members.find(memberId);
  if (!m || core.members.isHub(memberId)) throw new WebringError('ERR_NOT_IN_ROOM', 'only students and Node workers hold examples');
  const config = core.runState.config;
  const classes = core.collectSetting?.classes ?? (config && config.data !== 'mnist' ? config.classes : null);
  if (!classes) throw new WebringError('ERR_BAD_STATE', `room ${core.name} collects no examples and has no run on own data`);
  const stranger = Object.keys(report.counts).find((label) => !classes.includes(label));
  if (stranger !== undefined) throw new WebringError('ERR_BAD_REQUEST', `room ${core.name} collects ${classes.join(', ')}; not ${JSON.stringify(stranger)}`, 'counts');
  m.ownExamples = { ...report.counts };
}

/** A ring member's evaluation of the run; only the chief's is the room's. */
export function recordEvaluation(core: RoomCore, memberId: string, report: EvaluationReport): void {
  const m = core.requireMemberOfRun(memberId, report.run);
  if (core.members.chief === m) core.runState.recordEvaluation(report);
}

/**
 * Every replica ends at the same step; the chief's report ends the run, because the chief
 * reports only after its final checkpoint is stored. A failure report from anyone ends it.
 */
export function recordFinished(core: RoomCore, memberId: string, report: FinishReport): MembershipChange {
  const m = core.requireMemberOfRun(memberId, report.run);
  if (!core.isTraining) return NO_CHANGE;
  if (report.reason !== 'failed' && core.members.chief !== m) return NO_CHANGE;
  const admitted = core.members.admitWaiting(null).length > 0;
  if (report.reason === 'failed') {
    // The ring could not heal itself: everyone stops, and the room goes back to the
    // latest checkpoint in a fresh generation (a fresh ring).
    core.runState.end('idle', { code: 'ERR_PEER_FAILED', message: report.message ?? report.code ?? 'a worker failed' });
    return { generation: core.bumpGeneration(), trainingAborted: true };
  }
  core.runState.finishAt(report.step);
  core.runState.end('done', null);
  return admitted ? { generation: core.bumpGeneration(), trainingAborted: false } : NO_CHANGE;
}
