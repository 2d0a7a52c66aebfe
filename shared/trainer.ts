/**
 * The DOM-free training core: one synchronous data-parallel step, as MultiWorkerMirroredStrategy
 * does it. Each replica computes gradients on its slice of the global batch, flattens them
 * into one reused buffer in a fixed variable order, all-reduces, divides by N, and applies
 * the result with its own optimizer. Identical inputs in, identical weights out.
 *
 * The collective is injected: a RingAllReduce over data channels in a tab or a Node worker,
 * an in-memory ring in the unit tests.
 */
import * as tf from '@tensorflow/tfjs';
import { COLLECTIVE_TAG, type CollectiveTag } from './ring-allreduce';
import { EpochPermutation, advance, nextBatch, stepsPerEpoch, type DataCursor } from './sharding';
import { MNIST_CLASSES, MNIST_PIXELS, type MnistDataset } from './mnist-format';
import { buildModel, buildOptimizer } from './models';
import { WeightsHasher } from './weights-hash';
import type { StartConfig } from './protocol';
import { WebringError } from './errors';

export interface Collective {
  readonly rank: number;
  readonly worldSize: number;
  allReduce(buf: Float32Array, step: number, tag: CollectiveTag): Promise<void>;
}

/** Appended to the gradients so one all-reduce also agrees on metrics and on stopping. */
const TAIL_LOSS = 0;
const TAIL_CORRECT = 1;
const TAIL_STOP = 2;
const TAIL_LENGTH = 3;

const EVAL_BATCH = 250;
const PIXEL_SCALE = 1 / 255;

export interface StepResult {
  /** The step just completed (0-based); the replica's step counter is now step + 1. */
  step: number;
  epoch: number;
  /** Mean loss over the whole global batch. */
  loss: number;
  /** Accuracy over the whole global batch. */
  trainAccuracy: number;
  /** L2 norm of the averaged gradient: zero would mean a broken backend readback. */
  gradNorm: number;
  /** True when any replica asked to stop; every replica sees the same value. */
  stop: boolean;
  /** True when this step was the last of its epoch. */
  epochEnd: boolean;
  examples: number;
}

export class Trainer {
  readonly model: tf.LayersModel;
  readonly optimizer: tf.Optimizer;
  readonly config: StartConfig;
  private readonly variables: tf.Variable[];
  private readonly offsets: number[];
  readonly parameterCount: number;

  private collective: Collective;
  private readonly dataset: MnistDataset;
  private readonly permutation: EpochPermutation;
  private cursor: DataCursor = { epoch: 0, offset: 0 };
  private stepCounter = 0;

  // Reused across steps: the per-step path allocates no JS buffers of its own.
  private readonly flat: Float32Array;
  private readonly images: Float32Array;
  private readonly labels: Int32Array;
  private readonly indices: Uint32Array;
  private readonly evalBuffer = new Float32Array(2);

  constructor(config: StartConfig, dataset: MnistDataset, collective: Collective) {
    this.config = config;
    this.dataset = dataset;
    this.collective = collective;
    this.model = buildModel(config.model, config.seed);
    this.optimizer = buildOptimizer(config.optimizer, config.learningRate);
    this.variables = this.model.trainableWeights.map((w) => (w as unknown as { val: tf.Variable }).val);
    this.offsets = [];
    let total = 0;
    for (const v of this.variables) {
      this.offsets.push(total);
      total += v.size;
    }
    this.parameterCount = total;
    this.flat = new Float32Array(total + TAIL_LENGTH);
    const b = config.batchSizePerWorker;
    this.images = new Float32Array(b * MNIST_PIXELS);
    this.labels = new Int32Array(b);
    this.indices = new Uint32Array(b);
    this.permutation = new EpochPermutation(dataset.trainCount, config.seed);
  }

  get step(): number {
    return this.stepCounter;
  }

  get epoch(): number {
    return this.cursor.epoch;
  }

  get dataCursor(): DataCursor {
    return { ...this.cursor };
  }

  get worldSize(): number {
    return this.collective.worldSize;
  }

  get globalBatchSize(): number {
    return this.config.batchSizePerWorker * this.collective.worldSize;
  }

