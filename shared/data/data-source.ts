/**
 * Where a replica's examples come from. The trainer asks a DataSource for the global batch
 * of each step and for this replica's part of it; it never looks at a dataset itself.
 * Workers stream theirs from the server's data service (streamed-dataset.ts); the in-memory
 * shards below serve the unit tests and any worker that holds a whole dataset.
 * Another source (a class's own drawings, say, in unequal shares) plugs in without touching
 * the training loop, as long as every replica's source agrees on the global batches.
 */
import type { StartConfig } from '../protocol';
import type { ExampleFormat, LoadedDataset } from '../tasks/task';
import { featureCount } from '../tasks/task';
import { maxShareOf } from './batch-plan';
import { globalBatchSize, nextBatch, type BatchSplit, type DataCursor, type GlobalBatch } from './batch-plan';
import { EpochPermutation, testShardOf } from './sharding';

export interface DataSource {
  /** Training examples in one epoch, over the whole ring. */
  readonly trainCount: number;
  /** The most examples one replica trains on in one step: the trainer sizes its batch buffers by it. */
  readonly maxShardExamples: number;
  /** Numbers in one example's row, where the source says (a program's rows: its inputs and targets); else the task's F. */
  readonly featuresPerExample?: number;
  /** Examples one step trains on over the whole ring at `worldSize`, away from an epoch's end (batch-plan.ts globalBatchSize). */
  globalBatchSize(worldSize: number): number;
  /**
   * The global batch the step at `cursor` trains on with `worldSize` replicas, and each
   * rank's slice of it (batch-plan.ts): cut by `split`, or as the source decides where it
   * decides who trains what (own data ignores `split`).
   */
  nextBatch(cursor: DataCursor, worldSize: number, split?: BatchSplit): GlobalBatch;
  /**
   * Writes rank `rank`'s examples of `batch` (its slice, `batch.slices[rank]`) to the front
   * of `features` (F numbers each, as the model takes them) and `labels`; resolves to how many. Called once per step, so it reuses its
   * buffers; a streamed source resolves once the examples have arrived, and rejects
   * rather than hand over anything else.
   */
  readShard(batch: GlobalBatch, rank: number, features: Float32Array, labels: Int32Array): Promise<number>;
  /**
   * Starts fetching rank `rank`'s examples of `batch` and the steps after it, without
   * waiting: a joiner learns its first batch from the hand-over's agreement round and
   * fetches while the state is still on its way. Optional: a source that holds its
   * examples has nothing to fetch.
   */
  prefetch?(batch: GlobalBatch, rank: number): void;
  /**
   * Numbers every rank contributes and every replica must agree on before it can cut a
   * batch (the class's own data: which store each rank holds, and how many examples).
   * Absent for a source every replica can cut alone.
   */
  readonly agreement?: DataAgreement;
  /** The test examples rank `rank` of `worldSize` scores in an evaluation. */
  testShard(rank: number, worldSize: number): { start: number; count: number };
  /** Writes test examples [start, start + count) to the front of `features` and `labels`. */
  readTest(start: number, count: number, features: Float32Array, labels: Int32Array): Promise<void>;
}

/**
 * The trainer carries a source's per-rank numbers in every step's gradient tail and in the
 * hand-over's agreement round (so a new ring agrees before its first step), and the
 * position they make (an epoch's roster: own-data.ts) with the state to joiners and into
 * checkpoints. Only counts and keys, never examples.
 */
export interface DataAgreement {
  /** Floats each rank contributes. */
  readonly floatsPerRank: number;
  /** This rank's numbers into `out` from `at`. */
  writeOwn(out: Float32Array, at: number): void;
  /** Every rank's numbers (rank r's from r × floatsPerRank), the same on every replica. */
  agree(values: Float32Array, worldSize: number): void;
  /** Floats of the position the hand-over's state carries. */
  readonly stateFloats: number;
  writeState(out: Float32Array, at: number): void;
  readState(from: Float32Array, at: number): void;
  /** The position as a checkpoint keeps it; null before there is one. */
  readonly roster: EpochRoster | null;
  restore(roster: EpochRoster | null): void;
}

