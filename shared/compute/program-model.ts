/**
 * A program's own model, as it crosses into the maths thread. A tf.LayersModel cannot cross
 * postMessage, so the network thread describes the compiled model in plain data (tfjs's
 * own formats): its topology and initial weights as `model.save` writes them, its
 * optimizer as `getClassName()` and `getConfig()`, and its loss per output by name. The
 * thread rebuilds the model from that (model-replica.ts) after importing the program's
 * thread modules, which register what the data cannot carry: custom layers
 * (`tf.serialization.registerClass`, as tfjs itself requires for loading them) and custom
 * losses (`registerLoss` below).
 */
import * as tf from '@tensorflow/tfjs';
import { WebringError } from '../protocol/errors';
import { artifactsOf, concatBuffers, type WeightSpec } from './weight-bytes';

/** A loss as the thread finds it: one of tfjs's Keras names ('meanSquaredError', 'categoricalCrossentropy', …) or a name given to registerLoss. */
export type LossName = string;
/** A loss of one output: per-example losses, shape [n], for targets and predictions of shape [n, ...]. */
export type LossFunction = (yTrue: tf.Tensor, yPred: tf.Tensor) => tf.Tensor;

export interface ProgramModel {
  /** model.json's topology and the initial weights, as `model.save` gives them. */
  modelTopology: object;
  weightSpecs: WeightSpec[];
  weightData: ArrayBuffer;
  /** The optimizer as tfjs serializes it: its class ('Adam', 'SGD', 'Momentum', 'RMSProp', 'Adagrad', 'Adadelta') and config. */
  optimizer: { className: string; config: Record<string, unknown> };
  /** One loss per output, in output order. */
  losses: LossName[];
  /** One example's shape per input and per output, without the batch dimension. */
  inputShapes: number[][];
  outputShapes: number[][];
  /** The inputs' and outputs' names (model.inputNames, model.outputNames): a dataset's dict elements are matched by them. */
  inputNames: string[];
  outputNames: string[];
  /** Module URLs the maths thread imports before it builds the model (custom layers and losses). */
  threadModules: string[];
}

/** Optimizers whose whole state getWeights and setWeights carry, so a hand-over and a checkpoint keep it. Adamax's throw in tfjs. */
export const SUPPORTED_OPTIMIZERS = ['SGD', 'Momentum', 'Adam', 'RMSProp', 'Adagrad', 'Adadelta'] as const;

const registeredLosses = new Map<LossName, LossFunction>();

/**
 * Names a custom loss, so a model compiled with it trains in the maths thread: call it in a
 * module that is both imported by the program and listed in its thread modules.
 */
export function registerLoss(name: LossName, fn: LossFunction): void {
  const known = registeredLosses.get(name);
  if (known && known !== fn) throw new WebringError('ERR_BAD_REQUEST', `a different loss is already registered as ${name}`);
  registeredLosses.set(name, fn);
}

function nameOfLoss(loss: unknown, output: number): LossName {
  if (typeof loss === 'string') return loss;
  for (const [name, fn] of registeredLosses) if (fn === loss) return name;
  throw new WebringError('ERR_BAD_REQUEST', `output ${output}'s loss is a function that was not registered: name it with registerLoss(name, fn) in a module the maths thread imports (threadModules)`);
}

/** The registered loss `name`, or null for a tfjs name. */
export function registeredLoss(name: LossName): LossFunction | null {
  return registeredLosses.get(name) ?? null;
}

function exampleShape(shape: ReadonlyArray<number | null>, what: string): number[] {
  const rest = shape.slice(1);
  if (rest.some((d) => d === null)) throw new WebringError('ERR_BAD_REQUEST', `${what} has shape [${shape.map((d) => d ?? 'null').join(', ')}]: every dimension but the batch must be known`);
  return rest as number[];
}

/**
 * Describes a compiled model for the maths thread. Refuses, with ERR_BAD_REQUEST naming
 * what to change, a model that is not compiled, an optimizer whose state tfjs cannot read
 * back, an unregistered loss function, and inputs or outputs of unknown shape.
 */
export async function describeModel(model: tf.LayersModel, threadModules: readonly string[] = []): Promise<ProgramModel> {
  const optimizer = model.optimizer as (tf.Optimizer & { getConfig(): Record<string, unknown> }) | undefined;
  if (!optimizer) throw new WebringError('ERR_BAD_REQUEST', 'the model is not compiled: call model.compile({ optimizer, loss }) first');
  const className = optimizer.getClassName();
  if (!(SUPPORTED_OPTIMIZERS as readonly string[]).includes(className)) {
    throw new WebringError('ERR_BAD_REQUEST', `the ${className} optimizer is not supported (its state cannot be read back); use one of ${SUPPORTED_OPTIMIZERS.join(', ')}`);
  }
  const compiled = model.loss as unknown;
  const perOutput = Array.isArray(compiled) ? compiled : model.outputs.map(() => compiled);
  if (perOutput.length !== model.outputs.length) throw new WebringError('ERR_BAD_REQUEST', `${perOutput.length} losses for ${model.outputs.length} outputs`);
  const saved = await artifactsOf(model);
  if (!saved.modelTopology || !saved.weightSpecs) throw new WebringError('ERR_INTERNAL', 'the model saved no topology');
  return {
    modelTopology: saved.modelTopology as object,
    weightSpecs: saved.weightSpecs.map((s) => ({ name: s.name, shape: [...s.shape], dtype: s.dtype })),
    weightData: concatBuffers(saved.weightData).buffer as ArrayBuffer,
    optimizer: { className, config: optimizer.getConfig() },
    losses: perOutput.map((l, i) => nameOfLoss(l, i)),
    inputShapes: model.inputs.map((t, i) => exampleShape(t.shape, `input ${i}`)),
    outputShapes: model.outputs.map((t, i) => exampleShape(t.shape, `output ${i}`)),
    inputNames: [...model.inputNames],
    outputNames: [...model.outputNames],
    threadModules: [...threadModules],
  };
}

/** Numbers in one example of `shape`. */
export const sizeOf = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** Floats of one example's row in a program's batch buffer: every input, then every target (model-replica.ts). */
export function rowLength(program: Pick<ProgramModel, 'inputShapes' | 'outputShapes'>): number {
  return [...program.inputShapes, ...program.outputShapes].reduce((n, s) => n + sizeOf(s), 0);
}
