/**
 * A task's dataset streamed from the server's data service: the same shards as InMemoryShards (one
 * seeded permutation per epoch, each rank a contiguous slice of every global batch), but a
 * worker holds only the examples it is about to train.
 *
 * Every replica knows the epoch's permutation and the world, so it knows which indices it
 * trains in its next steps. After each step it asks for those of the next PREFETCH_STEPS
 * steps it does not hold yet, in one request whenever at least half of that window is
 * missing, so compute does not wait on the network, and an example travels once per epoch,
 * to the one worker that trains it. A change of world size moves the shard boundaries; the
 * examples the new shard lacks are fetched on the spot (a short wait at the step after a
 * join or a leave), and the ones fetched for the old shard are dropped from the cache in turn.
 * The step being read pins its examples in the cache, so no prefetch evicts them meanwhile.
 *
 * The test set is fetched the same way, only the rank's shard of it, and once: the
 * replicas keep it for every later evaluation.
 */
import { MAX_EXAMPLES_PER_REQUEST, type SplitCounts } from './data-service';
import { ExampleCache, type CachedFormat } from './example-cache';
import { httpExampleFetcher, type ExampleFetcher } from './example-fetcher';
import type { StartConfig } from '../protocol';
import { featureCount } from '../tasks/task';
import { findDataset } from '../tasks/registry';
import { WebringError } from '../protocol/errors';
import type { DataContext, DataSource } from './data-source';
import { maxShareOf } from './batch-plan';
import { advance, globalBatchSize, nextBatch, shardOf, type BatchSplit, type DataCursor, type GlobalBatch } from './batch-plan';
import { EpochPermutation, testShardOf } from './sharding';

/** How many steps ahead a worker holds its examples: enough to ride out a slow reply. */
export const PREFETCH_STEPS = 8;
/** The cache holds this many prefetch windows, so an example is never dropped before it is trained. */
const CACHE_WINDOWS = 3;
/** The server's bound on one request is this many times the largest a worker makes. */
const REQUEST_MARGIN = 2;

/**
 * The most examples a worker whose shards hold up to `maxShare` examples asks for in one
 * request, and the most the server gives one request of such a run (edge/data-api.ts): its
 * largest request is a prefetch window plus one shard, and the test shard comes in pieces
 * of this size. The default recipe (32 per worker, shares that follow speed, so a fast rank
 * trains up to 129 a step) keeps the full 1,024; 32 per worker at equal shares: 576.
 */
export function examplesPerRequest(maxShare: number): number {
  return Math.min(MAX_EXAMPLES_PER_REQUEST, REQUEST_MARGIN * (PREFETCH_STEPS + 1) * maxShare);
}

export interface StreamedDatasetOptions {
  /** The dataset's split sizes, and what one example is. */
  dataset: SplitCounts;
  format: CachedFormat;
  perWorker: number;
  /** The most examples of one shard: perWorker, or more when shares follow speed. */
  maxShare?: number;
  seed: number;
  fetcher: ExampleFetcher;
  prefetchSteps?: number;
  /**
   * Whether readShard plans the steps after it from the batches this source would cut
   * (true by default). A source that trains the dataset beside other examples (dataset+own)
   * cuts them otherwise, plans them itself and says so with `fetchAhead`.
   */
  planAhead?: boolean;
}

export class StreamedDataset implements DataSource {
  readonly trainCount: number;
  private readonly format: CachedFormat;
  readonly testCount: number;
  private readonly perWorker: number;
  private readonly maxShare: number;
  private readonly fetcher: ExampleFetcher;
  /** Examples per request at most, within the server's bound for the run. */
  private readonly requestLimit: number;
  private readonly prefetchSteps: number;
  private readonly planAhead: boolean;
  /** This epoch's and the next one's: a prefetch window can reach across an epoch's end. */
  private readonly permutations: [EpochPermutation, EpochPermutation];
  private readonly cache: ExampleCache;
  private testCache: ExampleCache | null = null;
  /** Request id each training index is on its way in (0: none), and each request's promise. */
  private readonly pendingIn: Int32Array;
  private readonly requests = new Map<number, Promise<void>>();
  private nextRequest = 1;
  /** Scratch for the indices of one request (never more than a window, or one shard). */
  private readonly wanted: Uint32Array;
  /** The first failure of a prefetch, thrown at the step that needs its examples. */
  private failure: Error | null = null;
  private shardsRead = 0;
  /** The balancer's weights of the last batch planned: the prefetch cuts the next steps by them too. */
  private weights: ArrayLike<number> | null = null;
  /** The test shard on its way, fetched once when training is under way. */
  private testLoading: { start: number; count: number; done: Promise<void> } | null = null;

