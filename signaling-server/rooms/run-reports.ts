/**
 * What ring members report of the run, applied to the room: each step's progress (and the
 * checkpoint trust a report vouches for), evaluations, the run's end, the chief's
 * checkpoint writes, and the students' counts of their own examples.
 */
import { WebringError } from '../../shared/protocol/errors';
import type { EvaluationReport, FinishReport, OwnExamplesReport, ProgressReport } from '../../shared/protocol';
import type { CheckpointTrust } from '../../shared/checkpoints/checkpoint';
import { findTask } from '../../shared/tasks/registry';
import { collectLabelsOf, runOwnLabels } from '../../shared/tasks/collect';
import type { TrustChange } from './checkpoint-guard';
import { NO_CHANGE, type MembershipChange, type RoomCore } from './room-core';
import type { Member } from './membership';
import type { MemberDropped } from '../../shared/protocol';
import { checkReportedStep, checkTotalSteps, highestReportableStep } from './progress-bounds';

/**
 * A ring member's report of a step. The chief's is the room's progress; any other
 * member's weights hash may vouch for a checkpoint of that step (checkpoint-guard.ts):
 * the checkpoints whose trust it changed are returned, for the store to write down.
 */
export function recordProgress(core: RoomCore, memberId: string, report: ProgressReport): ProgressOutcome {
  const m = core.requireMemberOfRun(memberId, report.run);
  // No member trains in a generation the room has not made: a report of one (issue 38 found
  // generation 10¹² accepted) would mark that generation trained and turn batched admission off.
  if (report.generation > core.currentGeneration) {
    throw new WebringError('ERR_BAD_REQUEST', `a report of generation ${report.generation}; the room has made ${core.currentGeneration} at most`, 'generation');
  }
  checkProgressBounds(core, m, report);
  core.members.noteProgress(m, report);
  // A step in the admitting generation: the ring switched, and whoever waits may be admitted next.
  const admissionFormed = core.runState.formation.trainedIn(report.generation);
  const trust = recordStep(core, m, report);
  return { trust, admitNext: admissionFormed && core.members.waiting.length > 0 };
}

/**
 * A report's step and epoch within what the run allows, and a member's steps forward within
 * a generation (a failed turn, the only way back, starts a new one): ERR_BAD_REQUEST naming
 * the field otherwise. Issue 38 found every number taken as sent. Its step no further past
 * the room's own step than progress-bounds.ts allows (ERR_STEP_OUT_OF_RANGE), its estimate
 * of the run's end within the run's plan, its outer steps no more than its steps (issue 57).
 */
function checkProgressBounds(core: RoomCore, m: Member, report: ProgressReport): void {
  const config = core.runState.config;
  if (config && report.epoch > config.epochs) throw new WebringError('ERR_BAD_REQUEST', `a report of epoch ${report.epoch}; the run has ${config.epochs}`, 'epoch');
  if (config?.maxSteps !== undefined && report.step > config.maxSteps) throw new WebringError('ERR_BAD_REQUEST', `a report of step ${report.step}; the run stops at ${config.maxSteps}`, 'step');
  if (m.reportedGeneration === report.generation && report.step < m.step) {
    throw new WebringError('ERR_BAD_REQUEST', `a report of step ${report.step} after step ${m.step} in the same generation: a member's steps go forward`, 'step');
  }
  const room = core.runState.progress;
  checkReportedStep(room, report.step, core.clock.now(), 'a report');
  checkTotalSteps(room, report.totalSteps);
  // Every outer step takes at least one step.
  if (report.round !== undefined && report.round > report.step) throw new WebringError('ERR_BAD_REQUEST', `a report of ${report.round} outer steps by step ${report.step}`, 'round');
}

/** What a progress report changed beyond the room: checkpoint trust to store, and whether waiting students may be admitted now. */
export interface ProgressOutcome {
  trust: TrustChange[];
  admitNext: boolean;
}

