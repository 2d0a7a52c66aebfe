/**
 * What a way of syncing (sync-mode.ts) and the trainer promise each other: the mode's side
 * (SyncModeRun), what it reaches in the trainer (TurnHost) and what a turn trained before
 * its all-reduce (TurnWork). Apart from the modes themselves, so that each mode
 * (local-rounds.ts) and the table that picks one (sync-mode.ts) import it, not each other.
 */
import type { DataCursor, GlobalBatch } from '../data/batch-plan';
import type { DataSource } from '../data/data-source';
import type { Replica } from '../compute/replica';
import type { Clock } from '../util/clock';
import type { LedgerSection } from './ledger';
import type { StepBuffers } from './step-buffers';
import type { StepFacts, StepTiming } from './step-ledger';
import type { RunPosition } from './run-position';
import type { OuterOptimizer } from './outer-optimizer';

/** What a turn trained on this replica, before the all-reduce. */
export interface TurnWork {
  /** The turn's first global batch: its epoch is the turn's, its slices the shares the balancer observes. */
  first: GlobalBatch;
  /** Where the data cursor stands once the turn is applied. */
  end: DataCursor;
  /** The steps the turn covers: 1, or the round's local steps. */
  steps: number;
  /** The examples this rank trained (summed over the round). */
  trained: number;
  /** The turn sums a round the survivors of a lost member trained before it was lost, instead of training one. */
  finishing: boolean;
}

/** What a mode reaches in the trainer: one object, built once in its constructor. */
export interface TurnHost {
  readonly replica: Replica;
  readonly buffers: StepBuffers;
  readonly data: DataSource;
  readonly clock: Clock;
  readonly position: RunPosition;
  /** Written by the mode: this rank's summed loss and correct count over the turn. */
  readonly facts: StepFacts;
  /** Written by the mode: where the turn's time went. */
  readonly timing: StepTiming;
  /** The global batch from `cursor`, cut by the current shares (without the ranks that sit the turn's first step out). */
  nextBatch(cursor: DataCursor): GlobalBatch;
  /**
   * The ranks that sat out while the hand-over's state travelled (trainer.ts sitOutFrom)
   * train from the next batch on: a round's later local steps are theirs too.
   */
  endSitOut(): void;
  /** The learning rate of step `step` in a ring of `worldSize`. */
  rateAt(step: number, worldSize: number): number;
  /** Reads this rank's examples of `batch` and computes their gradients' sum into the buffer; how many it trained. */
  computeGradients(batch: GlobalBatch, rank: number): Promise<number>;
}

export interface SyncModeRun {
  /** Hash-compare the replicas on every turn (a round is rare enough) rather than every 10th step. */
  readonly hashEveryTurn: boolean;
  /** Its sections of the hand-over's state (the outer optimizer's momentum), after the trainer's own. */
  readonly stateSections: ReadonlyArray<LedgerSection<unknown>>;
  /** The optimizer of the outer step, whose momentum checkpoints carry; null where the replica's own optimizer is the only one. */
  readonly outer: OuterOptimizer | null;
  /** Trains this rank's part of the turn from the position; leaves what travels in the buffer's first parameterCount floats. */
  contribute(rank: number, worldSize: number): Promise<TurnWork>;
  /**
   * How long the turn's all-reduce may wait for the slowest rank when that is longer than the
   * engine's timeout, given the slowest rank's compute in the last turn (0: none yet);
   * undefined: the engine's.
   */
  patienceMs(slowestLastMs: number): number | undefined;
  /** Applies the class's mean (already in the buffer) to the replica; returns the learning rate the turn applied. */
  apply(step: number, worldSize: number, examples: number): Promise<number>;
}
