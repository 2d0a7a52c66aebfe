/**
 * A program's tf.data.Dataset as the trainer's data source, sharded as
 * MultiWorkerMirroredStrategy's AutoShardPolicy.DATA shards it: every worker reads the
 * whole dataset in the same order and keeps only its part of each global batch. The batch
 * plan (batch-plan.ts) cuts a global batch of a fixed size (the program's `batchSize`,
 * whatever the ring's size) at positions of the epoch, so an element is trained once per
 * epoch by exactly one worker, across joins, leaves and re-balanced shares alike.
 *
 * Every worker must see the same order: a dataset without a shuffle, one shuffled with a
 * seed and `reshuffleEachIteration` false, or a function of the epoch that returns the
 * epoch's dataset (shuffled with a seed of the epoch's, say). tfjs's own re-shuffle draws
 * its order from how many times this worker iterated, which a joiner does not share.
 *
 * An element is `{xs, ys}`: each a tensor, an array of tensors in the model's input (output)
 * order, or an object keyed by the inputs' (outputs') names, each of one example's shape
 * (no batch dimension). It becomes one row of the trainer's buffer (model-replica.ts).
 */
import * as tf from '@tensorflow/tfjs';
import { WebringError } from '../protocol/errors';
import { sizeOf, rowLength, type ProgramModel } from '../compute/program-model';
import { cutBatch, shardOf, withoutRanksFrom, type BatchSplit, type DataCursor, type GlobalBatch } from './batch-plan';
import type { DataSource } from './data-source';
import { testShardOf } from './sharding';

/** A dataset, or the dataset of each epoch. */
export type EpochDataset = tf.data.Dataset<tf.TensorContainer> | ((epoch: number) => tf.data.Dataset<tf.TensorContainer>);

/** What a shard's function is told: tf.distribute's InputContext, for a ring whose size changes. */
export interface InputContext {
  /** This member's rank in the ring: its input pipeline's id. */
  shardIndex: number;
  /** The ring's size: how many input pipelines there are. */
  shardCount: number;
  epoch: number;
}

/**
 * tf.distribute's distribute_datasets_from_function: each member reads its own dataset (its
 * files, its part of a corpus) instead of every member reading one dataset. Made by
 * `datasetFromFunction`; a member calls `fn` whenever its rank, the ring's size or the epoch
 * changes, and reads its share of every global batch from it in order.
 */
export interface ShardedDataset {
  readonly kind: 'per-shard';
  readonly fn: (context: InputContext) => tf.data.Dataset<tf.TensorContainer>;
}

export function datasetFromFunction(fn: (context: InputContext) => tf.data.Dataset<tf.TensorContainer>): ShardedDataset {
  return { kind: 'per-shard', fn };
}

export function isSharded(dataset: EpochDataset | ShardedDataset): dataset is ShardedDataset {
  return typeof dataset === 'object' && 'kind' in dataset && dataset.kind === 'per-shard';
}
type Layout = Pick<ProgramModel, 'inputShapes' | 'outputShapes' | 'inputNames' | 'outputNames'>;

/** Counts a dataset's elements when tfjs does not know its size (one pass). */
export async function countElements(dataset: tf.data.Dataset<tf.TensorContainer>): Promise<number> {
  if (Number.isFinite(dataset.size) && dataset.size >= 0) return dataset.size;
  let n = 0;
  await dataset.forEachAsync((element) => {
    n++;
    tf.dispose(element);
  });
  return n;
}

/** Reads a dataset's elements in order from a position, reopening it only to go back or to another epoch. */
class ElementReader {
  private iterator: Awaited<ReturnType<tf.data.Dataset<tf.TensorContainer>['iterator']>> | null = null;
  private epoch = -1;
  private position = 0;

  constructor(
    private readonly source: EpochDataset,
    private readonly layout: Layout,
    private readonly what: string,
  ) {}

  /** Writes elements [start, start + count) of epoch `epoch` as rows from the front of `out`. */
  async read(epoch: number, start: number, count: number, out: Float32Array): Promise<void> {
    if (this.iterator === null || epoch !== this.epoch || start < this.position) {
      const dataset = typeof this.source === 'function' ? this.source(epoch) : this.source;
      this.iterator = await dataset.iterator();
      this.epoch = epoch;
      this.position = 0;
    }
    // Positions before the slice are other workers' part: read and dropped (AutoShardPolicy.DATA).
    for (; this.position < start; this.position++) tf.dispose((await this.next()) as tf.TensorContainer);
    const row = rowLength(this.layout);
    for (let i = 0; i < count; i++, this.position++) {
      const element = await this.next();
      try {
        writeRow(element, this.layout, out, i * row, `${this.what} element ${this.position}`);
      } finally {
        tf.dispose(element as tf.TensorContainer);
      }
    }
  }

  private async next(): Promise<unknown> {
    const { value, done } = await this.iterator!.next();
    if (done) throw new WebringError('ERR_BAD_DATA', `${this.what} ended at element ${this.position} of epoch ${this.epoch}; it held more before: every epoch must give the same number of elements`);
    return value;
  }
}

/**
 * Reads a member's own shard in order: the share of each global batch is the next elements
 * of its stream, whatever their positions in the epoch. The stream opens again for a new
 * rank, ring size or epoch, and starts over when it runs out within an epoch (a shard
 * smaller than its share of the epoch is repeated, so the ring stays in lock-step).
 */
class ShardReader {
  private iterator: Awaited<ReturnType<tf.data.Dataset<tf.TensorContainer>['iterator']>> | null = null;
  private context = '';

