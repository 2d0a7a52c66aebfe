/**
 * The optimizer's update as one pass over the flat parameter vector, in the thread that
 * holds it, instead of tfjs's kernels per variable.
 *
 * Why on the CPU: after the all-reduce the mean gradient is already a Float32Array here.
 * tfjs's Adam uploaded it again, variable by variable, and ran about ten kernels on each
 * (8–15 ms a step on an H200, bench/gpu-h200.md, where forward and backward took 5 ms); this
 * loop reads each float once and the new weights go up in one upload a variable. It also
 * makes the update's bits the same on every backend: each operation is rounded to float32
 * (Math.fround) in the order tfjs's CPU backend rounds it, so the result is bit for bit
 * tfjs's CPU Adam and SGD (test/unit/flat-optimizer.test.ts), whatever the device computed
 * the gradient on. WGSL and GLSL do not promise correctly rounded division and sqrt, so an
 * update on the GPU could not promise that.
 *
 * The state (Adam's moments, β1^t, β2^t and the iteration count) lives in plain arrays and
 * reads out in the replica's state layout (optimizer-state.ts) without a device read; the
 * tfjs optimizer keeps only the checkpoint format (toOptimizer/fromOptimizer).
 */
import * as tf from '@tensorflow/tfjs';
import type { OptimizerKind } from '../protocol';
import { optimizerStateVariables, setOptimizerIterations } from './optimizer-state';

/** tfjs's Adam defaults (tf.train.adam), and the float32 epsilon of its CPU and WebGPU backends. */
export const ADAM_BETA1 = 0.9;
export const ADAM_BETA2 = 0.999;
export const ADAM_EPSILON = 1e-7;

const f = Math.fround;

export interface FlatOptimizer {
  readonly kind: OptimizerKind;
  /** Floats of state beside the weights, in the replica's state layout. */
  readonly stateLength: number;
  iterations: number;
  /** weights ← update(weights, gradient) at `learningRate`, in place. */
  apply(weights: Float32Array, gradient: Float32Array, learningRate: number): void;
  /** Writes the state (without the iteration count) at `out[at…]`. */
  readState(out: Float32Array, at: number): void;
  writeState(state: Float32Array, at: number): void;
  /** Copies the state into tfjs's optimizer (its slots), for a checkpoint. */
  toOptimizer(optimizer: tf.Optimizer): void;
  /** Takes the state from tfjs's optimizer, after a checkpoint loaded into it. */
  fromOptimizer(optimizer: tf.Optimizer): Promise<void>;
}

class FlatSgd implements FlatOptimizer {
  readonly kind = 'sgd' as const;
  readonly stateLength = 0;
  iterations = 0;

  apply(weights: Float32Array, gradient: Float32Array, learningRate: number): void {
    // tfjs: value + c·g, c = float32(−rate).
    const c = f(-learningRate);
    for (let i = 0; i < weights.length; i++) weights[i] = f(f(c * gradient[i]!) + weights[i]!);
    this.iterations++;
  }

  readState(): void {}
  writeState(): void {}

  toOptimizer(optimizer: tf.Optimizer): void {
    setOptimizerIterations(optimizer, this.iterations);
  }

  async fromOptimizer(optimizer: tf.Optimizer): Promise<void> {
    this.iterations = optimizer.iterations;
  }
}

class FlatAdam implements FlatOptimizer {
  readonly kind = 'adam' as const;
  readonly stateLength: number;
  iterations = 0;
  private readonly m: Float32Array;
  private readonly v: Float32Array;
  /** β1^t and β2^t, as float32: tfjs starts them at β and multiplies after each update. */
  private beta1Power = f(ADAM_BETA1);
  private beta2Power = f(ADAM_BETA2);

  constructor(count: number) {
    this.m = new Float32Array(count);
    this.v = new Float32Array(count);
    this.stateLength = 2 + 2 * count;
  }

  apply(weights: Float32Array, gradient: Float32Array, learningRate: number): void {
    const { m, v } = this;
    const b1 = f(ADAM_BETA1);
    const b2 = f(ADAM_BETA2);
    // 1 − β is taken in float64 and then rounded, as tfjs's mul(g, 1 − β) does.
    const oneMinusB1 = f(1 - ADAM_BETA1);
    const oneMinusB2 = f(1 - ADAM_BETA2);
    const correction1 = f(1 - this.beta1Power);
    const correction2 = f(1 - this.beta2Power);
    const eps = f(ADAM_EPSILON);
    const minusRate = f(-learningRate);
    for (let i = 0; i < weights.length; i++) {
      const g = gradient[i]!;
      const mi = f(f(m[i]! * b1) + f(g * oneMinusB1));
      const vi = f(f(v[i]! * b2) + f(f(g * g) * oneMinusB2));
      m[i] = mi;
      v[i] = vi;
      const step = f(f(mi / correction1) / f(f(Math.sqrt(f(vi / correction2))) + eps));
      weights[i] = f(f(step * minusRate) + weights[i]!);
    }
    this.beta1Power = f(this.beta1Power * b1);
    this.beta2Power = f(this.beta2Power * b2);
    this.iterations++;
  }

  readState(out: Float32Array, at: number): void {
    out[at] = this.beta1Power;
    out[at + 1] = this.beta2Power;
    out.set(this.m, at + 2);
    out.set(this.v, at + 2 + this.m.length);
  }

  writeState(state: Float32Array, at: number): void {
    this.beta1Power = state[at]!;
    this.beta2Power = state[at + 1]!;
    this.m.set(state.subarray(at + 2, at + 2 + this.m.length));
    this.v.set(state.subarray(at + 2 + this.m.length, at + 2 + 2 * this.m.length));
  }

  toOptimizer(optimizer: tf.Optimizer): void {
    const state = new Float32Array(this.stateLength);
    this.readState(state, 0);
    // optimizerStateVariables: β1^t, β2^t, the first moments, then the second, in variable order.
    let at = 0;
    tf.tidy(() => {
      for (const variable of optimizerStateVariables('adam', optimizer)) {
        variable.assign(tf.tensor(state.slice(at, at + variable.size), variable.shape, 'float32'));
        at += variable.size;
      }
    });
    setOptimizerIterations(optimizer, this.iterations);
  }

  async fromOptimizer(optimizer: tf.Optimizer): Promise<void> {
    const values = await Promise.all(optimizerStateVariables('adam', optimizer).map((variable) => variable.data() as Promise<Float32Array>));
    const state = new Float32Array(this.stateLength);
    let at = 0;
    for (const vals of values) {
      state.set(vals, at);
      at += vals.length;
    }
    this.writeState(state, 0);
    this.iterations = optimizer.iterations;
  }
}

/** The fused optimizer of `kind` for a model of `count` weights. */
export function flatOptimizer(kind: OptimizerKind, count: number): FlatOptimizer {
  return kind === 'adam' ? new FlatAdam(count) : new FlatSgd();
}
