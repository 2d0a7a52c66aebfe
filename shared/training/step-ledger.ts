/**
 * The gradient tail's ledger (ledger.ts): what one step tells its sections, and the step's
 * own sections, the metrics and the count. The other participants keep theirs beside
 * them: the votes in agreement.ts, the share balancer's times in share-balancer.ts, link
 * selection in link-selection.ts, the data agreement in data-sections.ts. The trainer lists
 * them in one place (Trainer's constructor), in the order of the layout:
 *
 *   metrics · votes · times · links · count · data
 *
 * Every value is summed by the all-reduce in float32 without loss (the tail travels exact,
 * CollectiveOptions.exactTail), so every replica reads the same sums.
 */
import type { Algorithm, WireFormat } from '../protocol';
import type { LinkModels } from '../collectives/choice';
import type { LedgerSection } from './ledger';
import { cutBatch, type GlobalBatch } from '../data/batch-plan';
import { WebringError } from '../protocol/errors';

export interface StepOptions {
  /** This replica asks the ring to stop after this step. */
  requestStop?: boolean;
  /** This replica asks the ring to pause after this step (the teacher's Pause). */
  requestPause?: boolean;
  /**
   * The pending generation this replica is ready to switch to (links open), or null. A
   * function is asked only when the tail is written, after the forward and backward pass:
   * links that opened during the compute already count, which saves the class a step of
   * waiting for a joiner.
   */
  readyFor?: number | null | (() => number | null);
  /** Every link halving-doubling needs is open on this replica (RingNetwork.meshReady). */
  meshReady?: boolean;
  /** This replica's link to the room's hub is open (RingNetwork.hubReady); false without a hub. */
  hubReady?: boolean;
}

/** Where one step's time went on this replica, in ms. */
export interface StepTiming {
  /** Waiting for this step's examples to arrive from the data service (0 when the prefetch kept up). */
  dataMs: number;
  /** Forward and backward until the device finished them (the loss read back). */
  computeMs: number;
  /** Reading the gradients back from the device into the all-reduce buffer. */
  readbackMs: number;
  /** Crossing to the compute thread and back (the messages and transfers), beyond the maths; 0 in-process. */
  crossMs: number;
  /** The gradient all-reduce, including waiting for the slowest rank. */
  commMs: number;
  /** Averaging and posting the update here, plus the optimizer's last update in the replica (it runs while the next step starts). */
  applyMs: number;
}

export interface StepResult {
  /** The turn's first step (0-based); the replica's step counter is now step + steps. */
  step: number;
  /** The steps the turn trained: 1, or a round's local steps. */
  steps: number;
  /** Outer steps so far, this one included. */
  round: number;
  /** The turn summed a round trained before a member was lost (local-rounds.ts), rather than training one. */
  finishing: boolean;
  epoch: number;
  /** Mean loss over the whole global batch. */
  loss: number;
  /** Accuracy over the whole global batch. */
  trainAccuracy: number;
  /** L2 norm of the averaged gradient: zero would mean a broken backend readback. */
  gradNorm: number;
  /** True when any replica asked to stop; every replica sees the same value. */
  stop: boolean;
  /** True when any replica asked to pause after this step. */
  pause: boolean;
  /** True when this step was the last of its epoch. */
  epochEnd: boolean;
  /** Examples this replica trained on in this step. */
  examples: number;
  globalBatchSize: number;
  /** True when every replica was ready for the same pending generation: switch to it now. */
  admit: boolean;
  /** Whether this step compared the replicas' weights hashes, and whether they differed. */
  hashChecked: boolean;
  hashMismatch: boolean;
  /** Each rank's compute time for this step in ms, indexed by rank (identical on every replica). */
  computeMs: number[];
  /** The algorithm this step's gradients took. */
  algorithm: Algorithm;
  /** Each algorithm's mean link measurements as agreed in this step (null before any). */
  models: LinkModels | null;
  /** One sentence for the teacher: why the next step's algorithm was picked (choice.ts explainChoice). */
  reason: string;
  /** This rank's measured speed against the ring's median; 0 before it is measured. */
  speedVsMedian: number;
  /** The learning rate the step applied. */
  learningRate: number;
  timing: StepTiming;
}