  constructor(
    private readonly fn: ShardedDataset['fn'],
    private readonly layout: Layout,
  ) {}

  async read(context: InputContext, count: number, out: Float32Array): Promise<void> {
    const key = `${context.epoch}/${context.shardIndex}/${context.shardCount}`;
    if (this.iterator === null || key !== this.context) {
      this.iterator = await this.fn({ ...context }).iterator();
      this.context = key;
    }
    const row = rowLength(this.layout);
    for (let i = 0; i < count; i++) {
      const element = await this.next(context);
      try {
        writeRow(element, this.layout, out, i * row, `shard ${context.shardIndex} of ${context.shardCount}'s element`);
      } finally {
        tf.dispose(element as tf.TensorContainer);
      }
    }
  }

  private async next(context: InputContext): Promise<unknown> {
    let { value, done } = await this.iterator!.next();
    if (done) {
      this.iterator = await this.fn({ ...context }).iterator();
      ({ value, done } = await this.iterator.next());
      if (done) throw new WebringError('ERR_BAD_DATA', `shard ${context.shardIndex} of ${context.shardCount} (epoch ${context.epoch}) has no element`);
    }
    return value;
  }
}

/** The tensors of `part` (xs or ys) in the model's order of `names`. */
function tensorsOf(part: unknown, names: readonly string[], what: string): tf.Tensor[] {
  if (part instanceof tf.Tensor) return [part];
  if (Array.isArray(part)) return part as tf.Tensor[];
  if (part && typeof part === 'object') {
    return names.map((name) => {
      const t = (part as Record<string, unknown>)[name];
      if (!(t instanceof tf.Tensor)) throw new WebringError('ERR_BAD_DATA', `${what} has no tensor for ${name}`);
      return t;
    });
  }
  throw new WebringError('ERR_BAD_DATA', `${what} is not a tensor, an array of tensors or an object of them`);
}

function writeRow(element: unknown, layout: Layout, out: Float32Array, at: number, what: string): void {
  const { xs, ys } = (element ?? {}) as { xs?: unknown; ys?: unknown };
  const parts = [...tensorsOf(xs, layout.inputNames, `${what}'s xs`), ...tensorsOf(ys, layout.outputNames, `${what}'s ys`)];
  const shapes = [...layout.inputShapes, ...layout.outputShapes];
  if (parts.length !== shapes.length) throw new WebringError('ERR_BAD_DATA', `${what} has ${parts.length} tensors; the model takes ${layout.inputShapes.length} inputs and ${layout.outputShapes.length} targets`);
  parts.forEach((t, i) => {
    if (t.size !== sizeOf(shapes[i]!)) throw new WebringError('ERR_BAD_DATA', `${what}: tensor ${i} has shape [${t.shape}], the model's is [${shapes[i]}] per example (elements are single examples, not batches)`);
    out.set(t.dataSync() as Float32Array, at);
    at += t.size;
  });
}

export interface DatasetShardsOptions {
  /** One dataset every member reads (AutoShardPolicy.DATA), or each member's own (datasetFromFunction). */
  train: EpochDataset | ShardedDataset;
  /** Elements of the training dataset in one epoch (countElements); for own shards, the epoch's steps × the global batch. */
  trainCount: number;
  validation: EpochDataset | null;
  validationCount: number;
  /** The global batch: examples one step trains over the whole ring. */
  batchSize: number;
  layout: Layout;
}

export class DatasetShards implements DataSource {
  private readonly train: ElementReader | ShardReader;
  private readonly validation: ElementReader | null;

  constructor(private readonly options: DatasetShardsOptions) {
    const { train } = options;
    this.train = isSharded(train) ? new ShardReader(train.fn, options.layout) : new ElementReader(train, options.layout, 'the training dataset');
    this.validation = options.validation ? new ElementReader(options.validation, options.layout, 'the validation dataset') : null;
  }

  get trainCount(): number {
    return this.options.trainCount;
  }
  get featuresPerExample(): number {
    return rowLength(this.options.layout);
  }
  /** A rank may take the whole global batch (one worker alone, or shares that follow speed). */
  get maxShardExamples(): number {
    return this.options.batchSize;
  }
  globalBatchSize(): number {
    return this.options.batchSize;
  }

  nextBatch(cursor: DataCursor, worldSize: number, split?: BatchSplit): GlobalBatch {
    const atEnd = cursor.offset >= this.trainCount;
    const at = { epoch: atEnd ? cursor.epoch + 1 : cursor.epoch, offset: atEnd ? 0 : cursor.offset };
    const whole = cutBatch(at, Math.min(this.options.batchSize, this.trainCount - at.offset), worldSize, split?.weights ?? null);
    return split?.sitOutFrom == null ? whole : withoutRanksFrom(whole, split.sitOutFrom);
  }

  async readShard(batch: GlobalBatch, rank: number, features: Float32Array): Promise<number> {
    const { start, count } = shardOf(batch, rank);
    if (this.train instanceof ShardReader) await this.train.read({ shardIndex: rank, shardCount: batch.worldSize, epoch: batch.epoch }, count, features);
    else await this.train.read(batch.epoch, start, count, features);
    return count;
  }

  testShard(rank: number, worldSize: number): { start: number; count: number } {
    return testShardOf(rank, worldSize, this.validation ? this.options.validationCount : 0);
  }

  async readTest(start: number, count: number, features: Float32Array): Promise<void> {
    if (count === 0) return;
    if (!this.validation) throw new WebringError('ERR_BAD_STATE', 'no validation dataset was given');
    await this.validation.read(0, start, count, features);
  }
}
