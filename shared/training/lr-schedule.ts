/**
 * The learning rate of every step: the warm-up of the recipe, and, with `scaleLearningRate`,
 * linear scaling with the global batch (Goyal et al. 2017): at a global batch of B the rate
 * is learningRate × B / referenceBatch. A class whose size changes mid-run changes B; the
 * rate then moves to its new target over RESCALE_RAMP_STEPS steps instead of jumping.
 *
 * Every replica must apply the same rate at the same step, so the schedule is a function
 * of the step, the global batch, and a ramp that the state hand-over and the checkpoints
 * carry. The ramp's ends are float32 numbers, so a joiner that received them as float32
 * computes exactly what the chief computes.
 */
import type { StartConfig } from '../protocol';
import type { LedgerSection } from './ledger';

/** Steps over which the rate moves to a new target after the global batch changed. */
export const RESCALE_RAMP_STEPS = 20;

/** The rate moves linearly from `from` to `to` over the RESCALE_RAMP_STEPS steps that start at `startStep`. */
export interface RateRamp {
  from: number;
  to: number;
  startStep: number;
}

type ScheduleConfig = Pick<StartConfig, 'learningRate' | 'warmupSteps' | 'scaleLearningRate' | 'referenceBatch'>;

export class LearningRateSchedule {
  private ramp: RateRamp | null = null;
  /** The hand-over state's section (ledger.ts): the ramp's float32 ends and its first step, -1 for none yet. */
  readonly section: LedgerSection<unknown> = {
    floats: () => 3,
    write: (view) => {
      view[0] = this.ramp?.from ?? 0;
      view[1] = this.ramp?.to ?? 0;
      view[2] = this.ramp?.startStep ?? -1;
    },
    read: (view) => this.restore(view[2]! < 0 ? null : { from: view[0]!, to: view[1]!, startStep: view[2]! }),
  };

  constructor(private readonly config: ScheduleConfig) {}

  /** The rate this config asks for at `globalBatch`, before warm-up and ramps. */
  targetFor(globalBatch: number): number {
    const { learningRate, scaleLearningRate, referenceBatch } = this.config;
    return Math.fround(scaleLearningRate ? (learningRate * globalBatch) / referenceBatch : learningRate);
  }

  /** The rate step `step` applies when its nominal global batch is `globalBatch`; starts a ramp when the target moved. */
  rateAt(step: number, globalBatch: number): number {
    const target = this.targetFor(globalBatch);
    if (this.ramp === null) this.ramp = { from: target, to: target, startStep: step };
    else if (target !== this.ramp.to) this.ramp = { from: Math.fround(this.ramped(step)), to: target, startStep: step };
    const { warmupSteps } = this.config;
    const warm = warmupSteps > 0 && step < warmupSteps ? (step + 1) / warmupSteps : 1;
    return warm * this.ramped(step);
  }

  private ramped(step: number): number {
    const { from, to, startStep } = this.ramp!;
    const t = Math.min(1, Math.max(0, (step - startStep) / RESCALE_RAMP_STEPS));
    return from + (to - from) * t;
  }

  /** The ramp to hand a joiner or write into a checkpoint; null before the first step. */
  get state(): RateRamp | null {
    return this.ramp ? { ...this.ramp } : null;
  }

  /** Takes the chief's ramp (a hand-over) or a checkpoint's. */
  restore(ramp: RateRamp | null): void {
    this.ramp = ramp ? { from: Math.fround(ramp.from), to: Math.fround(ramp.to), startStep: ramp.startStep } : null;
  }
}
