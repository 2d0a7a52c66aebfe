/**
 * The batch plan: which examples each rank trains in a step, decided in one place and read
 * everywhere else. A GlobalBatch says where in the epoch the step is, how far it moves the
 * cursor, and each rank's example count (its slice); the data sources read a rank's
 * examples from its slice, the share balancer weighs its times by it, the cursor moves on
 * by the span. Nothing downstream cuts a batch again, so nothing can cut it differently.
 *
 * Three things decide the slices, and only here:
 *  - equal shares, as tf.data shards for MultiWorkerMirroredStrategy: rank r of N takes
 *    [⌊r·G/N⌋, ⌊(r+1)·G/N⌋) of a global batch of G;
 *  - the share balancer's weights when shares follow speed (share-balancer.ts);
 *  - ranks sitting a step out after a hand-over (withoutRanksFrom);
 * or the data source decides them itself (the class's own data: where the examples are;
 * own-data.ts) and hands them to batchOfSlices.
 *
 * The cursor counts examples consumed within the epoch rather than steps, so it stays exact
 * when the world size (and so the global batch) changes between steps. The last global
 * batch of an epoch is whatever remains, split as the ranks' shares allow, so every example
 * of an epoch is trained exactly once whatever the membership did.
 */

export interface DataCursor {
  epoch: number;
  /** Examples of this epoch's permutation already consumed by completed steps. */
  offset: number;
}

export interface GlobalBatch {
  readonly epoch: number;
  /** Where the batch starts within the epoch: a position of its permutation (own data: a place of its line). */
  readonly offset: number;
  /**
   * Positions of the epoch the batch covers, which the cursor moves on by: `size`, except on
   * the class's own data, where a departed device's places are passed over, not trained.
   */
  readonly span: number;
  readonly worldSize: number;
  /**
   * Each rank's example count, in rank order, one per rank. On a permutation the slices are
   * contiguous and tile the batch: rank r's start where rank r − 1's end (shardOf).
   */
  readonly slices: readonly number[];
  /** The sum of the slices: the examples the whole ring trains in the step. */
  readonly size: number;
}

/** How the ring splits a batch beyond its size; the trainer knows both, the data source applies them. */
export interface BatchSplit {
  /** Each rank's share (summing to 1) when shares follow speed (share-balancer.ts); null: equal. */
  weights: ArrayLike<number> | null;
  /** The first rank that sits the step out (a hand-over's sender and joiners); null: every rank trains. */
  sitOutFrom: number | null;
}

const EQUAL_SPLIT: BatchSplit = { weights: null, sitOutFrom: null };

/**
 * Examples one step trains over the whole ring away from an epoch's end: perWorker for each
 * rank that can train (ranksThatTrain). A ring where none can still counts one, so the
 * learning rate's scaling never reaches zero. The data sources (DataSource.globalBatchSize,
 * and so the learning rate) and the teacher page both take it from here, so they agree.
 */
export function globalBatchSize(perWorker: number, trainingRanks: number): number {
  return perWorker * Math.max(1, trainingRanks);
}

/**
 * Ranks that train a step: every rank can train the server's digits, but on the class's
 * own data alone only a rank whose device holds examples can. So a device with none
 * neither grows the batch nor changes what the others train (own-data.ts).
 */
export function ranksThatTrain(ring: { ranks: number; holdingExamples: number; digits: boolean }): number {
  return ring.digits ? ring.ranks : ring.holdingExamples;
}

/**
 * The plan of the step at `cursor` over a permutation of `trainCount` examples: a global
 * batch of perWorker × N (or what the epoch has left), cut by `split`. A cursor at the end
 * of an epoch reads the next epoch.
 */
export function nextBatch(cursor: DataCursor, perWorker: number, worldSize: number, trainCount: number, split: BatchSplit = EQUAL_SPLIT): GlobalBatch {
  const atEnd = cursor.offset >= trainCount;
  const at = { epoch: atEnd ? cursor.epoch + 1 : cursor.epoch, offset: atEnd ? 0 : cursor.offset };
  const whole = cutBatch(at, Math.min(globalBatchSize(perWorker, worldSize), trainCount - at.offset), worldSize, split.weights);
  return split.sitOutFrom === null ? whole : withoutRanksFrom(whole, split.sitOutFrom);
}

