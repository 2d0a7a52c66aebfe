/**
 * The shapes of two sections' rows, the collectives' (bench/lab-collectives.json) and the
 * class's (bench/lab-class.json), and of a target as every section hands it to the lab's
 * report (lab/report-store.ts). lab/report.ts and lab/class-report.ts turn measurements
 * into these; neither imports the other for them.
 */
import type { DroppedMember, JoinCost } from '../shared/protocol';
import type { AllReduceRow, AutoRow, SkippedRow } from './allreduce-rows';
import type { ModelValidation } from './validate-models';
import type { ModelName } from './network-models';
import type { TrainingNet, TrainingRow } from './training-rows';
import type { MixedClassReport } from './mixed-class';
import type { CpuSample } from './cpu-monitor';
import type { CpuBudget } from './cpu-budget';
import { LAB_WORKLOADS } from '../shared/tasks/lab-workloads';

export const TARGET_IDS = ['ring-vs-hub-wired-n4-16mb', 'bus-vs-port-wired-n4-16mb', 'auto-vs-ring-wifi-n8-16mb', 'auto-vs-best-worst-case'] as const;
export type TargetId = (typeof TARGET_IDS)[number];

/** The conv workload's examples/s at N = 8 against one device (lab/class-report.ts). */
export const SCALING_TARGET_ID = `${LAB_WORKLOADS.conv.model}-scaling-n8` as const;
export const CLASS_TARGET_IDS = [SCALING_TARGET_ID, 'time-to-accuracy-n8-vs-n1', 'mixed-class-phone', 'join-pause-n8', 'joiner-lockstep-n8'] as const;
export type ClassTargetId = (typeof CLASS_TARGET_IDS)[number];

/** `npm run lab -- --section secagg` (lab/secagg-rows.ts): the secure step against fp32's at a class size, and the one-epoch accuracy. */
export type SecaggTargetId = `secagg-step-overhead-n${number}` | 'secagg-accuracy';

/** `npm run lab -- --section local-steps` (lab/local-steps-report.ts): local steps against every step on slow links and in a big class. */
export const LOCAL_STEPS_TARGET_IDS = ['local-steps-vs-sync-school-uplink', 'local-steps-vs-sync-wifi-large-class', 'local-steps-noniid', 'local-steps-bytes'] as const;
export type LocalStepsTargetId = (typeof LOCAL_STEPS_TARGET_IDS)[number];

export interface Target {
  /** One of the ids a section of the report owns (lab/report-store.ts SECTIONS): TargetId, ClassTargetId, SecaggTargetId, LocalStepsTargetId, the school's, the faults' or the class of thirty's. */
  id: TargetId | ClassTargetId | SecaggTargetId | LocalStepsTargetId | (string & {});
  /** The goal in words, with its threshold. */
  goal: string;
  /** The figure, or null when this run did not measure what it needs (--quick, or fewer models). */
  value: number | null;
  met: boolean;
  /** Where the figure comes from. */
  detail: string;
}

/** bench/lab-collectives.json: the collectives section's rows (the report's targets are in bench/lab.json). */
export interface CollectivesReport {
  generatedAt: string;
  machine: { cores: number; kernel: string; node: string };
  /** Whether the kernel had netem: without it no model adds delay. */
  netem: boolean;
  quick: boolean;
  /** Wall-clock minutes of the whole run. */
  minutes: number;
  targets: Target[];
  models: Array<Pick<ModelValidation, 'name' | 'params' | 'measured' | 'expected' | 'ok' | 'delayMs' | 'firstAttempt'>>;
  allreduce: AllReduceRow[];
  auto: AutoRow[];
  /** Rows not measured because their bound alone is slower than a row measured beside them (lab/allreduce-rows.ts). */
  skipped: SkippedRow[];
  /** A real-GPU device's figure, when the session had one; why not, otherwise. */
  gpu: { measured: false; why: string };
}

export interface ScalingEntry {
  model: ModelName;
  net: TrainingNet;
  n: number;
  examplesPerSec: number;
  stepMs: number;
  /** examples/s(N) ÷ (N × examples/s(1)); null for the one-device row or without one. */
  efficiency: number | null;
  algorithm: string;
  /** Both this row and the one-device row it is set against counted. */
  counts: boolean;
}

export interface TimeSplit {
  stepMs: number;
  /** The chief's mean split over the window (its last step's when no mean was kept), ms. */
  dataMs: number;
  computeMs: number;
  readbackMs: number;
  allReduceMs: number;
  applyMs: number;
  /** What the split does not name: the step's bookkeeping, progress reports, waiting on others beyond the all-reduce. */
  otherMs: number;
  /** The least time the gradient's all-reduce can take on the row's network with the algorithm the chief used; null for one device. */
  allReduceBoundMs: number | null;
}

/**
 * A time-to-accuracy row composed from its parts: the steps the class needs to the
 * threshold, from the product's Trainer in-process on the global batch (exact data
 * parallelism: the same sums as N devices), and what a step and the start take on the lab,
 * from the scaling row of the same network, net and N.
 */
export interface ComposedTta {
  n: number;
  scaleLearningRate: boolean;
  globalBatch: number;
  /** The first in-process point at the threshold on the whole test set: its step and examples; null when the run never got there. */
  steps: number | null;
  examples: number | null;
  accuracy: number | null;
  /** Where an in-process run that never crossed stopped. */
  stoppedAt: { examples: number; steps: number; accuracy: number | null } | null;
  /** The scaling row's mean step, its Start-to-window time and the step its window opened on. */
  stepMs: number | null;
  startToFirstMs: number | null;
  firstStep: number | null;
  /** startToFirstMs + (steps − firstStep) × stepMs; null without every part. */
  composedMs: number | null;
  /** The scaling row counted and the in-process run ended well. */
  counts: boolean;
}

