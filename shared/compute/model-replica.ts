/**
 * The replica of a program's own model (program-model.ts): any tf.LayersModel, sequential
 * or functional, with any inputs and outputs, a loss per output and any optimizer whose
 * state tfjs reads back. It keeps the Replica contract LocalReplica keeps for the tasks'
 * models, so the trainer, the collectives and the hand-over run it unchanged.
 *
 * A batch travels in the trainer's one feature buffer: each example is one row of its
 * inputs' numbers and then its targets' numbers, in input and output order (rowLength);
 * the labels buffer is unused. The loss is the sum over examples (and outputs) of the
 * outputs' per-example losses, so shares of different sizes average exactly, as for the
 * tasks; there is no accuracy (correct is 0), only the loss.
 */
import * as tf from '@tensorflow/tfjs';
import { WebringError } from '../protocol/errors';
import { threadsNow } from '../util/clock';
import { TrainableWeights } from './trainable-weights';
import { DeviceRound, holdThread } from './device-round';
import { artifactsOf, concatBuffers, specsOf } from './weight-bytes';
import { registeredLoss, rowLength, sizeOf, SUPPORTED_OPTIMIZERS, type ProgramModel } from './program-model';
import type { Applied, Examples, Gradients, Replica, ReplicaSnapshot, RoundLeg, RoundLegDone, Scored } from './replica';

/** One of an optimizer's weights as getWeights gives them and setWeights takes them. */
type OptimizerWeight = Parameters<tf.Optimizer['setWeights']>[0][number];

/** The optimizers a checkpoint's metadata names (checkpoints/checkpoint.ts). */
const CHECKPOINT_OPTIMIZERS: Record<(typeof SUPPORTED_OPTIMIZERS)[number], ReplicaSnapshot['optimizer']> = { SGD: 'sgd', Adam: 'adam', Momentum: 'momentum', RMSProp: 'rmsprop', Adagrad: 'adagrad', Adadelta: 'adadelta' };

/** Output `output`'s loss: a registered one by its name, else the one model.compile found for the tfjs name. */
function lossFunctionOf(model: tf.LayersModel, name: string, output: number): (yTrue: tf.Tensor, yPred: tf.Tensor) => tf.Tensor {
  const custom = registeredLoss(name);
  if (custom) return custom;
  // A Sequential keeps its compiled losses on the functional model it wraps.
  const functional = (model as unknown as { model?: tf.LayersModel }).model ?? model;
  const compiled = functional.lossFunctions?.[output];
  if (!compiled) throw new WebringError('ERR_BAD_REQUEST', `loss ${name} of output ${output} is not a tfjs loss, and no module registered it (registerLoss)`);
  return compiled as (yTrue: tf.Tensor, yPred: tf.Tensor) => tf.Tensor;
}

export class ModelReplica implements Replica {
  readonly parameterCount: number;
  readonly weightShapes: ReadonlyArray<readonly number[]>;
  readonly stateLength: number;
  private readonly weights: TrainableWeights;
  private readonly losses: Array<(yTrue: tf.Tensor, yPred: tf.Tensor) => tf.Tensor>;
  /** Floats of each input and output of one example, in row order. */
  private readonly parts: number[];
  private readonly row: number;
  /** Each input's and target's numbers of a batch, by part (tensors()). */
  private readonly partBuffers: Float32Array[] = [];
  /** Local steps' rounds on the device, through this model's own optimizer. */
  private readonly round: DeviceRound;
  /** The optimizer's weights (iterations first) and hidden scalars at the open round's start, which it trains away from: copies. */
  private roundStart: { weights: OptimizerWeight[]; hidden: tf.Tensor[] } | null = null;

  private constructor(
    private readonly program: ProgramModel,
    private readonly model: tf.LayersModel,
    private readonly optimizer: tf.Optimizer,
    private readonly busyComputeMs: number,
    /** The shapes of the optimizer's slots, in getWeights order (after its iteration count). */
    private readonly slotShapes: number[][],
  ) {
    this.weights = new TrainableWeights(model);
    const total = this.weights.count;
    this.parameterCount = total;
    this.weightShapes = this.weights.variables.map((v) => [...v.shape]);
    this.losses = program.losses.map((name, i) => lossFunctionOf(model, name, i));
    this.parts = [...program.inputShapes, ...program.outputShapes].map(sizeOf);
    this.row = rowLength(program);
    // The weights, the optimizer's slots, its hidden scalars, and its iteration count last.
    this.stateLength = total + slotShapes.reduce((n, shape) => n + sizeOf(shape), 0) + this.hiddenState().length + 1;
    this.round = new DeviceRound({
      weights: this.weights,
      optimizer,
      rowFloats: this.row,
      busyComputeMs,
      // A program's optimizer is tfjs's own, on any backend: there is no fused update to run on the host.
      place: 'device',
      backprop: (examples) => ({ ...this.backprop(examples), correct: null }),
      beginRound: () => this.keepRoundStart(),
      endRound: (restore) => this.endRound(restore),
    });
  }