function recordStep(core: RoomCore, m: Member, report: ProgressReport): TrustChange[] {
  core.runState.recordJoinCost(report, core.members.chief === m);
  if (core.members.chief !== m) {
    return core.runState.checkpointGuard.noteReport(m.id, report.step, report.weightsHash, core.runState.step, core.runState.saveEverySteps, core.runState.stepsPerTurn);
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
  core.runState.checkpointGuard.admitStep(step, core.runState.step, core.runState.stepsPerTurn);
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
 * A member's own examples per class (counts only; a text task's items under its one
 * label): the teacher's page shows them live. Only for the labels the room collects, or
 * else those of its run on own data (the
 * running one, or the last); ERR_BAD_STATE while it has neither, ERR_BAD_REQUEST for any
 * other label, and nothing changes: a student cannot fill the teacher's page with labels of
 * its own.
 */
export function recordOwnExamples(core: RoomCore, memberId: string, report: OwnExamplesReport): void {
  const m = core.members.find(memberId);
  if (!m || core.members.isHub(memberId)) throw new WebringError('ERR_NOT_IN_ROOM', 'only students and Node workers hold examples');
  const config = core.runState.config;
  const classes = core.collectSetting ? collectLabelsOf(core.collectSetting) : config ? runOwnLabels(config) : null;
  if (!classes) throw new WebringError('ERR_BAD_STATE', `room ${core.name} collects no examples and has no run on own data`);
  const stranger = Object.keys(report.counts).find((label) => !classes.includes(label));
  if (stranger !== undefined) throw new WebringError('ERR_BAD_REQUEST', `room ${core.name} collects ${classes.join(', ')}; not ${JSON.stringify(stranger)}`, 'counts');
  m.ownExamples = { ...report.counts };
}

/** A ring member's evaluation of the run; only the chief's is the room's. */
export function recordEvaluation(core: RoomCore, memberId: string, report: EvaluationReport): void {
  const m = core.requireMemberOfRun(memberId, report.run);
  if (core.members.chief !== m) return;
  checkReportedStep(core.runState.progress, report.step, core.clock.now(), 'an evaluation');
  const task = findTask(core.runState.record.config?.task ?? '');
  core.runState.recordEvaluation(report, task?.target === 'class', core.clock.now());
}

/** A finish report's effect: the membership change, and the member taken out for its own failure (told why), if any. */
export interface FinishOutcome {
  change: MembershipChange;
  failed: { socketId: string | null; notice: Extract<MemberDropped, { reason: 'failed' }> } | null;
}

/**
 * Every replica ends at the same step; the chief's report ends the run, because the chief
 * reports only after its final checkpoint is stored. A member whose own run failed leaves
 * the ring and the class trains on without it (it joins again by itself); only when it was
 * the last member does the run end, and the room goes back to the latest checkpoint.
 */
export function recordFinished(core: RoomCore, memberId: string, report: FinishReport): FinishOutcome {
  const m = core.requireMemberOfRun(memberId, report.run);
  if (!core.isTraining) return { change: NO_CHANGE, failed: null };
  if (report.reason === 'failed') return memberFailed(core, m, report);
  if (core.members.chief !== m) return { change: NO_CHANGE, failed: null };
  const admitted = core.members.admitWaiting(null).length > 0;
  // The run ends whatever the step says (refusing the chief's one finish would leave it
  // running), but the room's step moves only as far as a progress report could take it.
  core.runState.finishAt(Math.min(report.step, highestReportableStep(core.runState.progress, core.clock.now())));
  core.runState.end('done', null);
  return { change: admitted ? { generation: core.bumpGeneration(), trainingAborted: false } : NO_CHANGE, failed: null };
}

function memberFailed(core: RoomCore, m: Member, report: FinishReport): FinishOutcome {
  const why = `${report.code ?? 'no code'}: ${report.message ?? 'its run failed'}`.slice(0, 200);
  if (core.members.ring.length <= 1) {
    // Nobody else holds the live state: the room goes back to the latest checkpoint in a
    // fresh generation (a fresh ring), and the run starts again from it by itself.
    core.members.admitWaiting(null);
    core.runState.end('idle', { code: 'ERR_PEER_FAILED', message: why });
    return { change: { generation: core.bumpGeneration(), trainingAborted: true }, failed: null };
  }
  const socketId = m.socketId;
  core.members.removeFromRing(m.id);
  // Kept in the run's record: no further than a progress report could be.
  const step = Math.min(report.step, highestReportableStep(core.runState.progress, core.clock.now()));
  core.runState.recordDropped({ id: m.id, name: m.name, index: m.index, reason: 'failed', step, computeMs: 0, deadlineMs: 0, misbehaviour: null, reportedBy: null, detail: why, at: core.clock.now() });
  core.log('dropped', [m.name], `its run failed (${why}); the class trains on`);
  return { change: core.afterRemoval(), failed: { socketId, notice: { reason: 'failed', step, detail: why } } };
}
