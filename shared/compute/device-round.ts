/**
 * A local-steps round in the replica's thread (Replica.trainRound): each local step's
 * forward, backward, mean and optimizer update run there, with no crossing back to the
 * network thread; the steps' loss is read once a leg, and the local weights once a round.
 *
 * Where the updates run depends on where the backend keeps its tensors:
 * - 'device' (WebGPU, WebGL): as the backend's kernels on the device's variables, so that
 *   nothing is read back either. The update may be tfjs's optimizer (whose kernels round
 *   as the device does) rather than the fused update's bit-exact host pass
 *   (flat-optimizer.ts), because a local step's weights are this device's alone: only the
 *   round's change travels.
 * - 'host' (CPU, WebAssembly): the tensors already live in this thread's memory, so there is
 *   nothing to stay on, and tfjs's elementwise kernels there take several passes where the
 *   fused update takes one (bench/local-step-cpu.md: milliseconds a step for a dense model). The
 *   gradients are read (a copy), and the fused update runs on a copy of the weights with a
 *   copy of the inner optimizer's state.
 *
 * Either way, what the class holds (the weights of the last sync in the mirror, and the
 * inner optimizer's state in the fused optimizer) stays untouched until the round ends, so
 * every replica is still bit-identical after every outer step.
 */
import * as tf from '@tensorflow/tfjs';
import { WebringError } from '../protocol/errors';
import { threadsNow } from '../util/clock';
import { setLearningRate } from './models';
import type { Examples, RoundLeg, RoundLegDone, RoundPlace } from './replica';
import type { TrainableWeights } from './trainable-weights';
import type { FlatOptimizer } from './flat-optimizer';

/** The place for a tfjs backend: on the host where its tensors live in this thread's memory. */
export function roundPlaceFor(backend: string): RoundPlace {
  return backend === 'cpu' || backend === 'wasm' ? 'host' : 'device';
}

/** What a replica gives its rounds: its weights, its optimizer, and the maths of a step. */
export interface RoundModel {
  readonly weights: TrainableWeights;
  readonly optimizer: tf.Optimizer;
  /** Floats of one example's row in a leg's features. */
  readonly rowFloats: number;
  /** A test's fault: each trained step holds the thread this long (ReplicaSpec.busyComputeMs). */
  readonly busyComputeMs: number;
  /** Where the updates run; null: by the backend in use when a round opens (roundPlaceFor). */
  readonly place: RoundPlace | null;
  /** Forward and backward over the examples with a SUM loss: the loss, the gradients by variable name, and the examples right (null: the model has no accuracy). */
  backprop(examples: Examples): { value: tf.Scalar; grads: tf.NamedTensorMap; correct: tf.Tensor | null };
  /**
   * For the host place: the fused update with a copy of the class's inner optimizer state,
   * which the round may change (the same object every round); absent: the device place only.
   */
  hostOptimizer?(): FlatOptimizer;
  /** Before the round's first step: the optimizer's slots hold the state the round starts from (the device place). */
  beginRound(): Promise<void>;
  /**
   * After the round (or a failed leg): with `restore`, the optimizer's slots go back to the
   * round's start, if anything reads them later; without, a state written meanwhile replaced
   * them, and the round only lets go of what it kept.
   */
  endRound(restore: boolean): Promise<void>;
}

/** The host place's round: the local weights, a gradient buffer (both reused), and the optimizer copy. */
interface HostRound {
  weights: Float32Array;
  gradient: Float32Array;
  optimizer: FlatOptimizer;
}

export class DeviceRound {
  /** The round's drift while a round with one is open: the flat array (host), or a tensor a variable (device). */
  private drift: Float32Array | null = null;
  private driftTensors: tf.Tensor[] | null = null;
  private open = false;
  /** The open round's host buffers; null on the device. */
  private host: HostRound | null = null;
  private hostBuffers: Pick<HostRound, 'weights' | 'gradient'> | null = null;

  constructor(private readonly model: RoundModel) {}

  leg(leg: RoundLeg): Promise<RoundLegDone> {
    return this.model.weights.exclusive(async () => {
      try {
        return await this.train(leg);
      } catch (err) {
        await this.close();
        throw err;
      }
    });
  }

  private async train(leg: RoundLeg): Promise<RoundLegDone> {
    const { weights } = this.model;
    const startedAt = threadsNow();
    const t0 = performance.now();
    if (leg.steps > leg.counts.length || leg.steps > leg.rates.length) throw new WebringError('ERR_BAD_DATA', `a leg of ${leg.steps} steps has room for ${Math.min(leg.counts.length, leg.rates.length)}`);
    if (leg.first) await this.begin(leg.drift);
    else if (!this.open || !weights.roundOpen) throw new WebringError('ERR_BAD_STATE', 'a round leg came without its first (the round was closed by a state written in between)');
    let loss = 0;
    let correct = 0;
    if (this.host) {
      for (let s = 0; s < leg.steps; s++) {
        const n = this.examplesOf(leg, s);
        if (n === 0) continue;
        const [l, c] = await this.hostStep(this.host, leg, s, n);
        loss += l;
        correct += c;
      }
    } else {
      // A running [loss, correct] on the device, one add a step: tf.addN over a round's steps
      // needs a storage buffer an input, past WebGPU's 8 a shader stage at H = 10.
      let sums: tf.Tensor | null = null;
      try {
        for (let s = 0; s < leg.steps; s++) {
          const n = this.examplesOf(leg, s);
          if (n === 0) continue;
          const step = this.deviceStep(leg, s, n);
          const before: tf.Tensor | null = sums;
          sums = before ? tf.add(before, step) : step;
          if (before) tf.dispose([before, step]);
        }
        if (sums) [loss, correct] = (await sums.data()) as unknown as [number, number];
      } finally {
        if (sums) sums.dispose();
      }
    }
    const tRead = performance.now();
    if (leg.last) {
      if (leg.weights.length !== weights.count) throw new WebringError('ERR_BAD_DATA', `a leg's weights hold ${leg.weights.length} floats, the model has ${weights.count}`);
      if (this.host) leg.weights.set(this.host.weights);
      else (await Promise.all(weights.variables.map((v) => v.data() as Promise<Float32Array>))).forEach((vals, i) => leg.weights.set(vals, weights.offsets[i]));
      await this.close();
    }
    const { features, labels, counts, rates, drift } = leg;
    return { features, labels, counts, rates, drift, weights: leg.weights, loss, correct, computeMs: tRead - t0, readbackMs: performance.now() - tRead, startedAt, endedAt: threadsNow(), numTensors: tf.memory().numTensors };
  }