  constructor(options: StreamedDatasetOptions) {
    const spec = options.dataset;
    this.format = options.format;
    this.trainCount = spec.trainCount;
    this.testCount = spec.testCount;
    this.perWorker = options.perWorker;
    this.maxShare = options.maxShare ?? options.perWorker;
    this.fetcher = options.fetcher;
    this.requestLimit = examplesPerRequest(this.maxShare);
    this.prefetchSteps = options.prefetchSteps ?? PREFETCH_STEPS;
    this.planAhead = options.planAhead ?? true;
    this.permutations = [new EpochPermutation(this.trainCount, options.seed), new EpochPermutation(this.trainCount, options.seed)];
    const window = this.prefetchSteps * this.maxShare;
    // A step pins its shard (at most maxShare) while it waits: the windows around it are for prefetching.
    this.cache = new ExampleCache(this.format, Math.min(this.trainCount, CACHE_WINDOWS * window + this.maxShare), this.trainCount, this.maxShare);
    this.pendingIn = new Int32Array(this.trainCount);
    this.wanted = new Uint32Array(window + this.maxShare);
  }

  get maxShardExamples(): number {
    return this.maxShare;
  }

  /** Examples held for training now: bounded by the cache, whatever the dataset's size. */
  get cachedExamples(): number {
    return this.cache.size;
  }

  get cacheCapacity(): number {
    return this.cache.capacity;
  }

  globalBatchSize(worldSize: number): number {
    return globalBatchSize(this.perWorker, worldSize);
  }

  nextBatch(cursor: DataCursor, worldSize: number, split?: BatchSplit): GlobalBatch {
    this.weights = split?.weights ?? null;
    return nextBatch(cursor, this.perWorker, worldSize, this.trainCount, split);
  }

  /** The dataset index at `position` of epoch `epoch`'s permutation. */
  private indexAt(epoch: number, position: number): number {
    return this.permutations[(epoch & 1) === 0 ? 0 : 1].forEpoch(epoch)[position]!;
  }

  async readShard(batch: GlobalBatch, rank: number, images: Float32Array, labels: Int32Array): Promise<number> {
    if (this.failure) throw this.failure;
    const { start, count } = shardOf(batch, rank);
    try {
      // The step holds its examples until it has read them: however far a prefetch plan drifts,
      // its replies cannot evict what the step waits for (the dataset+own livelock). One step
      // reads at a time (the trainer has one input buffer), so the pins are the step's alone.
      for (let i = 0; i < count; i++) this.cache.pin(this.indexAt(batch.epoch, start + i));
      // What this step needs goes first; the steps after it follow in a second request.
      this.fetchMissing(batch.epoch, start, count);
      if (this.planAhead) this.prefetchAfter(batch, rank);
      if (++this.shardsRead === this.prefetchSteps) this.prefetchTest(rank, batch.worldSize);
      // Usually the prefetch brought everything: then this step waits for nothing and allocates nothing.
      while (!this.holdsAll(batch.epoch, start, count)) {
        const waits: Array<Promise<void>> = [];
        for (let i = 0; i < count; i++) {
          const index = this.indexAt(batch.epoch, start + i);
          if (!this.cache.has(index)) waits.push(this.requests.get(this.pendingIn[index]!) ?? this.request([index]));
        }
        await Promise.all(waits);
        if (this.failure) throw this.failure;
      }
      for (let i = 0; i < count; i++) this.cache.read(this.indexAt(batch.epoch, start + i), images, labels, i);
      return count;
    } finally {
      this.cache.unpinAll();
    }
  }

  prefetch(batch: GlobalBatch, rank: number): void {
    if (this.failure) return;
    const { start, count } = shardOf(batch, rank);
    this.fetchMissing(batch.epoch, start, count);
    this.prefetchAfter(batch, rank);
  }

  /** Starts fetching rank `rank`'s examples of batches planned elsewhere (planAhead false), without waiting. */
  fetchAhead(batches: readonly GlobalBatch[], rank: number): void {
    if (this.failure) return;
    for (const batch of batches) {
      const { start, count } = shardOf(batch, rank);
      this.fetchMissing(batch.epoch, start, count);
    }
  }

  /** The steps a planner should fetch ahead: as many as this source's own prefetch. */
  get stepsAhead(): number {
    return this.prefetchSteps;
  }

  private holdsAll(epoch: number, start: number, count: number): boolean {
    for (let i = 0; i < count; i++) if (!this.cache.has(this.indexAt(epoch, start + i))) return false;
    return true;
  }

  /** Requests the examples at positions [start, start + count) of the epoch's permutation that are neither held nor on their way. */
  private fetchMissing(epoch: number, start: number, count: number): void {
    let n = 0;
    for (let i = 0; i < count; i++) {
      const index = this.indexAt(epoch, start + i);
      if (!this.cache.has(index) && this.pendingIn[index] === 0) this.wanted[n++] = index;
    }
    if (n > 0) void this.request(Array.from(this.wanted.subarray(0, n)));
  }

