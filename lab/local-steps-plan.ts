/**
 * The shape of a local-steps lab's plan (the full measurement and the quick smoke test are
 * in lab/local-steps-rows.ts): what the windows, the in-process accuracy runs and the
 * direct run (lab/local-steps-direct.ts) each read of it. Apart from the rows, so that the
 * direct run reads its part of the plan without importing the rows that start it.
 */
import type { AccuracyData, SyncVariant } from './local-steps-protocol';
import type { LocalStepsNetwork } from './local-steps-report';

export interface LocalStepsClass {
  network: LocalStepsNetwork;
  n: number;
  /** The variants (ids) timed and trained at this size; absent: all of the plan's. */
  variants?: string[];
}

/** Whether `variant` is timed and trained at class `cls`. */
export const runsAt = (cls: LocalStepsClass, variant: string): boolean => cls.variants === undefined || cls.variants.includes(variant);

export interface LocalStepsPlan {
  /** 'quick' for the smoke test (`--local-steps --quick`). */
  name: 'full' | 'quick';
  /** Class sizes and their networks: the targets read school-uplink at N = 4 and 8, and wifi at the largest class. */
  classes: LocalStepsClass[];
  /** The ways of summing compared; `timed` are timed on the network, the others' rounds are the fit through the local ones. */
  variants: SyncVariant[];
  timed: string[];
  /** Turns each timed window spans, by variant id. */
  windowTurns: Record<string, number>;
  /** The in-process runs. */
  accuracy: {
    threshold: number;
    defaultEpochs: number;
    maxEpochs: number;
    scoreEveryExamples: number;
    screenStride: number;
    screenMargin: number;
    /** Child processes at once (the machine's cores). */
    workers: number;
    /** A smoke test's limit on every run's examples; absent: none. */
    maxExamples?: number;
  };
  /** The non-IID comparison: own data by class against own data at random, at this class size. */
  nonIid: { n: number; runs: Array<{ data: AccuracyData; variant: SyncVariant }>; maxEpochs: number } | null;
  /** The direct check of the composition: one local-steps class to 97 % on the lab. */
  direct: { network: LocalStepsNetwork; n: number; variant: SyncVariant; budgetMs: number; screenMargin: number } | null;
}
