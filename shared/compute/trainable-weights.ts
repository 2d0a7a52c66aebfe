/**
 * A model's trainable weights as one flat vector, the way every replica treats them: the
 * offsets of each variable in it, the gradients read into it, a mean gradient applied from
 * it through the optimizer, the weights read out of it and checked against a checkpoint's,
 * and their fingerprint, read back from the device only after they changed. LocalReplica
 * (the tasks' models) and ModelReplica (a program's) share it.
 */
import * as tf from '@tensorflow/tfjs';
import { WebringError } from '../protocol/errors';
import { WeightsHasher } from '../util/weights-hash';
import { setLearningRate } from './models';
import type { WeightSpec } from './weight-bytes';
import type { Applied } from './replica';
import { threadsNow } from '../util/clock';

export class TrainableWeights {
  readonly variables: tf.Variable[];
  readonly offsets: number[] = [];
  /** Floats of all the weights. */
  readonly count: number;
  /** Bumped whenever the weights change, so the hash is read back only when needed. */
  private version = 0;
  private hashCache: { version: number; hash: string } | null = null;

  constructor(model: tf.LayersModel) {
    this.variables = model.trainableWeights.map((w) => (w as unknown as { val: tf.Variable }).val);
    let total = 0;
    for (const v of this.variables) {
      this.offsets.push(total);
      total += v.size;
    }
    this.count = total;
  }

  /** The weights changed outside apply() (a state or a checkpoint written, a fault). */
  changed(): void {
    this.version++;
  }

  /** Reads `grads` (by variable name) into `flat[0, count)`, every variable at once: the GPU queue overlaps the copies. */
  async readGradients(grads: tf.NamedTensorMap, flat: Float32Array): Promise<void> {
    const data = await Promise.all(this.variables.map((v) => grads[v.name]!.data()));
    data.forEach((g, i) => flat.set(g as Float32Array, this.offsets[i]));
  }

  /** Replica.applyGradients: the update, then the new weights' hash, timed (threadsNow). */
  async applyGradients(optimizer: tf.Optimizer, flat: Float32Array, learningRate: number): Promise<Applied> {
    const startedAt = threadsNow();
    this.apply(optimizer, flat, learningRate);
    const appliedAt = threadsNow();
    const weightsHash = await this.hash();
    return { flat, weightsHash, startedAt, appliedAt, endedAt: threadsNow() };
  }

  /** Applies `flat[0, count)` (the mean gradient) through `optimizer` at `learningRate`. */
  private apply(optimizer: tf.Optimizer, flat: Float32Array, learningRate: number): void {
    setLearningRate(optimizer, learningRate);
    // These tensors may alias `flat` (the CPU backend does not copy); that is safe because
    // they live only inside this tidy, and `flat` is not written again until the next step.
    tf.tidy(() => {
      const named: tf.NamedTensorMap = {};
      this.variables.forEach((v, i) => {
        const off = this.offsets[i]!;
        named[v.name] = tf.tensor(flat.subarray(off, off + v.size), v.shape, 'float32');
      });
      optimizer.applyGradients(named);
    });
    this.version++;
  }

  /** The weights' fingerprint (shared/util/weights-hash.ts); cached until they change. */
  async hash(): Promise<string> {
    const version = this.version;
    if (this.hashCache?.version === version) return this.hashCache.hash;
    const values = await Promise.all(this.variables.map((v) => v.data() as Promise<Float32Array>));
    const hasher = new WeightsHasher();
    for (const vals of values) hasher.update(vals);
    const hash = hasher.digest();
    this.hashCache = { version, hash };
    return hash;
  }

  /** All weights concatenated in variable order. */
  async read(): Promise<Float32Array> {
    const values = await Promise.all(this.variables.map((v) => v.data() as Promise<Float32Array>));
    const out = new Float32Array(this.count);
    values.forEach((vals, i) => out.set(vals, this.offsets[i]));
    return out;
  }

  /** Loads a checkpoint's weights, matched by position (layer names differ between pages, their order does not); shapes checked first. */
  load(specs: readonly WeightSpec[], bytes: Uint8Array, model: string): void {
    if (specs.length !== this.variables.length) throw new WebringError('ERR_BAD_DATA', `checkpoint has ${specs.length} weights, the ${model} has ${this.variables.length}`);
    specs.forEach((s, i) => {
      if (s.shape.join('x') !== this.variables[i]!.shape.join('x')) throw new WebringError('ERR_BAD_DATA', `checkpoint weight ${i} has shape ${s.shape}, the model needs ${this.variables[i]!.shape}`);
    });
    const weights = tf.io.decodeWeights(bytes.slice().buffer, specs as WeightSpec[]);
    this.variables.forEach((v, i) => v.assign(weights[specs[i]!.name]!));
    tf.dispose(Object.values(weights));
    this.version++;
  }

  /** Nudges one weight, as numeric drift between backends would (an injected fault). */
  nudge(): void {
    const v = this.variables[0]!;
    tf.tidy(() => v.assign(v.add(tf.scalar(1e-3))));
    this.version++;
  }
}