  /** Prefetches this rank's next steps once at least half of their examples are missing. */
  private prefetchAfter(batch: GlobalBatch, rank: number): void {
    let cursor = advance(batch, this.trainCount);
    let planned = 0;
    let n = 0;
    for (let s = 0; s < this.prefetchSteps && n + this.maxShare <= this.wanted.length; s++) {
      // The shares the next steps will most likely use: this step's, with every rank training.
      const next = nextBatch(cursor, this.perWorker, batch.worldSize, this.trainCount, { weights: this.weights, sitOutFrom: null });
      const { start, count } = shardOf(next, rank);
      planned += count;
      for (let i = 0; i < count; i++) {
        const index = this.indexAt(next.epoch, start + i);
        if (!this.cache.has(index) && this.pendingIn[index] === 0) this.wanted[n++] = index;
      }
      cursor = advance(next, this.trainCount);
    }
    if (n > 0 && n * 2 >= planned) void this.request(Array.from(this.wanted.subarray(0, n))).catch(() => undefined);
  }

  /**
   * Fetches `indices` (any order, repeats allowed) in requests of at most requestLimit;
   * resolves when all are stored. A prefetch that reaches across an epoch's end can name an
   * example twice (it is in both epochs' permutations), and the service refuses a request
   * that repeats one: each goes once.
   */
  private request(indices: number[]): Promise<void> {
    indices.sort((a, b) => a - b);
    indices = indices.filter((index, i) => i === 0 || index !== indices[i - 1]);
    const parts: Array<Promise<void>> = [];
    for (let from = 0; from < indices.length; from += this.requestLimit) {
      const chunk = Uint32Array.from(indices.slice(from, from + this.requestLimit));
      const id = this.nextRequest++;
      for (const index of chunk) this.pendingIn[index] = id;
      const done = this.fetcher('train', chunk, chunk.length).then(
        ({ labels, features }) => {
          chunk.forEach((index, i) => {
            this.cache.put(index, labels[i]!, features, i);
            this.pendingIn[index] = 0;
          });
        },
        (err: unknown) => {
          for (const index of chunk) this.pendingIn[index] = 0;
          // The fetcher already retried what a retry can fix; the step that needs these examples ends the run.
          this.failure ??= err instanceof Error ? err : new WebringError('ERR_BAD_DATA', String(err));
        },
      );
      const settled = done.finally(() => this.requests.delete(id));
      this.requests.set(id, settled);
      parts.push(settled);
    }
    return Promise.all(parts).then(() => undefined);
  }

  testShard(rank: number, worldSize: number): { start: number; count: number } {
    return testShardOf(rank, worldSize, this.testCount);
  }

  /** Starts fetching this rank's test shard, in the background, so the epoch's evaluation finds it here. */
  private prefetchTest(rank: number, worldSize: number): void {
    const shard = this.testShard(rank, worldSize);
    const done = this.loadTest(shard.start, shard.count);
    // A failure here is met again, and thrown, by the evaluation's own readTest.
    done.catch(() => undefined);
    this.testLoading = { ...shard, done };
  }

  async readTest(start: number, count: number, images: Float32Array, labels: Int32Array): Promise<void> {
    const loading = this.testLoading;
    if (loading && start >= loading.start && start + count <= loading.start + loading.count) await loading.done.catch(() => undefined);
    await this.loadTest(start, count);
    const cache = this.testCache!;
    for (let i = 0; i < count; i++) cache.read(start + i, images, labels, i);
  }

  /** Fetches the test examples [start, start + count) not held yet; they are kept for every later evaluation. */
  private async loadTest(start: number, count: number): Promise<void> {
    const cache = (this.testCache ??= new ExampleCache(this.format, this.testCount, this.testCount));
    const missing: number[] = [];
    for (let i = start; i < start + count; i++) if (!cache.has(i)) missing.push(i);
    const parts: Array<Promise<void>> = [];
    for (let from = 0; from < missing.length; from += this.requestLimit) {
      const chunk = Uint32Array.from(missing.slice(from, from + this.requestLimit));
      parts.push(this.fetcher('test', chunk, chunk.length).then((reply) => chunk.forEach((index, i) => cache.put(index, reply.labels[i]!, reply.features, i))));
    }
    await Promise.all(parts);
  }
}

/**
 * A run's examples streamed from the server the worker joined through, authorised by the
 * worker's member token (a DataFactory; `planAhead` as StreamedDatasetOptions says).
 */
export function streamFromDataService(config: StartConfig, context: DataContext, options: { planAhead?: boolean } = {}): StreamedDataset {
  const found = findDataset(config.dataset);
  if (!found) throw new WebringError('ERR_UNKNOWN_TASK', `no dataset ${config.dataset}`, 'dataset');
  const format = { features: featureCount(found.task.example), byteScale: found.task.example.byteScale };
  return new StreamedDataset({
    planAhead: options.planAhead ?? true,
    dataset: found.dataset,
    format,
    perWorker: config.batchSizePerWorker,
    maxShare: maxShareOf(config),
    seed: config.seed,
    fetcher: httpExampleFetcher({
      baseUrl: context.serverUrl,
      room: context.room,
      dataset: config.dataset,
      features: format.features,
      memberToken: context.memberToken,
      onWait: context.onWait,
      signal: context.signal,
    }),
  });
}