/** A direct run against the composition of the same N and setting. */
export interface TtaCheck {
  n: number;
  scaleLearningRate: boolean;
  composedMs: number | null;
  directMs: number | null;
  /** directMs / composedMs. */
  ratio: number | null;
}

/** One checkpoint of a time-to-accuracy row, scored after (or beside) the run on the official test set. */
export interface CheckpointPoint {
  id: string;
  step: number;
  /** Its capture time (metadata.createdAt) after the harness asked the run to start, ms. */
  ms: number;
  /** Accuracy on the screening subset (every 10th test digit), or null when not scored. */
  screen: number | null;
  /** Accuracy on all 10,000 test digits, or null when not scored. */
  accuracy: number | null;
}

export interface Reached {
  /** The first checkpoint at the threshold: its time after the start, step and full-test accuracy. */
  ms: number;
  step: number;
  accuracy: number;
  /** The checkpoint before it (below the threshold): the threshold was crossed between the two; 0 when none. */
  previousMs: number;
}

export type TtaStop = 'threshold' | 'budget' | 'lost-member' | 'run-ended';

export interface TtaRow {
  model: ModelName;
  net: TrainingNet;
  n: number;
  scaleLearningRate: boolean;
  /** The same run stands for both settings: its global batch is the reference batch, so scaling changes nothing. */
  sameWithScaling: boolean;
  referenceBatch: number;
  batchSizePerWorker: number;
  globalBatch: number;
  /** The config's rate, and the rate the schedule aims at after the warm-up. */
  learningRate: number;
  targetRate: number;
  warmupSteps: number;
  threshold: number;
  budgetMs: number;
  saveEverySteps: number;
  points: CheckpointPoint[];
  reached: Reached | null;
  /** Examples trained up to the first checkpoint at the threshold: its step × the global batch. */
  examplesToThreshold: number | null;
  stoppedBy: TtaStop;
  /** From the start to the stop, and the chief's steps in it. */
  runMs: number;
  steps: number;
  /** Over the chief's reports from its first step to its last. */
  examplesPerSec: number;
  /** What the run's own end-of-epoch evaluation said, if an epoch ended. */
  runEvaluations: Array<{ epoch: number; step: number; accuracy: number }>;
  dropped: DroppedMember[];
  cpu: CpuSample;
  /** The scorer runs beside the row at idle priority (SCHED_IDLE): its CPU, and the machine's busy share without it. */
  evaluator: { screens: number; fulls: number; cpuSeconds: number; machineBusyWithout: number };
  counts: boolean;
}

/** One entry of RoomStatus `joins` (the join telemetry of issue 16). */
export type JoinRecord = JoinCost;

export interface JoinMeasurement {
  repetition: number;
  /** The joiner's member name. */
  name: string;
  /** The telemetry's entry for this joiner, or null when none was complete in time. */
  record: JoinRecord | null;
  /** The harness's own view: the chief's stall on the server's clock, and the joiner's first report past its admission step. */
  observedStallMs: number | null;
  observedLockStepMs: number | null;
  /** From starting the joiner's process to the telemetry's complete entry. */
  waitedMs: number;
  error: string | null;
}

export interface JoinRow {
  model: ModelName;
  net: TrainingNet;
  /** The class after the join: N − 1 training, one joining. */
  n: number;
  measurements: JoinMeasurement[];
  /** Members of the class dropped during the row. */
  dropped: DroppedMember[];
  /** Why the row ended before its last join (the class did not settle after a join or a leave); null when it ran them all. */
  error: string | null;
  cpu: CpuSample;
  counts: boolean;
}

export const CLASS_SECTIONS = ['joins', 'scaling', 'mixed', 'timeToAccuracy'] as const;
export type ClassSection = (typeof CLASS_SECTIONS)[number];

export interface ClassReport {
  generatedAt: string;
  machine: { cores: number; kernel: string; node: string };
  quick: boolean;
  minutes: number;
  /** The largest class's caps against the machine: caps + the share kept for the server ≤ cores (lab/cpu-budget.ts). */
  cpuBudget: CpuBudget;
  /** Wall-clock minutes each section took. */
  sectionMinutes: Partial<Record<ClassSection, number>>;
  /**
   * The CFS period (µs) each section's CPU caps ran with (lab/cpu-caps.ts): a quota over a
   * long period stalls a capped device between bursts, so figures taken with different
   * periods are different regimes. Absent in reports from before it was recorded (100 ms).
   */
  sectionCfsPeriodUs?: Partial<Record<ClassSection, number>>;
  scaling: { rows: TrainingRow[]; table: ScalingEntry[]; splits: Array<{ model: ModelName; net: TrainingNet; n: number; split: TimeSplit | null; sentence: string }> } | null;
  /**
   * Time to the threshold, composed (`composed`: steps to it in-process × the scaling rows'
   * step) and checked by a direct run on the lab (`rows`, the direct runs; `check`, the one
   * against its composition). Reports from before 2026-12-01 hold direct rows only.
   */
  timeToAccuracy: { threshold: number; budgetMs: number; screenMargin: number; rows: TtaRow[]; composed?: ComposedTta[]; check?: TtaCheck | null } | null;
  mixed: MixedClassReport | null;
  joins: { rows: JoinRow[] } | null;
  /** A section that could not be measured, and why (its coded error). */
  errors: Array<{ section: ClassSection; code: string; message: string }>;
  targets: Target[];
}
