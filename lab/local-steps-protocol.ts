/**
 * What the local-steps lab (`npm run lab -- --section local-steps`, lab/local-steps-rows.ts) and its
 * accuracy runs (lab/local-steps-accuracy.ts, one child process a configuration) say to each
 * other: the plan goes in as the child's one argument (JSON), and the child prints one
 * `POINT {…}` line a scored point and one `DONE {…}` line at its end, on stdout.
 */
import type { StartConfig } from '../shared/protocol';
import { mixSeed } from '../shared/util/random';
import { LAB_DATASETS, LAB_TASK, LAB_WORKLOADS, type LabTaskId, type WorkloadRole } from '../shared/tasks/lab-workloads';

/** A way of summing: every step, or local steps with H of them a round. */
export interface SyncVariant {
  /** 'every-step', or 'H<localSteps>'; either with a suffix for settings beyond the defaults ('-adam', '-powersgd16-words8'). */
  id: string;
  sync: 'every-step' | 'local-steps';
  /** H; null every step. */
  localSteps: number | null;
  /** Local steps' settings beyond the product's defaults (the inner optimizer, a correction, the outer step); absent: the defaults. */
  config?: LocalStepsSettings;
}

/** The start-config fields a variant may set beside `sync` and `localSteps`. */
export type LocalStepsSettings = Partial<Pick<StartConfig, 'localOptimizer' | 'localLearningRate' | 'localCorrection' | 'outerOptimizer' | 'outerLearningRate' | 'outerMomentum' | 'secureAggregation' | 'powerSgdRank' | 'sumWordBits'>>;

export const EVERY_STEP: SyncVariant = { id: 'every-step', sync: 'every-step', localSteps: null };
export const localStepsVariant = (h: number): SyncVariant => ({ id: `H${h}`, sync: 'local-steps', localSteps: h });
/**
 * Local steps as the product ran them before rounds had an inner optimizer of their own
 * (until 2026-11-29): the run's Adam at 0.003, restarted every round.
 */
export const ADAM_RESTARTED = { localOptimizer: 'adam', localLearningRate: 0.003 } as const satisfies LocalStepsSettings;
export const adamLocalStepsVariant = (h: number): SyncVariant => ({ id: `H${h}-adam`, sync: 'local-steps', localSteps: h, config: ADAM_RESTARTED });

/** The start config's fields for a way of summing, beyond BASE_CONFIG and the dense model. */
export function variantConfig(v: SyncVariant): Partial<StartConfig> {
  return v.sync === 'every-step' ? { sync: 'every-step', ...v.config } : { sync: 'local-steps', localSteps: v.localSteps!, ...v.config };
}

/** `v` with its sums compressed: PowerSGD factors of rank `rank`, in `bits`-bit words (issue 40's bytes). */
export const compressedVariant = (v: SyncVariant, rank: number, bits: 8 | 16): SyncVariant => ({ ...v, id: `${v.id}-powersgd${rank}-words${bits}`, config: { ...v.config, powerSgdRank: rank, sumWordBits: bits } });
/** A way of summing whose sums are compressed: its all-reduce is its own, timed in its own window, never fitted through the others'. */
export const isCompressed = (variant: string): boolean => /-(powersgd|words)\d+/.test(variant);
/** Every step, whole or compressed. */
export const isEveryStep = (variant: string): boolean => variant === 'every-step' || variant.startsWith('every-step-');

/**
 * Where a run's examples come from:
 *  - SERVER_DATA (the lab's task's id): the 60,000 training examples of the lab's full
 *    dataset (shared/tasks/lab-workloads.ts), as the data service serves them (data 'dataset');
 *  - 'own-iid': the same examples as the class's own data (data 'own'), each device a random 1/N of them;
 *  - 'own-by-class': the same, each device the examples of some classes only (N = 3: 0–3, 4–6, 7–9,
 *    as test/e2e/own-data-tabs.spec.ts holds them).
 */
export type AccuracyData = LabTaskId | 'own-iid' | 'own-by-class';
/** The runs on the server's dataset: named by the task, as the reports (bench/lab-local-steps.json) have them. */
export const SERVER_DATA: LabTaskId = LAB_TASK.id;

