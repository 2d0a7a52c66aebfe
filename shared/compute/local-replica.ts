/**
 * The replica in this thread: a tfjs model, its optimizer and the maths of a step. In a
 * tab and a Node worker it lives in the compute thread (thread-host.ts serves it there);
 * unit tests use it in-process. Identical inputs in, identical weights out.
 */
import * as tf from '@tensorflow/tfjs';
import { featureCount } from '../tasks/task';
import { taskOf } from '../tasks/registry';
import { threadsNow } from '../util/clock';
import { WebringError } from '../protocol/errors';
import { buildModel, buildOptimizer, predictBatch } from './models';
import { TrainableWeights } from './trainable-weights';
import { createOptimizerSlots, loadOptimizerWeights, optimizerStateLength } from './optimizer-state';
import { flatOptimizer, type FlatOptimizer } from './flat-optimizer';
import type { Applied, Examples, Gradients, Replica, ReplicaSnapshot, RoundLeg, RoundLegDone, TaskReplicaSpec, Scored } from './replica';
import { DeviceRound, holdThread } from './device-round';
import { artifactsOf, concatBuffers, specsOf } from './weight-bytes';

export class LocalReplica implements Replica {
  readonly parameterCount: number;
  readonly weightShapes: ReadonlyArray<readonly number[]>;
  readonly stateLength: number;
  private readonly model: tf.LayersModel;
  /** tfjs's optimizer keeps only the checkpoint format; the updates are the fused one's. */
  private readonly optimizer: tf.Optimizer;
  private readonly fused: FlatOptimizer;
  private readonly weights: TrainableWeights;
  private readonly spec: TaskReplicaSpec;
  /** Numbers in one example, and one example's shape (the task's). */
  private readonly features: number;
  private readonly exampleShape: readonly number[];
  /** Local steps' rounds, on the device through tfjs's optimizer; the fused state is the round start's throughout. */
  private readonly round: DeviceRound;
  /** The host place's copy of the inner optimizer (device-round.ts), and the scratch its state is copied through. */
  private roundOptimizer: { optimizer: FlatOptimizer; state: Float32Array } | null = null;

  constructor(spec: TaskReplicaSpec) {
    const { config } = spec;
    this.spec = spec;
    const { example } = taskOf(config.task);
    this.features = featureCount(example);
    this.exampleShape = example.shape;
    this.model = buildModel(config);
    this.optimizer = buildOptimizer(config.optimizer, config.learningRate);
    this.weights = new TrainableWeights(this.model);
    createOptimizerSlots(config.optimizer, this.optimizer, this.weights.variables);
    const total = this.weights.count;
    this.fused = flatOptimizer(config.optimizer, total);
    this.parameterCount = total;
    this.weightShapes = this.weights.variables.map((v) => [...v.shape]);
    // The weights, the optimizer's slots, and its iteration count last.
    this.stateLength = total + optimizerStateLength(config.optimizer, total) + 1;
    this.round = new DeviceRound({
      weights: this.weights,
      optimizer: this.optimizer,
      rowFloats: this.features,
      busyComputeMs: spec.busyComputeMs ?? 0,
      place: spec.roundPlace ?? null,
      backprop: (examples) => this.backprop(examples),
      hostOptimizer: () => {
        const copy = (this.roundOptimizer ??= { optimizer: flatOptimizer(config.optimizer, total), state: new Float32Array(this.fused.stateLength) });
        this.fused.readState(copy.state, 0);
        copy.optimizer.writeState(copy.state, 0);
        copy.optimizer.iterations = this.fused.iterations;
        return copy.optimizer;
      },
      // tfjs's slots start each round from the fused state; after it, the fused state is still the class's and the slots are rewritten from it before they are read (snapshot).
      beginRound: async () => this.fused.toOptimizer(this.optimizer),
      endRound: async () => {},
    });
  }

  async computeGradients(examples: Examples, flat: Float32Array): Promise<Gradients> {
    await this.weights.idle();
    const startedAt = threadsNow();
    const t0 = performance.now();
    if (this.spec.busyComputeMs) holdThread(this.spec.busyComputeMs);
    const { value, grads, correct } = this.backprop(examples);
    let result: Gradients;
    try {
      // All the step's kernels were queued together, so the loss arrives once the device
      // has finished the forward and backward passes: the split between compute and read-back.
      const [lossData, correctData] = await Promise.all([value.data(), correct.data()]);
      const tReadback = performance.now();
      await this.weights.readGradients(grads, flat);
      const { features, labels } = examples;
      const timing = { computeMs: tReadback - t0, readbackMs: performance.now() - tReadback };
      result = { flat, features, labels, loss: lossData[0]!, correct: correctData[0]!, ...timing, startedAt, endedAt: 0, numTensors: 0 };
    } finally {
      value.dispose();
      correct.dispose();
      tf.dispose(grads);
    }
    result.numTensors = tf.memory().numTensors;
    result.endedAt = threadsNow();
    return result;
  }

  /** Forward and backward over the first `n` examples, with a SUM loss; the caller disposes what it returns. */
  private backprop({ features, labels, n }: Examples): { value: tf.Scalar; grads: tf.NamedTensorMap; correct: tf.Tensor } {
    return tf.tidy(() => {
      const x = this.batch(features, n);
      const y = tf.tensor1d(labels.subarray(0, n), 'int32');
      const oneHot = tf.oneHot(y, this.spec.config.classes.length);
      let correctCount: tf.Tensor | null = null;
      const result = tf.variableGrads(() => {
        const logits = this.model.apply(x, { training: true }) as tf.Tensor2D;
        correctCount = tf.keep(tf.sum(tf.cast(tf.equal(tf.argMax(logits, -1), y), 'float32')));
        return tf.losses.softmaxCrossEntropy(oneHot, logits, undefined, undefined, tf.Reduction.SUM) as tf.Scalar;
      }, this.weights.variables);
      return { value: result.value, grads: result.grads, correct: correctCount as unknown as tf.Tensor };
    });
  }