  /** Step `s`'s examples, checked against the leg's room; the busy fault held for a step that trains. */
  private examplesOf(leg: RoundLeg, s: number): number {
    const n = leg.counts[s]!;
    if (n > leg.stride || n < 0) throw new WebringError('ERR_BAD_DATA', `step ${s} of a leg has ${n} examples, room for ${leg.stride}`);
    if (n > 0 && this.model.busyComputeMs) holdThread(this.model.busyComputeMs);
    return n;
  }

  private examples(leg: RoundLeg, s: number, n: number): Examples {
    const row = s * leg.stride;
    const f = this.model.rowFloats;
    return { features: leg.features.subarray(row * f, (row + n) * f), labels: leg.labels.subarray(row, row + n), n };
  }

  /** One local step on the device: its examples' mean gradient through tfjs's optimizer, then the drift; returns [loss, correct] (the caller disposes it). */
  private deviceStep(leg: RoundLeg, s: number, n: number): tf.Tensor {
    const { model } = this;
    // What backprop returns may be kept outside any scope (a model's correct count is): disposed here.
    const { value, grads, correct } = model.backprop(this.examples(leg, s, n));
    try {
      return tf.tidy(() => {
        const count = tf.scalar(n);
        const mean: tf.NamedTensorMap = {};
        for (const name of Object.keys(grads)) mean[name] = tf.div(grads[name]!, count);
        setLearningRate(model.optimizer, leg.rates[s]!);
        model.optimizer.applyGradients(mean);
        const drift = this.driftTensors;
        if (drift) model.weights.variables.forEach((v, i) => v.assign(tf.add(v, drift[i]!)));
        return tf.stack([value, correct ?? tf.scalar(0)]);
      });
    } finally {
      value.dispose();
      correct?.dispose();
      tf.dispose(grads);
    }
  }

  /** One local step on the host: the gradients read, their mean (as every-step training takes it) through the fused update on the local copy, the drift, and the copy up to the variables. */
  private async hostStep(host: HostRound, leg: RoundLeg, s: number, n: number): Promise<[number, number]> {
    const { model } = this;
    const { value, grads, correct } = model.backprop(this.examples(leg, s, n));
    let sums: [number, number];
    try {
      const [l, c] = await Promise.all([value.data(), correct?.data()]);
      sums = [l[0]!, c?.[0] ?? 0];
      await model.weights.readGradients(grads, host.gradient);
    } finally {
      value.dispose();
      correct?.dispose();
      tf.dispose(grads);
    }
    const { gradient, weights } = host;
    const inv = 1 / n;
    for (let i = 0; i < gradient.length; i++) gradient[i] = gradient[i]! * inv;
    host.optimizer.apply(weights, gradient, leg.rates[s]!);
    const drift = this.drift;
    if (drift) for (let i = 0; i < drift.length; i++) weights[i] = weights[i]! + drift[i]!;
    model.weights.assignFrom(weights);
    return sums;
  }

  private async begin(drift: Float32Array | null): Promise<void> {
    const { model } = this;
    const { weights } = model;
    if (this.open) await this.close();
    if (drift && drift.length !== weights.count) throw new WebringError('ERR_BAD_DATA', `a drift of ${drift.length} floats, the model has ${weights.count} weights`);
    const start = await weights.openRound();
    this.open = true;
    const place = model.place ?? roundPlaceFor(tf.getBackend());
    if (place === 'host' && model.hostOptimizer) {
      const buffers = (this.hostBuffers ??= { weights: new Float32Array(weights.count), gradient: new Float32Array(weights.count) });
      buffers.weights.set(start);
      this.host = { ...buffers, optimizer: model.hostOptimizer() };
      this.drift = drift;
      return;
    }
    await model.beginRound();
    if (drift) this.driftTensors = weights.variables.map((v, i) => tf.tensor(drift.slice(weights.offsets[i]!, weights.offsets[i]! + v.size), v.shape, 'float32'));
  }

  private async close(): Promise<void> {
    if (this.driftTensors) tf.dispose(this.driftTensors);
    this.driftTensors = null;
    this.drift = null;
    const onHost = this.host !== null;
    this.host = null;
    if (!this.open) return;
    this.open = false;
    const { weights } = this.model;
    const held = weights.roundOpen;
    weights.closeRound();
    if (!onHost) await this.model.endRound(held);
  }
}

/** Busy-waits `ms`: a compute that holds its thread, as slow maths does (the busyComputeMs fault). */
export function holdThread(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}