  /** The optimizer's state the round starts from, kept as copies (a state read during the round gives them). */
  private async keepRoundStart(): Promise<void> {
    const [iterations, ...slots] = await this.optimizer.getWeights();
    this.roundStart = { weights: [iterations!, ...slots.map((s) => ({ name: s.name, tensor: s.tensor.clone() }))], hidden: this.hiddenState().map((v) => v.clone()) };
  }

  private async endRound(restore: boolean): Promise<void> {
    const start = this.roundStart;
    this.roundStart = null;
    if (!start) return;
    if (!restore) {
      tf.dispose([...start.weights.map((w) => w.tensor), ...start.hidden]);
      return;
    }
    const hidden = this.hiddenState();
    tf.tidy(() => hidden.forEach((v, i) => v.assign(start.hidden[i]!)));
    tf.dispose(start.hidden);
    await this.replaceOptimizerWeights(start.weights);
  }

  /**
   * State an optimizer keeps beside what getWeights gives: Adam's β1^t and β2^t, which
   * setWeights recomputes with pow() from the iteration count, a rounding away from the
   * product the live replica's steps made. A joiner takes them as they are, bit for bit.
   */
  private hiddenState(): tf.Variable[] {
    if (this.program.optimizer.className !== 'Adam') return [];
    const adam = this.optimizer as unknown as { accBeta1: tf.Variable; accBeta2: tf.Variable };
    return [adam.accBeta1, adam.accBeta2];
  }

  /** Imports the thread modules, rebuilds the model and its optimizer, and lays out the optimizer's state. */
  static async build(program: ProgramModel, busyComputeMs = 0): Promise<ModelReplica> {
    for (const url of program.threadModules) await import(/* @vite-ignore */ url);
    const { className, config } = program.optimizer;
    if (!(SUPPORTED_OPTIMIZERS as readonly string[]).includes(className)) throw new WebringError('ERR_BAD_REQUEST', `the ${className} optimizer is not supported`);
    const registered = tf.serialization.SerializationMap.getMap().classNameMap[className];
    if (!registered) throw new WebringError('ERR_BAD_REQUEST', `no optimizer class ${className} is registered with tfjs`);
    const [cls, fromConfig] = registered;
    const optimizer = fromConfig(cls, config as tf.serialization.ConfigDict) as unknown as tf.Optimizer;
    const model = await tf.loadLayersModel(
      tf.io.fromMemory({ modelTopology: program.modelTopology, weightSpecs: program.weightSpecs, weightData: program.weightData.slice(0) }),
    );
    // Compiled for its loss functions (model.lossFunctions) by their Keras names; a
    // registered loss is looked up by name instead, so compile sees a placeholder.
    model.compile({ optimizer, loss: program.losses.map((name) => (registeredLoss(name) ? 'meanSquaredError' : name)) });
    return new ModelReplica(program, model, optimizer, busyComputeMs, await layOutOptimizerState(model, optimizer));
  }

  private replaceOptimizerWeights(weights: OptimizerWeight[]): Promise<void> {
    return replaceOptimizerWeights(this.optimizer, weights);
  }

  /**
   * The first `n` rows of `features` as the model's inputs and targets (inside a tidy).
   * Each part's columns are copied out row by row into a buffer of its own, reused from
   * step to step: tfjs's CPU split of the rows copies element by element, and took a third
   * of a dense model's step. The tensors may alias those buffers (the CPU backend does not copy);
   * they live only inside the caller's tidy, before the next call writes the buffers again.
   */
  private tensors(features: Float32Array, n: number): { inputs: tf.Tensor[]; targets: tf.Tensor[] } {
    const shapes = [...this.program.inputShapes, ...this.program.outputShapes];
    let column = 0;
    const shaped = this.parts.map((size, i) => {
      const need = n * size;
      if ((this.partBuffers[i]?.length ?? 0) < need) this.partBuffers[i] = new Float32Array(need);
      const out = this.partBuffers[i]!;
      for (let r = 0; r < n; r++) out.set(features.subarray(r * this.row + column, r * this.row + column + size), r * size);
      column += size;
      return tf.tensor(out.subarray(0, need), [n, ...shapes[i]!], 'float32');
    });
    const inputCount = this.program.inputShapes.length;
    return { inputs: shaped.slice(0, inputCount), targets: shaped.slice(inputCount) };
  }