  applyGradients(flat: Float32Array, learningRate: number): Promise<Applied> {
    return this.weights.applyFused(this.fused, flat, learningRate);
  }

  trainRound(leg: RoundLeg): Promise<RoundLegDone> {
    return this.round.leg(leg);
  }

  async score({ features, labels, n }: Examples): Promise<Scored> {
    await this.weights.idle();
    // As in applyGradients, the tensors may alias the buffers and live only inside this tidy.
    const sums = tf.tidy(() => {
      const logits = this.model.apply(this.batch(features, n), { training: false }) as tf.Tensor2D;
      const y = tf.tensor1d(labels.subarray(0, n), 'int32');
      const hits = tf.sum(tf.cast(tf.equal(tf.argMax(logits, -1), y), 'float32'));
      const loss = tf.losses.softmaxCrossEntropy(tf.oneHot(y, this.spec.config.classes.length), logits, undefined, undefined, tf.Reduction.SUM);
      return tf.stack([hits, loss]);
    });
    try {
      const [correct, loss] = (await sums.data()) as Float32Array;
      return { correct: correct!, loss: loss!, features, labels };
    } finally {
      sums.dispose();
    }
  }

  async predict(features: Float32Array, n: number): Promise<Float32Array> {
    await this.weights.idle();
    return predictBatch(this.model, features.subarray(0, n * this.features), [n, ...this.exampleShape]);
  }

  /** The first `n` examples of `features` as the model's input, [n, ...the example's shape]; inside a tidy. */
  private batch(features: Float32Array, n: number): tf.Tensor {
    return tf.tensor(features.subarray(0, n * this.features), [n, ...this.exampleShape], 'float32');
  }

  async rehearse(n: number): Promise<void> {
    const examples = { features: new Float32Array(n * this.features), labels: new Int32Array(n), n };
    const { flat } = await this.computeGradients(examples, new Float32Array(this.parameterCount));
    await this.applyGradients(flat, 0);
  }

  weightsHash(): Promise<string> {
    return this.weights.hash();
  }

  readWeights(): Promise<Float32Array> {
    return this.weights.read();
  }

  /** The weights, the optimizer's state (optimizer-state.ts's layout), and its iteration count last. */
  async readState(): Promise<Float32Array> {
    const out = new Float32Array(this.stateLength);
    out.set(await this.weights.read(), 0);
    this.fused.readState(out, this.parameterCount);
    out[this.stateLength - 1] = this.fused.iterations;
    return out;
  }

  async writeState(state: Float32Array): Promise<void> {
    if (state.length !== this.stateLength) throw new WebringError('ERR_BAD_DATA', `a state of ${state.length} floats, this replica's has ${this.stateLength}`);
    await this.weights.write(state.slice(0, this.parameterCount));
    this.fused.writeState(state, this.parameterCount);
    this.fused.iterations = state[this.stateLength - 1]!;
  }

  async snapshot(): Promise<ReplicaSnapshot> {
    await this.weights.idle();
    const { modelTopology, format, generatedBy, convertedBy, weightSpecs, weightData } = await artifactsOf(this.model);
    this.fused.toOptimizer(this.optimizer);
    const optimizerWeights = await this.optimizer.getWeights();
    const encoded = await tf.io.encodeWeights(optimizerWeights);
    // getWeights() makes a fresh tensor for the iteration count; the rest are live variables.
    for (const w of optimizerWeights) if (w.name === 'iter') w.tensor.dispose();
    return {
      modelTopology: modelTopology ?? {},
      ...(format !== undefined ? { format } : {}),
      ...(generatedBy !== undefined ? { generatedBy } : {}),
      ...(convertedBy !== undefined ? { convertedBy } : {}),
      weightSpecs: specsOf(weightSpecs ?? []),
      weights: concatBuffers(weightData),
      optimizer: this.spec.config.optimizer,
      optimizerSpecs: specsOf(encoded.specs),
      optimizerData: new Uint8Array(encoded.data),
    };
  }

  async load(snapshot: Pick<ReplicaSnapshot, 'weightSpecs' | 'weights' | 'optimizerSpecs' | 'optimizerData'>): Promise<void> {
    await this.weights.idle();
    this.weights.load(snapshot.weightSpecs, snapshot.weights, `${this.spec.config.task} task's ${this.spec.config.model}`);
    const opt = tf.io.decodeWeights(snapshot.optimizerData.slice().buffer, snapshot.optimizerSpecs);
    await loadOptimizerWeights(
      this.spec.config.optimizer,
      this.optimizer,
      snapshot.optimizerSpecs.map((s) => ({ name: s.name, tensor: opt[s.name]! })),
      this.weights.variables,
    );
    // setWeights keeps copies as variables (and reads the iteration count), so the decoded tensors can go.
    tf.dispose(Object.values(opt));
    await this.fused.fromOptimizer(this.optimizer);
  }

  async nudge(): Promise<void> {
    await this.weights.idle();
    this.weights.nudge();
  }

  async dispose(): Promise<void> {
    this.optimizer.dispose();
    this.model.dispose();
  }
}
