/**
 * How the class sums its work: the trainer's one place for it. A turn of the trainer is one
 * all-reduce of the buffer (what travels, then the tail) and everything around it (the votes,
 * the shares, the hash check, the hand-over, deadlines, checkpoints); what a replica puts
 * into the buffer before it, and what it does with the class's mean after, is the mode's.
 *
 *   every-step   one global batch: the sum of this rank's gradients; the mean goes to the
 *                replica's optimizer (MultiWorkerMirroredStrategy).
 *   local-steps  a round of up to `localSteps` global batches, each rank training its own
 *                slice of each alone: its change in weights times its examples; the mean
 *                moves the weights at the last sync through the outer optimizer (DiLoCo;
 *                local-rounds.ts).
 *
 * Everything the turn's machinery judges per turn (straggler deadlines, shares, the hash
 * check, a lost member) is then judged per round in local-steps mode, with nothing more.
 */
import { advance, type DataCursor, type GlobalBatch } from '../data/batch-plan';
import type { DataSource } from '../data/data-source';
import type { Replica } from '../compute/replica';
import type { Clock } from '../util/clock';
import type { LedgerSection } from './ledger';
import type { StepBuffers } from './step-buffers';
import type { StepFacts, StepTiming } from './step-ledger';
import type { RunPosition } from './run-position';
import type { StartConfig } from '../protocol';
import type { OuterOptimizer } from './outer-optimizer';
import { LocalRounds } from './local-rounds';

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

/** MultiWorkerMirroredStrategy: every step's gradients summed, the mean applied by each replica's optimizer. */
export class EveryStep implements SyncModeRun {
  readonly hashEveryTurn = false;
  readonly stateSections: ReadonlyArray<LedgerSection<unknown>> = [];
  readonly outer = null;

  constructor(private readonly host: TurnHost) {}

  async contribute(rank: number): Promise<TurnWork> {
    const host = this.host;
    const batch = host.nextBatch(host.position.cursor);
    host.endSitOut();
    const trained = batch.slices[rank]! > 0 ? await host.computeGradients(batch, rank) : 0;
    return { first: batch, end: advance(batch, host.data.trainCount), steps: 1, trained, finishing: false };
  }

  patienceMs(): undefined {
    return undefined;
  }

  async apply(step: number, worldSize: number, examples: number): Promise<number> {
    const { host } = this;
    // Every replica is at the same step, world and ramp, so every replica applies the same rate.
    const learningRate = host.rateAt(step, worldSize);
    if (examples > 0) await host.buffers.apply(host.replica, learningRate);
    return learningRate;
  }
}

/** The way of syncing the config names; a new way joins here and in the `sync` vocabulary. */
export function syncModeFor(config: StartConfig, host: TurnHost): SyncModeRun {
  switch (config.sync) {
    case 'every-step':
      return new EveryStep(host);
    case 'local-steps':
      return new LocalRounds(host, config);
  }
}
