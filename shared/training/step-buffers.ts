/**
 * A step's buffers: this rank's examples, and the gradient buffer with the tail laid over
 * it after the gradients (step-ledger.ts). Allocated once per trainer and reused by every
 * step; they cross to the replica (compute/replica.ts) and come back by transfer, so when
 * the replica lives in a compute thread each step gets the same memory back in new views,
 * and the tail is laid over them again.
 */
import { MNIST_PIXELS } from '../data/mnist-format';
import type { Replica } from '../compute/replica';
import type { Ledger } from './ledger';
import type { StepFacts, StepTiming } from './step-ledger';

/**
 * A replica's own gradient values must stay below this magnitude to travel: then no
 * honest float32 partial sum can overflow (a received finite value plus one below 2^100
 * rounds back below 2^128), so a non-finite value on the wire can only come from a broken or
 * hostile sender. Anything larger is a diverged model.
 */
export const MAX_LOCAL_GRADIENT = 2 ** 100;

export class StepBuffers {
  /** The gradients in [0, parameterCount), then the tail. */
  flat: Float32Array;
  images: Float32Array;
  labels: Int32Array;
  /** Tensors alive in the replica's engine after the last computation. */
  numTensors = 0;
  private worldSize: number;

  constructor(
    private readonly parameterCount: number,
    private readonly tail: Ledger<StepFacts>,
    maxShardExamples: number,
    worldSize: number,
  ) {
    this.worldSize = worldSize;
    this.flat = new Float32Array(parameterCount + tail.length);
    tail.attach(this.flat, parameterCount, worldSize);
    this.images = new Float32Array(maxShardExamples * MNIST_PIXELS);
    this.labels = new Int32Array(maxShardExamples);
  }

  /** A new generation of `worldSize` ranks. */
  bind(worldSize: number): void {
    this.worldSize = worldSize;
    this.tail.bind(worldSize);
  }

  /**
   * Forward and backward on the first `n` examples in the replica: the SUM of their
   * gradients into the buffer (shards of different sizes then average exactly, with no
   * extra pass), the summed loss and correct count into `facts`, the times into `timing`.
   */
  async compute(replica: Replica, n: number, facts: StepFacts, timing: StepTiming): Promise<void> {
    const t0 = performance.now();
    const result = await replica.computeGradients({ images: this.images, labels: this.labels, n }, this.flat);
    const wallMs = performance.now() - t0;
    this.take(result.flat);
    this.images = result.images;
    this.labels = result.labels;
    this.numTensors = result.numTensors;
    facts.loss = result.loss;
    facts.correct = result.correct;
    timing.computeMs = result.computeMs;
    timing.readbackMs = result.readbackMs;
    // What the thread's messages and their transfers cost beyond the replica's own time.
    timing.crossMs = Math.max(0, wallMs - result.replicaMs);
  }

  /** Applies the mean gradients through the replica's optimizer; the crossing adds to `timing.crossMs`. */
  async apply(replica: Replica, learningRate: number, timing: StepTiming): Promise<void> {
    const t0 = performance.now();
    const applied = await replica.applyGradients(this.flat, learningRate);
    const wallMs = performance.now() - t0;
    this.take(applied.flat);
    timing.crossMs += Math.max(0, wallMs - applied.replicaMs);
  }

  /** Zeroes the gradients: a rank that trained nothing, or diverged, contributes nothing. */
  clearGradients(): void {
    this.flat.fill(0, 0, this.parameterCount);
  }

  /** True when every gradient value is finite and below MAX_LOCAL_GRADIENT in magnitude. */
  gradientsTravel(): boolean {
    const flat = this.flat;
    for (let i = 0; i < this.parameterCount; i++) {
      const v = flat[i]!;
      // NaN fails both comparisons.
      if (!(v < MAX_LOCAL_GRADIENT && v > -MAX_LOCAL_GRADIENT)) return false;
    }
    return true;
  }

  /** Divides the summed gradients by the examples trained (0: none, all zeros); returns the mean's squared norm. */
  mean(examples: number): number {
    const flat = this.flat;
    const inv = examples > 0 ? 1 / examples : 0;
    let sq = 0;
    for (let i = 0; i < this.parameterCount; i++) {
      const g = flat[i]! * inv;
      flat[i] = g;
      sq += g * g;
    }
    return sq;
  }

  /** The buffer, back from the replica: when it is new memory (a thread's transfer), the tail is laid over it again. */
  private take(flat: Float32Array): void {
    if (flat === this.flat) return;
    this.flat = flat;
    this.tail.attach(flat, this.parameterCount, this.worldSize);
  }
}