export interface AccuracyPlan {
  /** Names the run in the report and the progress lines. */
  id: string;
  n: number;
  variant: SyncVariant;
  data: AccuracyData;
  /** Test accuracy (0..1) whose first crossing is timed. */
  threshold: number;
  /** The product's default run: this many epochs (its final accuracy is read at their end). */
  defaultEpochs: number;
  /** The run goes on past the default run, up to this many epochs, until it crosses the threshold. */
  maxEpochs: number;
  /** Scored after the first turn that brings this many examples since the last score (and at every epoch's end). */
  scoreEveryExamples: number;
  /** Every `screenStride`-th test digit makes the screen; a screen within `screenMargin` of the threshold is scored on all 10,000. */
  screenStride: number;
  screenMargin: number;
  /**
   * Every step as one Trainer on the global batch of 32·N: the same sums as N ranks over the
   * ring (test/unit/equivalence.test.ts proves it), for a fraction of the CPU. Only SERVER_DATA.
   */
  everyStepAsOne: boolean;
  /** Stops after this many examples whatever it reached (a smoke test, or a run whose budget is spent); absent: no such limit. */
  maxExamples?: number;
  /** The lab workload trained (shared/tasks/lab-workloads.ts); absent: the dense one. */
  workload?: WorkloadRole;
  /** Start-config fields beyond the variant's (scaleLearningRate for the conv workload's time to accuracy). */
  config?: Partial<StartConfig>;
  /** The tfjs backend the replicas train on; absent: WebAssembly, else the CPU (node-worker/node-backend.ts). */
  backend?: 'wasm' | 'cpu';
}

/** One scored point of a run: after the turn that trained `examples` in all. */
export interface AccuracyPoint {
  examples: number;
  steps: number;
  rounds: number;
  epoch: number;
  /** On every `screenStride`-th test digit. */
  screen: number;
  /** On all 10,000 test digits, when the screen came within the margin (and at the default run's end). */
  full: number | null;
  /** Seconds of the run so far, wall and CPU (the child's own). */
  wallSeconds: number;
  cpuSeconds: number;
}

export interface AccuracyCrossing {
  /** The first point scored at the threshold on all 10,000 digits. */
  examples: number;
  steps: number;
  rounds: number;
  accuracy: number;
  /** The last point scored before it (below the threshold): the crossing lies between; null when it is the first. */
  before: { examples: number; steps: number; rounds: number } | null;
}

export type AccuracyStop = 'crossed' | 'max-epochs' | 'max-examples' | 'diverged' | 'error';

export interface AccuracyResult {
  plan: AccuracyPlan;
  /** The start config the replicas ran with (schema defaults included; `epochs` is the plan's maxEpochs). */
  config: { model?: string; scaleLearningRate?: boolean; sync: string; localSteps: number; wire: string; secureAggregation: boolean; batchSizePerWorker: number; learningRate: number; optimizer: string; warmupSteps: number; balanceShares: boolean; outerOptimizer: string; outerLearningRate: number; outerMomentum: number; localOptimizer?: string; localLearningRate?: number; localCorrection?: string; powerSgdRank?: number; sumWordBits?: number; seed: number };
  /** Training examples in one epoch (own data keeps a fifth of each device's examples out). */
  epochExamples: number;
  points: AccuracyPoint[];
  crossed: AccuracyCrossing | null;
  /** The default run's end: its turns and its test accuracy on all 10,000 digits; null when the run stopped before it. */
  defaultRun: { examples: number; steps: number; rounds: number; accuracy: number } | null;
  /** Where the run stopped, and why. */
  end: { examples: number; steps: number; rounds: number; accuracy: number | null };
  stoppedBy: AccuracyStop;
  error: string | null;
  /** Bytes one rank sent on its links over the run, on average, per example the class trained; null for one replica standing for the class (and in reports before 2026-11-29). */
  bytesPerExample?: number | null;
  /** Each rank's examples in the last full turn: equal shares among identical devices. */
  lastShares: number[];
  /** The tfjs backend the run trained on (absent in reports from before 2026-12-02: the CPU). */
  backend?: string;
  wallSeconds: number;
  cpuSeconds: number;
}

/** The classes (of the lab's task's, 10 of them) device `rank` of `n` holds in a by-class split: contiguous groups, the larger first (N = 3: 0–3, 4–6, 7–9). */
export function classesOf(rank: number, n: number): number[] {
  const classes = LAB_TASK.outputs.length;
  const base = Math.floor(classes / n);
  const extra = classes % n;
  const from = rank * base + Math.min(rank, extra);
  const size = base + (rank < extra ? 1 : 0);
  return Array.from({ length: size }, (_, i) => from + i);
}

/** The device that holds training digit `index` in an IID split: a seeded hash, so about 1/N each, the classes mixed. */
export const iidDeviceOf = (index: number, n: number, seed: number): number => mixSeed(seed, index) % n;

/**
 * The start config an accuracy run trains with, before its schema fills in the rest: its
 * workload on the lab's full dataset, own data for the own-data runs (which turns secure
 * aggregation on, as a class's own data does by default), the variant's sync and the plan's
 * fields, and `epochs` raised to the plan's cap so that the run may go on past the default
 * run's end (nothing else reads it).
 */
export function planConfig(plan: AccuracyPlan): Partial<StartConfig> {
  return {
    ...LAB_WORKLOADS[plan.workload ?? 'dense'].config,
    dataset: LAB_DATASETS.full.id,
    ...(plan.data !== SERVER_DATA ? { data: 'own' as const } : {}),
    ...variantConfig(plan.variant),
    ...plan.config,
    epochs: plan.maxEpochs,
  };
}

export const POINT_PREFIX = 'POINT ';
export const DONE_PREFIX = 'DONE ';