  private lossSum(targets: tf.Tensor[], predictions: tf.Tensor[]): tf.Scalar {
    return tf.addN(predictions.map((p, i) => tf.sum(this.losses[i]!(targets[i]!, p)))) as tf.Scalar;
  }

  private forward(inputs: tf.Tensor[], training: boolean): tf.Tensor[] {
    const out = this.model.apply(inputs.length === 1 ? inputs[0]! : inputs, { training }) as tf.Tensor | tf.Tensor[];
    return Array.isArray(out) ? out : [out];
  }

  /** Forward and backward over the examples, with a SUM loss; the caller disposes what it returns. */
  private backprop(examples: Examples): { value: tf.Scalar; grads: tf.NamedTensorMap } {
    return tf.tidy(() => {
      const { inputs, targets } = this.tensors(examples.features, examples.n);
      return tf.variableGrads(() => this.lossSum(targets, this.forward(inputs, true)), this.weights.variables);
    });
  }

  async computeGradients(examples: Examples, flat: Float32Array): Promise<Gradients> {
    const startedAt = threadsNow();
    const t0 = performance.now();
    if (this.busyComputeMs) holdThread(this.busyComputeMs);
    const { value, grads } = this.backprop(examples);
    let result: Gradients;
    try {
      const loss = (await value.data())[0]!;
      const tReadback = performance.now();
      await this.weights.readGradients(grads, flat);
      const { features, labels } = examples;
      result = { flat, features, labels, loss, correct: 0, computeMs: tReadback - t0, readbackMs: performance.now() - tReadback, startedAt, endedAt: 0, numTensors: 0 };
    } finally {
      value.dispose();
      tf.dispose(grads);
    }
    result.numTensors = tf.memory().numTensors;
    result.endedAt = threadsNow();
    return result;
  }

  applyGradients(flat: Float32Array, learningRate: number): Promise<Applied> {
    return this.weights.applyGradients(this.optimizer, flat, learningRate);
  }

  trainRound(leg: RoundLeg): Promise<RoundLegDone> {
    return this.round.leg(leg);
  }

  async score({ features, labels, n }: Examples): Promise<Scored> {
    const sum = tf.tidy(() => {
      const { inputs, targets } = this.tensors(features, n);
      return this.lossSum(targets, this.forward(inputs, false));
    });
    try {
      return { correct: 0, loss: (await sum.data())[0]!, features, labels };
    } finally {
      sum.dispose();
    }
  }

  /** The first output for `n` examples whose rows hold their inputs (the targets' places may be anything). */
  async predict(features: Float32Array, n: number): Promise<Float32Array> {
    const out = tf.tidy(() => this.forward(this.tensors(features, n).inputs, false)[0]!);
    try {
      return (await out.data()) as Float32Array;
    } finally {
      out.dispose();
    }
  }

  async rehearse(n: number): Promise<void> {
    const examples = { features: new Float32Array(n * this.row), labels: new Int32Array(n), n };
    const { flat } = await this.computeGradients(examples, new Float32Array(this.parameterCount));
    const state = await this.readState();
    await this.applyGradients(flat, 0);
    await this.writeState(state);
  }

  weightsHash(): Promise<string> {
    return this.weights.hash();
  }

  readWeights(): Promise<Float32Array> {
    return this.weights.read();
  }

  /** The state; during a round, the one it started from (the weights' mirror keeps theirs). */
  async readState(): Promise<Float32Array> {
    const out = new Float32Array(this.stateLength);
    out.set(await this.weights.read(), 0);
    const start = this.roundStart;
    const [iterations, ...slots] = start ? start.weights : await this.optimizer.getWeights();
    const hidden = start ? start.hidden : this.hiddenState();
    let at = this.parameterCount;
    for (const vals of await Promise.all([...slots.map((s) => s.tensor), ...hidden].map((t) => t.data() as Promise<Float32Array>))) {
      out.set(vals, at);
      at += vals.length;
    }
    out[at] = (await iterations!.tensor.data())[0]!;
    if (!start) iterations!.tensor.dispose();
    return out;
  }

