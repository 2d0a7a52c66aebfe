/**
 * A model's trainable weights as one flat vector, the way every replica treats them: the
 * offsets of each variable in it, the gradients read into it, a mean gradient applied from
 * it (through the fused update, or through a tfjs optimizer), the weights read out of it
 * and checked against a checkpoint's, and their fingerprint. The fused update keeps a copy
 * of the weights beside the device, so that neither the update nor the hash reads them
 * back; a tfjs optimizer's update is read back only when the weights are next needed.
 * While a local-steps round trains the variables on the device (device-round.ts), the
 * mirror keeps the weights the round started from.
 * LocalReplica (the tasks' models, fused) and ModelReplica (a program's, tfjs) share it.
 */
import * as tf from '@tensorflow/tfjs';
import { WebringError } from '../protocol/errors';
import { WeightsHasher } from '../util/weights-hash';
import { setLearningRate } from './models';
import type { WeightSpec } from './weight-bytes';
import type { Applied } from './replica';
import type { FlatOptimizer } from './flat-optimizer';
import { threadsNow } from '../util/clock';

export class TrainableWeights {
  readonly variables: tf.Variable[];
  readonly offsets: number[] = [];
  /** Floats of all the weights. */
  readonly count: number;
  /** Bumped whenever the weights change, so the hash is read back only when needed. */
  private version = 0;
  private hashCache: { version: number; hash: string } | null = null;
  /**
   * The weights as the device holds them, in the flat layout, kept by the fused update
   * (applyFused): with it the update, the hash and a state read need no device read.
   * Null until first read, and again whenever the weights change by another path.
   */
  private mirror: Float32Array | null = null;
  /**
   * The fused update in flight, and what waits for it: an update that must first read the
   * weights back yields, and a read of the state meanwhile would see the old weights.
   * Readers and writers queue behind it, as tfjs's ops queue behind the device's.
   */
  private queue: Promise<unknown> = Promise.resolve();
  /**
   * A local-steps round holds the device's variables (device-round.ts): they train away
   * from the weights while the mirror keeps the weights the round started from, which the
   * hash and a state read give until the round closes.
   */
  private round = false;

  constructor(model: tf.LayersModel) {
    this.variables = model.trainableWeights.map((w) => (w as unknown as { val: tf.Variable }).val);
    let total = 0;
    for (const v of this.variables) {
      this.offsets.push(total);
      total += v.size;
    }
    this.count = total;
  }

  /** The weights changed outside apply() (a state or a checkpoint written, a fault): an open round is over. */
  changed(): void {
    this.version++;
    this.mirror = null;
    this.round = false;
  }

  /** Runs `work` alone on the weights, after everything queued before it: a round's leg. */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    return this.queued(work);
  }

  /** Whether a round holds the variables: none has closed it, and no state was written since it opened. */
  get roundOpen(): boolean {
    return this.round;
  }

  /** Inside `exclusive`: a round opens; the mirror holds the weights it starts from (read back once if it has none), and is returned (not to be changed). */
  async openRound(): Promise<Float32Array> {
    if (!this.mirror) this.mirror = await this.readDevice();
    this.round = true;
    return this.mirror;
  }

  /** Inside `exclusive`: the round is over, and the variables go back to the weights it started from (the hash stays valid). */
  closeRound(): void {
    if (!this.round) return;
    this.round = false;
    this.assignFrom(this.mirror!);
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
    this.changed();
  }

  /**
   * Replica.applyGradients through the fused update (flat-optimizer.ts): the update runs
   * over the mirror in one pass, the new weights go up once a variable, and the hash is
   * taken from the mirror, so the step reads nothing back from the device.
   */
  applyFused(optimizer: FlatOptimizer, flat: Float32Array, learningRate: number): Promise<Applied> {
    return this.queued(async () => {
      const startedAt = threadsNow();
      const weights = this.mirror ?? (await this.readDevice());
      optimizer.apply(weights, flat.subarray(0, this.count), learningRate);
      this.upload(weights);
      const appliedAt = threadsNow();
      const weightsHash = await this.hashNow();
      return { flat, weightsHash, startedAt, appliedAt, endedAt: threadsNow() };
    });
  }

  /** Sets every weight from `values` (the flat layout), which the mirror then holds: the caller gives it up. */
  write(values: Float32Array): Promise<void> {
    return this.queued(() => this.upload(values));
  }

  /**
   * Resolves once every queued update has reached the device's variables. The caller's
   * kernels that read the weights (a backprop, a score) wait for it: the trainer hands an
   * update over and goes on to the next step without waiting, and a kernel queued before
   * the update's upload would read the old weights.
   */
  async idle(): Promise<void> {
    await this.queue;
  }

  /** Runs `work` after everything queued before it. */
  private queued<T>(work: () => T | Promise<T>): Promise<T> {
    const result = this.queue.then(work);
    // The caller gets `result`, error and all; the queue only needs to know it is over.
    this.queue = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  private upload(values: Float32Array): void {
    this.assignFrom(values);
    this.mirror = values;
    this.version++;
    this.round = false;
  }

  /** Sets the variables from `values` (the flat layout, copied); the mirror and the hash do not follow: a round's local weights (device-round.ts), or the mirror itself. */
  assignFrom(values: Float32Array): void {
    tf.tidy(() => {
      this.variables.forEach((v, i) => {
        const off = this.offsets[i]!;
        // A copy: the CPU backend keeps the array it is given as the tensor's storage, and the
        // GPU backends upload it only when a kernel first reads it; the mirror changes before.
        v.assign(tf.tensor(values.slice(off, off + v.size), v.shape, 'float32'));
      });
    });
  }

  /** The weights' fingerprint (shared/util/weights-hash.ts); cached until they change. */
  hash(): Promise<string> {
    return this.queued(() => this.hashNow());
  }

  private async hashNow(): Promise<string> {
    const version = this.version;
    if (this.hashCache?.version === version) return this.hashCache.hash;
    const values = this.mirror ? [this.mirror] : await Promise.all(this.variables.map((v) => v.data() as Promise<Float32Array>));
    const hasher = new WeightsHasher();
    for (const vals of values) hasher.update(vals);
    const hash = hasher.digest();
    this.hashCache = { version, hash };
    return hash;
  }

  /** All weights concatenated in variable order (a copy the caller may keep). */
  read(): Promise<Float32Array> {
    return this.queued(async () => (this.mirror ?? (await this.readDevice())).slice());
  }

  /** Reads the weights from the device into a new mirror. */
  private async readDevice(): Promise<Float32Array> {
    const version = this.version;
    const values = await Promise.all(this.variables.map((v) => v.data() as Promise<Float32Array>));
    const out = new Float32Array(this.count);
    values.forEach((vals, i) => out.set(vals, this.offsets[i]));
    // Kept only if nothing changed the weights while they were read.
    if (this.version === version) this.mirror = out;
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
    this.changed();
  }

  /** Nudges one weight, as numeric drift between backends would (an injected fault). */
  nudge(): void {
    const v = this.variables[0]!;
    tf.tidy(() => v.assign(v.add(tf.scalar(1e-3))));
    this.changed();
  }
}
