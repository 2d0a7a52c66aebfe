/**
 * Data sharding as tf.data does it for MultiWorkerMirroredStrategy: one global permutation
 * per epoch (seeded by the epoch), global batches taken in order from it, and rank r of N
 * taking slice r of each global batch. The union of the slices is exactly the global batch.
 *
 * The cursor counts examples consumed within the epoch rather than steps, so that it stays
 * exact when the world size (and so the global batch) changes between steps.
 */
import { mixSeed, permutationInto } from './random';

export interface DataCursor {
  epoch: number;
  /** Examples of this epoch's permutation already consumed by completed steps. */
  offset: number;
}

export interface GlobalBatch {
  epoch: number;
  /** Start of the global batch within the epoch's permutation. */
  offset: number;
  globalBatchSize: number;
}

/** Where the next step reads, rolling over to the next epoch when fewer than a global batch remain (drop_remainder). */
export function nextBatch(cursor: DataCursor, globalBatchSize: number, trainCount: number): GlobalBatch {
  if (cursor.offset + globalBatchSize > trainCount) {
    return { epoch: cursor.epoch + 1, offset: 0, globalBatchSize };
  }
  return { epoch: cursor.epoch, offset: cursor.offset, globalBatchSize };
}

export function advance(batch: GlobalBatch): DataCursor {
  return { epoch: batch.epoch, offset: batch.offset + batch.globalBatchSize };
}

export function stepsPerEpoch(trainCount: number, globalBatchSize: number): number {
  return Math.floor(trainCount / globalBatchSize);
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

  /** Dataset indices of rank `rank`'s slice of a global batch. */
  sliceInto(out: Uint32Array, batch: GlobalBatch, rank: number, perWorker: number): Uint32Array {
    const order = this.forEpoch(batch.epoch);
    const start = batch.offset + rank * perWorker;
    for (let i = 0; i < perWorker; i++) out[i] = order[start + i]!;
    return out;
  }

  get size(): number {
    return this.trainCount;
  }
}