  async writeState(state: Float32Array): Promise<void> {
    if (state.length !== this.stateLength) throw new WebringError('ERR_BAD_DATA', `a state of ${state.length} floats, this replica's has ${this.stateLength}`);
    let at = 0;
    tf.tidy(() => {
      for (const v of this.weights.variables) {
        // slice, not subarray: the CPU backend keeps the array it is given as the tensor's storage.
        v.assign(tf.tensor(state.slice(at, at + v.size), v.shape, 'float32'));
        at += v.size;
      }
    });
    const names = (await this.optimizer.getWeights()).map((w, i) => {
      if (i === 0) w.tensor.dispose();
      return w.name;
    });
    const slots = this.slotShapes.map((shape, i) => {
      const size = sizeOf(shape);
      const tensor = tf.tensor(state.slice(at, at + size), shape, 'float32');
      at += size;
      return { name: names[i + 1]!, tensor };
    });
    const hidden = this.hiddenState();
    const hiddenValues = state.slice(at, at + hidden.length);
    at += hidden.length;
    await this.replaceOptimizerWeights([{ name: names[0]!, tensor: tf.scalar(state[at]!, 'int32') }, ...slots]);
    tf.tidy(() => hidden.forEach((v, i) => v.assign(tf.scalar(hiddenValues[i]!))));
    this.weights.changed();
  }

  async snapshot(): Promise<ReplicaSnapshot> {
    const saved = await artifactsOf(this.model);
    const optimizerWeights = await this.optimizer.getWeights();
    const encoded = await tf.io.encodeWeights(optimizerWeights);
    optimizerWeights[0]!.tensor.dispose();
    const kind = CHECKPOINT_OPTIMIZERS[this.program.optimizer.className as (typeof SUPPORTED_OPTIMIZERS)[number]];
    if (!kind) throw new WebringError('ERR_BAD_REQUEST', `checkpoints keep the state of ${SUPPORTED_OPTIMIZERS.join(', ')}; this model's optimizer is ${this.program.optimizer.className}`);
    return {
      modelTopology: saved.modelTopology ?? {},
      weightSpecs: specsOf(saved.weightSpecs ?? []),
      weights: concatBuffers(saved.weightData),
      optimizer: kind,
      optimizerSpecs: specsOf(encoded.specs),
      optimizerData: new Uint8Array(encoded.data),
    };
  }

  async load(snapshot: Pick<ReplicaSnapshot, 'weightSpecs' | 'weights' | 'optimizerSpecs' | 'optimizerData'>): Promise<void> {
    this.weights.load(snapshot.weightSpecs, snapshot.weights, 'model');
    const opt = tf.io.decodeWeights(snapshot.optimizerData.slice().buffer, snapshot.optimizerSpecs);
    await this.replaceOptimizerWeights(snapshot.optimizerSpecs.map((s) => ({ name: s.name, tensor: opt[s.name]! })));
  }

  async nudge(): Promise<void> {
    this.weights.nudge();
  }

  async dispose(): Promise<void> {
    this.optimizer.dispose();
    this.model.dispose();
  }
}

/**
 * tfjs makes an optimizer's slots on its first step; one blank step (zero gradients, which
 * move no weight in any supported optimizer) makes them now, and the iteration count goes
 * back to 0, so every replica's state has one layout from the start. Returns the slots' shapes.
 */
async function layOutOptimizerState(model: tf.LayersModel, optimizer: tf.Optimizer): Promise<number[][]> {
  tf.tidy(() => {
    const zeros: tf.NamedTensorMap = {};
    for (const w of model.trainableWeights) {
      const v = (w as unknown as { val: tf.Variable }).val;
      zeros[v.name] = tf.zerosLike(v);
    }
    optimizer.applyGradients(zeros);
  });
  const [iterations, ...slots] = await optimizer.getWeights();
  await replaceOptimizerWeights(optimizer, [{ name: iterations!.name, tensor: tf.scalar(0, 'int32') }, ...slots.map((s) => ({ name: s.name, tensor: s.tensor.clone() }))]);
  iterations!.tensor.dispose();
  return slots.map((s) => [...s.tensor.shape]);
}

/** setWeights makes new slot variables without disposing the old: they go first. Takes ownership of `weights`. */
async function replaceOptimizerWeights(optimizer: tf.Optimizer, weights: OptimizerWeight[]): Promise<void> {
  const [iterations, ...slots] = await optimizer.getWeights();
  iterations?.tensor.dispose();
  tf.dispose(slots.map((w) => w.tensor));
  await optimizer.setWeights(weights);
  tf.dispose(weights.map((w) => w.tensor));
}
