/**
 * Data sharding as tf.data does it for MultiWorkerMirroredStrategy: one global permutation
 * per epoch (seeded by the epoch), global batches taken in order from it, and each rank
 * taking a contiguous slice of every global batch. The union of the slices is exactly the
 * global batch.
 *
 * The cursor counts examples consumed within the epoch rather than steps, so it stays exact
 * when the world size (and so the global batch) changes between steps. The last global
 * batch of an epoch is whatever remains, split as evenly as the ranks allow, so every
 * example of an epoch is trained exactly once whatever the membership did.
 */
import { mixSeed, permutationInto } from '../util/random';

export interface DataCursor {
  epoch: number;
  /** Examples of this epoch's permutation already consumed by completed steps. */
  offset: number;
}

export interface GlobalBatch {
  epoch: number;
  /** Start of the global batch within the epoch's permutation. */
  offset: number;
  /** Examples in this global batch: perWorker × N, or fewer at the end of an epoch. */
  size: number;
  worldSize: number;
  /**
   * Each rank's share of the batch (summing to 1) when shares follow speed
   * (share-balancer.ts); absent for equal shares.
   */
  weights?: ArrayLike<number> | null;
  /**
   * Ranks from this one on sit the step out with no examples (a joiner whose hand-over is
   * still on its way: withoutRanksFrom). The others keep the slices the whole batch gives
   * them, so `size` counts only theirs; absent: every rank trains.
   */
  activeRanks?: number;
  /** The examples the slices are cut from: the whole batch's size when some ranks sit out, else `size`. */
  cutSize?: number;
  /**
   * Places of the epoch the batch covers, when that is not `size` (the class's own data:
   * places of a device that left are covered but not trained; own-data.ts).
   */
  span?: number;
  /** Each rank's examples, when the source decides them (own data: where the examples are). */
  shares?: readonly number[];
}

/** The global batch the next step trains on. A cursor at the end of an epoch reads the next epoch. */
export function nextBatch(cursor: DataCursor, perWorker: number, worldSize: number, trainCount: number): GlobalBatch {
  const atEnd = cursor.offset >= trainCount;
  const epoch = atEnd ? cursor.epoch + 1 : cursor.epoch;
  const offset = atEnd ? 0 : cursor.offset;
  return { epoch, offset, size: Math.min(perWorker * worldSize, trainCount - offset), worldSize };
}

/** The cursor after `batch` was trained; at the end of an epoch it rolls over to the next. */
export function advance(batch: GlobalBatch, trainCount: number): DataCursor {
  const offset = batch.offset + (batch.span ?? batch.size);
  return offset >= trainCount ? { epoch: batch.epoch + 1, offset: 0 } : { epoch: batch.epoch, offset };
}

/**
 * Rank `rank`'s part of a global batch: [start, start + count) within the epoch's
 * permutation. Contiguous parts in rank order that tile the batch exactly: equal, or by the
 * batch's weights (every replica sums them in the same order, so every replica cuts alike).
 */
export function shardOf(batch: GlobalBatch, rank: number): { start: number; count: number } {
  const { worldSize, weights } = batch;
  if (batch.activeRanks !== undefined && rank >= batch.activeRanks) return { start: batch.offset + batch.size, count: 0 };
  const size = batch.cutSize ?? batch.size;
  if (!weights) {
    const from = Math.floor((rank * size) / worldSize);
    const to = Math.floor(((rank + 1) * size) / worldSize);
    return { start: batch.offset + from, count: to - from };
  }
  let before = 0;
  for (let r = 0; r < rank; r++) before += weights[r]!;
  const from = rank === 0 ? 0 : Math.min(size, Math.floor(size * before));
  const to = rank === worldSize - 1 ? size : Math.min(size, Math.floor(size * (before + weights[rank]!)));
  return { start: batch.offset + from, count: Math.max(0, to - from) };
}

/**
 * `batch` with the ranks from `firstIdle` on sitting it out: the ranks before them train
 * exactly the slices they would have, and the batch ends where the first idle rank's slice
 * would have begun, so the cursor moves on by what was trained and the idle ranks' examples
 * open the next batch: still every example once. `batch` itself when nobody before
 * `firstIdle` would train anything (a short batch at an epoch's end): a step of no examples
 * would divide by zero.
 */
export function withoutRanksFrom(batch: GlobalBatch, firstIdle: number): GlobalBatch {
  if (firstIdle < 1 || firstIdle >= batch.worldSize) return batch;
  const size = shardOf(batch, firstIdle).start - batch.offset;
  if (size <= 0) return batch;
  return { ...batch, size, cutSize: batch.size, activeRanks: firstIdle };
}

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