  /** Steps the run lasts with the current world size: all epochs, capped by maxSteps. */
  get totalSteps(): number {
    const all = this.config.epochs * stepsPerEpoch(this.dataset.trainCount, this.globalBatchSize);
    return this.config.maxSteps === undefined ? all : Math.min(all, this.config.maxSteps);
  }

  setCollective(collective: Collective): void {
    this.collective = collective;
  }

  /** Replaces the weights, given in variable order (checkpoint restore). */
  setWeights(values: tf.Tensor[]): void {
    if (values.length !== this.variables.length) {
      throw new WebringError('ERR_BAD_DATA', `checkpoint has ${values.length} weights, the ${this.config.model} has ${this.variables.length}`);
    }
    this.variables.forEach((v, i) => {
      const value = values[i]!;
      if (value.shape.join('x') !== v.shape.join('x')) {
        throw new WebringError('ERR_BAD_DATA', `checkpoint weight ${i} has shape ${value.shape}, the model needs ${v.shape}`);
      }
    });
    this.variables.forEach((v, i) => v.assign(values[i]!));
  }

  /** Positions the replica, e.g. at a resumed step; the cursor must come from the same run. */
  setPosition(step: number, cursor: DataCursor): void {
    this.stepCounter = step;
    this.cursor = { ...cursor };
  }

  /**
   * Makes every replica's weights equal to rank 0's: rank 0 contributes its weights and
   * everyone else zeros, so the all-reduced sum is exactly the chief's values.
   */
  async syncFromChief(): Promise<void> {
    const flat = this.flat;
    flat.fill(0);
    if (this.collective.rank === 0) {
      const values = await Promise.all(this.variables.map((v) => v.data() as Promise<Float32Array>));
      values.forEach((vals, i) => flat.set(vals, this.offsets[i]));
    }
    await this.collective.allReduce(flat, this.stepCounter, COLLECTIVE_TAG.sync);
    tf.tidy(() => {
      this.variables.forEach((v, i) => {
        const off = this.offsets[i]!;
        // slice, not subarray: the CPU backend keeps the array it is given as the tensor's
        // storage, and the variable would then change whenever `flat` is reused.
        v.assign(tf.tensor(flat.slice(off, off + v.size), v.shape, 'float32'));
      });
    });
  }

  /** One synchronous step on the next global batch. */
  async trainStep(requestStop = false): Promise<StepResult> {
    const { rank, worldSize } = this.collective;
    const perWorker = this.config.batchSizePerWorker;
    const globalBatchSize = perWorker * worldSize;
    const batch = nextBatch(this.cursor, globalBatchSize, this.dataset.trainCount);
    this.fillBatch(this.permutation.sliceInto(this.indices, batch, rank, perWorker));

    const { value, grads, correct } = tf.tidy(() => {
      const x = tf.tensor4d(this.images, [perWorker, 28, 28, 1]);
      const labels = tf.tensor1d(this.labels, 'int32');
      const y = tf.oneHot(labels, MNIST_CLASSES);
      let correctCount: tf.Tensor | null = null;
      const result = tf.variableGrads(() => {
        const logits = this.model.apply(x, { training: true }) as tf.Tensor2D;
        correctCount = tf.keep(tf.sum(tf.cast(tf.equal(tf.argMax(logits, -1), labels), 'float32')));
        return tf.losses.softmaxCrossEntropy(y, logits) as tf.Scalar;
      }, this.variables);
      return { value: result.value, grads: result.grads, correct: correctCount as unknown as tf.Tensor };
    });

    const flat = this.flat;
    const P = this.parameterCount;
    try {
      // Read every gradient back at once; the GPU queue overlaps the copies.
      const [lossData, correctData, ...gradData] = await Promise.all([
        value.data(),
        correct.data(),
        ...this.variables.map((v) => grads[v.name]!.data()),
      ]);
      gradData.forEach((g, i) => flat.set(g as Float32Array, this.offsets[i]));
      flat[P + TAIL_LOSS] = lossData[0]!;
      flat[P + TAIL_CORRECT] = correctData[0]!;
      flat[P + TAIL_STOP] = requestStop ? 1 : 0;
    } finally {
      value.dispose();
      correct.dispose();
      tf.dispose(grads);
    }

    const step = this.stepCounter;
    await this.collective.allReduce(flat, step, COLLECTIVE_TAG.gradients);

    // Average, and measure the norm on the way (the zero-gradient trap detector).
    const inv = 1 / worldSize;
    let sq = 0;
    for (let i = 0; i < P; i++) {
      const g = flat[i]! * inv;
      flat[i] = g;
      sq += g * g;
    }
    // These tensors may alias `flat` (the CPU backend does not copy); that is safe because
    // they live only inside this tidy, and `flat` is not written again until the next step.
    tf.tidy(() => {
      const named: tf.NamedTensorMap = {};
      this.variables.forEach((v, i) => {
        const off = this.offsets[i]!;
        named[v.name] = tf.tensor(flat.subarray(off, off + v.size), v.shape, 'float32');
      });
      this.optimizer.applyGradients(named);
    });

    this.cursor = advance(batch);
    this.stepCounter = step + 1;
    const epochEnd = nextBatch(this.cursor, globalBatchSize, this.dataset.trainCount).epoch !== this.cursor.epoch;
    return {
      step,
      epoch: batch.epoch,
      loss: flat[P + TAIL_LOSS]! * inv,
      trainAccuracy: flat[P + TAIL_CORRECT]! / globalBatchSize,
      gradNorm: Math.sqrt(sq),
      stop: flat[P + TAIL_STOP]! > 0,
      epochEnd,
      examples: perWorker,
    };
  }