/** One device's block of an epoch. */
export interface RosterDevice {
  /** Its store's key (own-examples.ts). */
  key: number;
  /** Its training examples when the epoch began, tombstones included. */
  examples: number;
  /** The seq of the last of them: later ones wait for the next epoch. */
  lastSeq: number;
}

/** The devices whose examples epoch `epoch` passes over, in rank order when it began. */
export interface EpochRoster {
  epoch: number;
  devices: RosterDevice[];
}

/** What a worker hands its data source for one run. */
export interface DataContext {
  /** Where the data service is, and the room it serves. */
  serverUrl: string;
  room: string;
  /** The worker's member token now, which authorises reading (never the join code: see example-fetcher.ts). */
  memberToken: () => string;
  /** Aborted when the run ends: fetches still retrying stop. */
  signal: AbortSignal;
  /** Why the worker waits for data ("the data service answered 503; trying again in 2 s"), or null once it flows. */
  onWait(why: string | null): void;
}

/** Makes a run's data source from its config (dataset, batch per worker, seed). */
export type DataFactory = (config: StartConfig, context: DataContext) => DataSource;

/**
 * A dataset held in memory, sharded as tf.data shards for MultiWorkerMirroredStrategy
 * (sharding.ts): one seeded permutation per epoch, each rank a contiguous slice of every
 * global batch of `perWorker` × N examples, as the batch plan cut it (batch-plan.ts).
 */
export class InMemoryShards implements DataSource {
  private readonly permutation: EpochPermutation;
  private readonly indices: Uint32Array;
  private readonly features: number;

  constructor(
    private readonly dataset: LoadedDataset,
    private readonly format: ExampleFormat,
    private readonly perWorker: number,
    seed: number,
    /** The most examples of one shard: perWorker, or more when shares follow speed (share-balancer.ts). */
    private readonly maxShare = perWorker,
  ) {
    this.features = featureCount(format);
    this.permutation = new EpochPermutation(dataset.train.count, seed);
    this.indices = new Uint32Array(maxShare);
  }

  get trainCount(): number {
    return this.dataset.train.count;
  }

  get maxShardExamples(): number {
    return this.maxShare;
  }

  globalBatchSize(worldSize: number): number {
    return globalBatchSize(this.perWorker, worldSize);
  }

  nextBatch(cursor: DataCursor, worldSize: number, split?: BatchSplit): GlobalBatch {
    return nextBatch(cursor, this.perWorker, worldSize, this.trainCount, split);
  }

  readShard(batch: GlobalBatch, rank: number, features: Float32Array, labels: Int32Array): Promise<number> {
    const indices = this.permutation.sliceInto(this.indices, batch, rank);
    for (let i = 0; i < indices.length; i++) this.copy(this.dataset.train, indices[i]!, features, labels, i);
    return Promise.resolve(indices.length);
  }

  testShard(rank: number, worldSize: number): { start: number; count: number } {
    return testShardOf(rank, worldSize, this.dataset.test.count);
  }

  readTest(start: number, count: number, features: Float32Array, labels: Int32Array): Promise<void> {
    for (let i = 0; i < count; i++) this.copy(this.dataset.test, start + i, features, labels, i);
    return Promise.resolve();
  }

  private copy(split: LoadedDataset['train'], index: number, features: Float32Array, labels: Int32Array, at: number): void {
    const f = this.features;
    const scale = this.format.byteScale;
    const src = index * f;
    const dst = at * f;
    for (let p = 0; p < f; p++) features[dst + p] = split.features[src + p]! * scale;
    labels[at] = split.labels[index]!;
  }
}

/** The in-memory shards a config asks for: its batch per worker and its seed. */
export function inMemoryShards(config: Pick<StartConfig, 'batchSizePerWorker' | 'seed' | 'balanceShares'>, dataset: LoadedDataset, format: ExampleFormat): InMemoryShards {
  return new InMemoryShards(dataset, format, config.batchSizePerWorker, config.seed, maxShareOf(config));
}
