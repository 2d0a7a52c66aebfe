/**
 * A room's training run as the server sees it: its lifecycle (idle, training, paused, done),
 * the chief's latest metrics and loss history, evaluations, the members dropped from it, and
 * the weight-consistency count. The replicas do the training; this only records what the
 * chief reports, so every signaling node can show the same run.
 */
import { DEFAULT_START_CONFIG } from '../../shared/tasks/start-config';
import { WebringError, type ErrorBody } from '../../shared/protocol/errors';
import { MAX_JOIN_COSTS, type DroppedMember, type EvaluationReport, type JoinCost, type MetricPoint, type ProgressReport, type ResumePoint, type RoomMetrics, type RoomState, type StartConfig } from '../../shared/protocol';
import { datasetFacts } from '../../shared/tasks/registry';
import { globalBatchSize } from '../../shared/data/batch-plan';
import { stepsPerEpoch } from '../../shared/data/sharding';
import { CheckpointGuard, newCheckpointGuard, type CheckpointGuardRecord } from './checkpoint-guard';
import { Formation, newFormation, type FormationRecord } from './formation';
import type { RoomProgress } from './progress-bounds';

/** Enough for a whole lesson's loss curve at one point per step; older points are dropped. */
export const MAX_HISTORY_POINTS = 5_000;
/**
 * The run's per-epoch scores and dropped members kept, newest last: far more than a lesson
 * has (an epoch takes minutes; a class holds 32 seats), and a bound on what one member's
 * reports can grow the room record to (issue 38 found both lists unbounded).
 */
export const MAX_EVALUATIONS = 1_000;
export const MAX_DROPPED_RECORDS = 500;

/** Appends `item`, keeping the newest `max`. */
function pushBounded<T>(list: T[], item: T, max: number): void {
  list.push(item);
  if (list.length > max) list.splice(0, list.length - max);
}

export interface Consistency {
  checks: number;
  mismatches: number;
  lastMismatchStep: number | null;
}

/** The run as plain data, but its loss history (kept apart: it is appended point by point). */
export interface RunRecord {
  state: RoomState;
  config: StartConfig | null;
  /** The current run, or the last one once it ended: its replicas' last reports still count. */
  run: number;
  step: number;
  epoch: number;
  loss: number | null;
  trainAccuracy: number | null;
  accuracy: number | null;
  /** The held-out loss after the last epoch; absent in records from before it was kept. */
  testLoss?: number | null;
  evaluations: RoomMetrics['evaluations'];
  lastError: ErrorBody | null;
  /** The chief's estimate of the run's last step, from its latest report. */
  reportedTotalSteps: number | null;
  dropped: DroppedMember[];
  consistency: Consistency;
  /** What this run's admissions cost; absent in records written before they were measured. */
  joins?: JoinCost[];
  /** The run's start step and the hashes that vouch for its checkpoints; absent in records from before. */
  guard?: CheckpointGuardRecord;
  /** The ring's admissions and shedding this run (formation.ts); absent in records from before. */
  formation?: FormationRecord;
  /** The chief's outer steps so far, and the examples the class trained in its last turn; absent in records from before. */
  round?: number;
  roundExamples?: number;
  /**
   * Server time of the class's last sign of progress (the run's start or resume, a step the
   * chief reported, an epoch scored), and the longest wait between two of them so far: what
   * the stall watch (stall-watch.ts) measures the class's pace by. Absent in records from before.
   */
  progressAt?: number;
  longestTurnMs?: number;
}

/** A room that has not trained yet. */
export const idleRun = (): RunRecord => ({
  state: 'idle',
  config: null,
  run: 0,
  step: 0,
  epoch: 0,
  loss: null,
  trainAccuracy: null,
  accuracy: null,
  testLoss: null,
  evaluations: [],
  lastError: null,
  reportedTotalSteps: null,
  dropped: [],
  consistency: { checks: 0, mismatches: 0, lastMismatchStep: null },
  joins: [],
});

export class RunState {
  constructor(
    private readonly room: string,
    private readonly r: RunRecord = idleRun(),
    private history: MetricPoint[] = [],
  ) {}

  /** The record the codec stores; owned by this run, not a copy. */
  get record(): Readonly<RunRecord> {
    return this.r;
  }

  /**
   * The loss points held here. A run rebuilt from its record starts without history, so
   * after a change these are the points the change recorded.
   */
  get historyPoints(): readonly MetricPoint[] {
    return this.history;
  }

  get run(): number {
    return this.r.run;
  }

  get step(): number {
    return this.r.step;
  }

  get config(): StartConfig | null {
    return this.r.config;
  }

  /** A run is in progress (training, or paused by the teacher). */
  get isTraining(): boolean {
    return this.r.state === 'training' || this.r.state === 'paused';
  }

  /** This run's checkpoint bounds and vouching; a record from before them bounds nothing below. */
  get checkpointGuard(): CheckpointGuard {
    return new CheckpointGuard((this.r.guard ??= newCheckpointGuard(0)));
  }

  /** This run's admissions and unreachable reports (formation.ts). */
  get formation(): Formation {
    return new Formation((this.r.formation ??= newFormation()));
  }

  /** How often the chief saves: the steps whose hashes are kept longest for vouching. */
  get saveEverySteps(): number {
    return this.r.config?.saveEverySteps ?? DEFAULT_START_CONFIG.saveEverySteps;
  }

  /** Steps per report: a local-steps run reports once per round (docs/local-steps.md). */
  get stepsPerTurn(): number {
    const c = this.r.config;
    return c?.sync === 'local-steps' ? c.localSteps : 1;
  }