  /** Test-set accuracy, evaluated data-parallel: each rank scores its shard, one tiny all-reduce sums. */
  async evaluate(): Promise<number> {
    const { rank, worldSize } = this.collective;
    const { trainCount, testCount } = this.dataset;
    const from = trainCount + Math.floor((rank * testCount) / worldSize);
    const to = trainCount + Math.floor(((rank + 1) * testCount) / worldSize);
    let correct = 0;
    for (let start = from; start < to; start += EVAL_BATCH) {
      const n = Math.min(EVAL_BATCH, to - start);
      const images = new Float32Array(n * MNIST_PIXELS);
      const px = this.dataset.pixels;
      for (let i = 0; i < n * MNIST_PIXELS; i++) images[i] = px[start * MNIST_PIXELS + i]! * PIXEL_SCALE;
      const labels = Int32Array.from(this.dataset.labels.subarray(start, start + n));
      const hits = tf.tidy(() => {
        const logits = this.model.apply(tf.tensor4d(images, [n, 28, 28, 1]), { training: false }) as tf.Tensor2D;
        return tf.sum(tf.cast(tf.equal(tf.argMax(logits, -1), tf.tensor1d(labels, 'int32')), 'float32'));
      });
      correct += (await hits.data())[0]!;
      hits.dispose();
    }
    this.evalBuffer[0] = correct;
    this.evalBuffer[1] = to - from;
    await this.collective.allReduce(this.evalBuffer, this.stepCounter, COLLECTIVE_TAG.evaluation);
    return this.evalBuffer[0]! / this.evalBuffer[1]!;
  }

  /** Fingerprint of all weights, in variable order; equal hashes mean bit-identical replicas. */
  async weightsHash(): Promise<string> {
    const values = await Promise.all(this.variables.map((v) => v.data() as Promise<Float32Array>));
    const hasher = new WeightsHasher();
    for (const vals of values) hasher.update(vals);
    return hasher.digest();
  }

  /** All weights concatenated in variable order (for tests and state transfer). */
  async readWeights(): Promise<Float32Array> {
    const values = await Promise.all(this.variables.map((v) => v.data() as Promise<Float32Array>));
    const out = new Float32Array(this.parameterCount);
    values.forEach((vals, i) => out.set(vals, this.offsets[i]));
    return out;
  }

  dispose(): void {
    this.optimizer.dispose();
    this.model.dispose();
  }

  private fillBatch(indices: Uint32Array): void {
    const px = this.dataset.pixels;
    const images = this.images;
    for (let i = 0; i < indices.length; i++) {
      const idx = indices[i]!;
      const src = idx * MNIST_PIXELS;
      const dst = i * MNIST_PIXELS;
      for (let p = 0; p < MNIST_PIXELS; p++) images[dst + p] = px[src + p]! * PIXEL_SCALE;
      this.labels[i] = this.dataset.labels[idx]!;
    }
  }
}