/**
 * `size` positions of a permutation from `at`, cut into contiguous slices in rank order:
 * equal, or by `weights` (every replica sums them in the same order, so every replica cuts
 * alike). Rank r's slice ends at ⌊size · (w₀ + … + w_r)⌋, the last rank's at the batch's
 * end, so the slices tile it exactly whatever rounding does.
 */
export function cutBatch(at: DataCursor, size: number, worldSize: number, weights: ArrayLike<number> | null = null): GlobalBatch {
  const slices = new Array<number>(worldSize);
  let from = 0;
  let cumulative = 0;
  for (let r = 0; r < worldSize; r++) {
    let to: number;
    if (r === worldSize - 1) to = size;
    else if (weights) to = Math.min(size, Math.floor(size * (cumulative += weights[r]!)));
    else to = Math.floor(((r + 1) * size) / worldSize);
    slices[r] = to - from;
    from = to;
  }
  return { epoch: at.epoch, offset: at.offset, span: size, worldSize, slices, size };
}

/**
 * A batch whose slices its data source decided (own data: each rank trains what its device
 * holds of the span), covering `span` places from `at`.
 */
export function batchOfSlices(at: DataCursor, span: number, slices: readonly number[]): GlobalBatch {
  const size = slices.reduce((sum, n) => sum + n, 0);
  return { epoch: at.epoch, offset: at.offset, span, worldSize: slices.length, slices, size };
}

/**
 * `batch` with the ranks from `firstIdle` on sitting it out: the ranks before them train
 * exactly the slices they would have, and the batch ends where the first idle rank's slice
 * would have begun, so the cursor moves on by what was trained and the idle ranks' examples
 * open the next batch: still every example once. `batch` itself when nobody before
 * `firstIdle` would train anything (a short batch at an epoch's end): a step of no examples
 * would divide by zero. For a batch cut from a permutation (its span is its size).
 */
export function withoutRanksFrom(batch: GlobalBatch, firstIdle: number): GlobalBatch {
  if (firstIdle < 1 || firstIdle >= batch.worldSize) return batch;
  const size = shardOf(batch, firstIdle).start - batch.offset;
  if (size <= 0) return batch;
  const slices = batch.slices.map((n, r) => (r < firstIdle ? n : 0));
  return { ...batch, span: size, slices, size };
}

/** Rank `rank`'s part of a batch cut from a permutation: positions [start, start + count) of the epoch's. */
export function shardOf(batch: GlobalBatch, rank: number): { start: number; count: number } {
  let start = batch.offset;
  for (let r = 0; r < rank; r++) start += batch.slices[r]!;
  return { start, count: batch.slices[rank] ?? 0 };
}

/** The cursor after `batch` was trained; at the end of an epoch it rolls over to the next. */
export function advance(batch: GlobalBatch, trainCount: number): DataCursor {
  const offset = batch.offset + batch.span;
  return offset >= trainCount ? { epoch: batch.epoch + 1, offset: 0 } : { epoch: batch.epoch, offset };
}

/** No rank takes more than this many equal shares: it bounds each replica's batch buffers. */
export const MAX_SHARE_FACTOR = 4;
/** Nor fewer than this fraction of an equal share: a slow device still contributes and is still measured. */
export const MIN_SHARE_FACTOR = 1 / 8;
/** The most examples one replica trains in a step under `config`: its batch buffers' size. */
export function maxShareOf(config: { batchSizePerWorker: number; balanceShares: boolean }): number {
  // +1: cutting the batch by weights rounds each end down, so a share may hold one example more.
  return config.balanceShares ? config.batchSizePerWorker * MAX_SHARE_FACTOR + 1 : config.batchSizePerWorker;
}