/** What one step on this replica tells the tail's sections: one object per trainer, updated in place. */
export interface StepFacts {
  step: number;
  rank: number;
  worldSize: number;
  /** The global batch the step trains. */
  batch: GlobalBatch;
  options: StepOptions;
  /** The weights hash the step starts from on a step that compares them, else null. */
  hash: string | null;
  /** This rank's time from the step's start to writing the tail. */
  computeMs: number;
  /** Its time from the end of its previous all-reduce to the step's start; 0: not measured. */
  overheadMs: number;
  /** Its summed loss and correct count over its examples (0 when it sends zeros). */
  loss: number;
  correct: number;
  /** Examples it trained (its share, less any deleted example of its own data). */
  trained: number;
  /** Its own gradient or loss was not finite, or absurdly large: it sends zeros and says so. */
  nonFinite: boolean;
}

export type TailSection = LedgerSection<StepFacts>;

/** A turn starts: the sums its steps add to, and the times they measure, from zero. */
export function startTurn(facts: StepFacts, timing: StepTiming): void {
  facts.loss = 0;
  facts.correct = 0;
  timing.dataMs = 0;
  timing.computeMs = 0;
  timing.readbackMs = 0;
  timing.crossMs = 0;
}

/** Every replica holds the same sum, so every replica stops here, before applying one that is not finite on the fp16 wire. */
export function checkSummedGradient(squaredNorm: number, wire: WireFormat, step: number): void {
  if (wire !== 'fp16' || Number.isFinite(squaredNorm)) return;
  throw new WebringError('ERR_BAD_DATA', `step ${step}: the summed gradient is not finite on the fp16 wire (a partial sum beyond ±65504, or a diverged model); resume with wire 'fp32'`);
}

/** Facts before the first step: every field is set again by each step. */
export function initialFacts(): StepFacts {
  return {
    step: 0,
    rank: 0,
    worldSize: 1,
    batch: cutBatch({ epoch: 0, offset: 0 }, 0, 1),
    options: {},
    hash: null,
    computeMs: 0,
    overheadMs: 0,
    loss: 0,
    correct: 0,
    trained: 0,
    nonFinite: false,
  };
}

/** The summed loss and correct count: the class's metrics, once divided by the count. */
export class StepMetrics implements TailSection {
  lossSum = 0;
  correctSum = 0;

  floats(): number {
    return 2;
  }

  write(view: Float32Array, facts: StepFacts): void {
    view[0] = facts.nonFinite ? 0 : facts.loss;
    view[1] = facts.nonFinite ? 0 : facts.correct;
  }

  read(view: Float32Array): void {
    this.lossSum = view[0]!;
    this.correctSum = view[1]!;
  }
}

/**
 * How many replicas sent zeros for a gradient or loss that was not finite, and the
 * examples trained in the step, summed: the divisor of the mean. It is what the gradients'
 * sum holds, even where a device skipped a deleted example of its own data (own-data.ts).
 */
export class StepCount implements TailSection {
  examples = 0;

  floats(): number {
    return 2;
  }

  write(view: Float32Array, facts: StepFacts): void {
    view[0] = facts.nonFinite ? 1 : 0;
    view[1] = facts.nonFinite ? 0 : facts.trained;
  }

  read(view: Float32Array, facts: StepFacts): void {
    const diverged = view[0]!;
    if (diverged > 0) {
      // Every replica holds the same sum, so every replica stops here, before applying anything.
      throw new WebringError(
        'ERR_BAD_DATA',
        `step ${facts.step}: ${diverged} replica(s) computed a gradient or loss that is not finite (the model diverged); resume from a checkpoint with a lower learning rate`,
      );
    }
    this.examples = view[1]!;
  }
}
