/**
 * What the secure-aggregation lab's runs (lab/secagg-rows.ts) and its report
 * (lab/secagg-report.ts) both name: the modes compared, the goals, and the rows and report
 * they pass between them. Apart from both, so that the runs import the report's summary and
 * targets without the report importing the runs.
 */
import type { StartConfig, StepTimingReport } from '../shared/protocol';
import type { ModelName, ModelProfile } from './network-models';
import type { DeviceProfile } from './cpu-caps';
import type { CpuSample } from './cpu-monitor';
import type { Target } from './report-types';
import { LAB_DATASETS, type LAB_WORKLOADS } from '../shared/tasks/lab-workloads';

export const SECAGG_MODES = ['secure', 'fp32', 'fp16'] as const;
export type SecaggMode = (typeof SECAGG_MODES)[number];

/** The accuracy runs' class size and dataset, the lab's small one (one epoch of the full one is about 235 steps of seconds each here). */
export const ACCURACY_N = 8;
export const ACCURACY_DATASET: string = LAB_DATASETS.small.id;
/** A secure step may take this much of the fp32 step at most. */
export const STEP_OVERHEAD_GOAL = 1.15;
/** The secure run's final test accuracy within this many points of the fp32 run's. */
export const ACCURACY_GOAL_POINTS = 0.3;

/** Steps the chief must be past before a window opens: the model built, the links opened and measured, the shares balanced once. */
export const WARMUP_STEPS = 8;

export interface SecaggStepRow {
  n: number;
  mode: SecaggMode;
  device: DeviceProfile;
  /** What the run's start config added to BASE_CONFIG and the dense model. */
  config: Partial<StartConfig>;
  /** The window: its first and last step (the chief's, as the room saw them). */
  fromStep: number;
  toStep: number;
  /** Median ms between consecutive steps of the window on the server's clock, and the quartiles. */
  stepMs: number;
  stepMsQ1: number;
  stepMsQ3: number;
  /** Each step interval of the window, ms. */
  intervalsMs: number[];
  /** The algorithm of the chief's last step in the window, and why. */
  algorithm: string;
  reason: string;
  /** The chief's split, averaged over the window's steps its reports showed. */
  timingMean: StepTimingReport | null;
  /** Measured: bytes each device's interface sent per step over the window, by device, and their mean. */
  wireBytesByDevice: number[];
  wireBytesPerStep: number;
  /** Computed: the buffer's bytes (per the mode) times what the algorithm sends per byte of buffer. */
  payloadBytesPerStep: number;
  cpu: CpuSample;
  /** False when the machine was saturated or the class lost a member: then it measured something else. */
  counts: boolean;
  lost: string | null;
}

export interface SecaggAccuracyRow extends SecaggStepRow {
  /** ACCURACY_DATASET. */
  dataset: string;
  /** The room's final test accuracy (0..1), null when the run did not finish with one. */
  accuracy: number | null;
  /** Steps of the epoch, and the run's seconds from Start to its end. */
  steps: number;
  seconds: number;
}

export interface SecaggReport {
  generatedAt: string;
  machine: { cores: number; kernel: string; node: string };
  netem: boolean;
  minutes: number;
  model: ModelName;
  params: ModelProfile['params'];
  /** The dense workload's model. */
  net: (typeof LAB_WORKLOADS)['dense']['model'];
  /** The class sizes measured, and each one's device (the largest cap the machine holds for N of them). */
  sizes: Array<{ n: number; device: DeviceProfile; cores: number }>;
  steps: SecaggStepRow[];
  accuracy: SecaggAccuracyRow[];
  targets: Target[];
  /** What could not be measured, by size or section. */
  errors: Array<{ what: string; message: string }>;
}
