/**
 * Data sharding as tf.data does it for MultiWorkerMirroredStrategy: one global permutation
 * per epoch (seeded by the epoch), global batches taken in order from it, and each rank
 * taking its slice of every global batch as the batch plan cut it (batch-plan.ts). The
 * union of the slices is exactly the global batch. The test set is split evenly, and the
 * step counts here estimate a run's length for progress bars.
 */
import { mixSeed, permutationInto } from '../util/random';
import { shardOf, type DataCursor, type GlobalBatch } from './batch-plan';

/** The test examples rank `rank` of `worldSize` scores: a contiguous, near-equal slice of `testCount`. */
export function testShardOf(rank: number, worldSize: number, testCount: number): { start: number; count: number } {
  const from = Math.floor((rank * testCount) / worldSize);
  const to = Math.floor(((rank + 1) * testCount) / worldSize);
  return { start: from, count: to - from };
}

/** Steps an epoch takes at a fixed world size, counting the short last batch. */
export function stepsPerEpoch(trainCount: number, globalBatchSize: number): number {
  return Math.ceil(trainCount / globalBatchSize);
}

/**
 * Steps left until `epochs` epochs are done, from `cursor`, if the world size stayed as it
 * is now. An estimate for progress bars: the membership may change.
 */
export function stepsRemaining(cursor: DataCursor, epochs: number, trainCount: number, globalBatchSize: number): number {
  if (cursor.epoch >= epochs) return 0;
  const thisEpoch = Math.ceil((trainCount - cursor.offset) / globalBatchSize);
  return thisEpoch + (epochs - cursor.epoch - 1) * stepsPerEpoch(trainCount, globalBatchSize);
}

/** Caches the current epoch's permutation in one reused array. */
export class EpochPermutation {
  private readonly order: Uint32Array;
  private epoch = -1;

  constructor(
    private readonly trainCount: number,
    private readonly seed: number,
  ) {
    this.order = new Uint32Array(trainCount);
  }

  forEpoch(epoch: number): Uint32Array {
    if (epoch !== this.epoch) {
      permutationInto(this.order, mixSeed(this.seed, epoch));
      this.epoch = epoch;
    }
    return this.order;
  }

  /** Dataset indices of rank `rank`'s shard of a global batch, written to the front of `out`; returns that view. */
  sliceInto(out: Uint32Array, batch: GlobalBatch, rank: number): Uint32Array {
    const order = this.forEpoch(batch.epoch);
    const { start, count } = shardOf(batch, rank);
    for (let i = 0; i < count; i++) out[i] = order[start + i]!;
    return out.subarray(0, count);
  }

  get size(): number {
    return this.trainCount;
  }
}