  /** The counters a reported step is bounded by (progress-bounds.ts). */
  get progress(): RoomProgress {
    const r = this.r;
    return { step: r.step, stepsPerTurn: this.stepsPerTurn, startStep: r.guard?.startStep ?? 0, config: r.config, progressAt: r.progressAt, longestTurnMs: r.longestTurnMs };
  }

  /** A new run at server time `now`: everything the last one recorded is forgotten. Returns its number. */
  start(config: StartConfig, resume: ResumePoint | null, now: number): number {
    const run = this.r.run + 1;
    const step = resume?.step ?? 0;
    Object.assign(this.r, idleRun(), { state: 'training', config, run, step, epoch: resume?.dataCursor.epoch ?? 0, guard: newCheckpointGuard(step), formation: newFormation(), progressAt: now });
    this.history = [];
    return run;
  }

  pause(): void {
    if (this.r.state !== 'training') throw new WebringError('ERR_BAD_STATE', `room ${this.room} is not training`);
    this.r.state = 'paused';
  }

  /** The teacher's resume at `now`: the pause is nobody's stall. */
  resume(now: number): void {
    if (this.r.state !== 'paused') throw new WebringError('ERR_BAD_STATE', `room ${this.room} is not paused`);
    this.r.state = 'training';
    this.r.progressAt = now;
  }

  /** The class showed progress at `now`: the wait since the last sign counts toward its pace. */
  private progressed(now: number): void {
    if (this.r.progressAt !== undefined) this.r.longestTurnMs = Math.max(this.r.longestTurnMs ?? 0, now - this.r.progressAt);
    this.r.progressAt = now;
  }

  /** The run ends in `state`, with the error that ended it, if any. */
  end(state: RoomState, error: ErrorBody | null): void {
    this.r.state = state;
    this.r.lastError = error;
  }

  /** The chief's last step, which may be past the last one it reported. */
  finishAt(step: number): void {
    this.r.step = Math.max(this.r.step, step);
  }

  /**
   * The chief's progress: every replica computes the same global loss, so the chief's report
   * is the room's. Only a report of a newer step counts. Returns whether the replicas'
   * weights were found to differ (and were resynchronised from the chief's).
   */
  recordChiefProgress(report: ProgressReport, at: number): { counted: boolean; resynced: boolean } {
    if (report.step <= this.r.step) return { counted: false, resynced: false };
    const c = this.r.consistency;
    if (report.hashChecked) c.checks++;
    if (report.hashMismatch) {
      c.mismatches++;
      c.lastMismatchStep = report.step;
    }
    this.r.reportedTotalSteps = report.totalSteps;
    this.progressed(at);
    this.r.step = report.step;
    this.r.round = report.round ?? report.step;
    this.r.roundExamples = report.roundExamples ?? 0;
    this.r.epoch = report.epoch;
    this.r.loss = report.loss;
    this.r.trainAccuracy = report.trainAccuracy;
    this.history.push({ at, step: report.step, loss: report.loss, trainAccuracy: report.trainAccuracy });
    if (this.history.length > MAX_HISTORY_POINTS) this.history.splice(0, this.history.length - MAX_HISTORY_POINTS);
    return { counted: true, resynced: report.hashMismatch };
  }

  /** An epoch's held-out scores at `at`; accuracy is kept for a task that tells classes apart only. */
  recordEvaluation(report: EvaluationReport, classifies: boolean, at: number): void {
    this.progressed(at);
    const accuracy = classifies ? report.accuracy : null;
    this.r.accuracy = accuracy;
    this.r.testLoss = report.testLoss;
    pushBounded(this.r.evaluations, { epoch: report.epoch, step: report.step, accuracy, testLoss: report.testLoss }, MAX_EVALUATIONS);
  }

  /** Joiners were admitted into the running ring in `generation`; their cost is reported later. */
  recordAdmission(generation: number, joiners: string[], classStep: number): void {
    this.formation.admitted(generation, classStep);
    const joins = (this.r.joins ??= []);
    joins.push({ generation, joiners, atStep: this.r.step, pauseMs: null, lockStepMs: null });
    if (joins.length > MAX_JOIN_COSTS) joins.splice(0, joins.length - MAX_JOIN_COSTS);
  }

  /**
   * A report's join costs: the chief's pause of the class for the admission of its
   * generation, a joiner's time to lock-step (the slowest joiner's counts).
   */
  recordJoinCost(report: Pick<ProgressReport, 'generation' | 'switchPauseMs' | 'lockStepMs'>, fromChief: boolean): void {
    const join = this.r.joins?.find((j) => j.generation === report.generation);
    if (!join) return;
    if (fromChief && report.switchPauseMs !== undefined) join.pauseMs = report.switchPauseMs;
    if (report.lockStepMs !== undefined) join.lockStepMs = Math.max(join.lockStepMs ?? 0, report.lockStepMs);
  }

  /** A member the ring let go during this run. */
  recordDropped(dropped: DroppedMember): void {
    pushBounded(this.r.dropped, dropped, MAX_DROPPED_RECORDS);
  }

  /** The chief's estimate of the last step, or one from the config for a ring of `ringSize` (none for own data). */
  totalSteps(ringSize: number): number | null {
    const config = this.r.config;
    // The class's own data: only the devices know how many examples an epoch has.
    const facts = config && config.data === 'dataset' ? datasetFacts(config.dataset) : null;
    const estimate =
      config && facts && ringSize > 0
        ? Math.min(config.epochs * stepsPerEpoch(facts.trainCount, globalBatchSize(config.batchSizePerWorker, ringSize)), config.maxSteps ?? Number.POSITIVE_INFINITY)
        : null;
    return this.r.reportedTotalSteps ?? estimate;
  }

  metrics(): RoomMetrics {
    return { room: this.room, history: [...this.history], evaluations: [...this.r.evaluations] };
  }
}
