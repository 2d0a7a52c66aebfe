/**
 * A step's buffers: this rank's examples, and the gradient buffer with the tail laid over
 * it after the gradients (step-ledger.ts). Allocated once per trainer and reused by every
 * step; they cross to the replica (compute/replica.ts) and come back by transfer, so when
 * the replica lives in a compute thread each step gets the same memory back in new views,
 * and the tail is laid over them again.
 *
 * There are two gradient buffers, used in turn, so that the update never costs the step a
 * round trip to the compute thread: the mean goes to the replica in one buffer without
 * waiting for its answer, and the next step computes into the other. The thread takes its
 * messages in order, so the next step's gradients, the hash and the hand-over always see
 * the update; its answer (the buffer back, or an error) has arrived before the next
 * step's, and is checked then (settle).
 */
import type { Replica } from '../compute/replica';
import type { Ledger } from './ledger';
import type { StepFacts, StepTiming } from './step-ledger';
import { threadsNow } from '../util/clock';

/**
 * A replica's own gradient values must stay below this magnitude to travel: then no
 * honest float32 partial sum can overflow (a received finite value plus one below 2^100
 * rounds back below 2^128), so a non-finite value on the wire can only come from a broken or
 * hostile sender. Anything larger is a diverged model.
 */
export const MAX_LOCAL_GRADIENT = 2 ** 100;

export class StepBuffers {
  /** The current gradient buffer: the gradients in [0, parameterCount), then the tail. */
  flat: Float32Array;
  features: Float32Array;
  labels: Int32Array;
  /** Tensors alive in the replica's engine after the last computation. */
  numTensors = 0;
  private worldSize: number;
  /** The other gradient buffer, while it is here; null while an update holds it in the replica. */
  private spare: Float32Array | null;
  /** The update on its way through the replica, or null. */
  private applying: Promise<void> | null = null;
  /** What the last update answered: when the replica ended it, and how long it took there; or the error it failed with. */
  private lastApply: { endedAt: number; ms: number } = { endedAt: 0, ms: 0 };
  private applyError: unknown = null;

  constructor(
    private readonly parameterCount: number,
    private readonly tail: Ledger<StepFacts>,
    /** Floats of the largest shard's features (examples × F). */
    maxShardFeatures: number,
    maxShardExamples: number,
    worldSize: number,
  ) {
    this.worldSize = worldSize;
    this.flat = new Float32Array(parameterCount + tail.length);
    this.spare = new Float32Array(parameterCount + tail.length);
    tail.attach(this.flat, parameterCount, worldSize);
    this.features = new Float32Array(maxShardFeatures);
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
    const sentAt = threadsNow();
    const result = await replica.computeGradients({ features: this.features, labels: this.labels, n }, this.flat);
    const receivedAt = threadsNow();
    // The last update answered before this (the thread answers in order): surface its error now.
    await this.settle();
    this.take(result.flat);
    ({ features: this.features, labels: this.labels, numTensors: this.numTensors } = result);
    ({ loss: facts.loss, correct: facts.correct } = result);
    ({ computeMs: timing.computeMs, readbackMs: timing.readbackMs } = result);
    // The crossing: from sending to the replica's start (not counting the wait behind the
    // last update, which is the update's time), and from its end to the answer here.
    const queuedUntil = Math.max(sentAt, this.lastApply.endedAt);
    timing.crossMs = Math.max(0, result.startedAt - queuedUntil) + Math.max(0, receivedAt - result.endedAt);
  }

  /** The last answered update's time in the replica (this step's is known when it answers, by the next step). */
  get lastApplyMs(): number {
    return this.lastApply.ms;
  }

  /**
   * Hands the mean gradients to the replica's optimizer and goes on without waiting: the
   * next step computes into the other buffer.
   */
  async apply(replica: Replica, learningRate: number): Promise<void> {
    const sending = this.flat;
    // The other buffer came back with the last update's answer, before this step's
    // gradients; a step that computed nothing here waits for that answer.
    if (!this.spare) await this.settle();
    const next = this.spare!;
    this.spare = null;
    this.applying = replica.applyGradients(sending, learningRate).then(
      (applied) => {
        this.spare = applied.flat;
        this.lastApply = { endedAt: applied.endedAt, ms: applied.appliedAt - applied.startedAt };
      },
      (err: unknown) => {
        this.applyError = err;
      },
    );
    this.take(next);
  }

  /** Waits for the update on its way, and throws its error if it failed; every use of the replica outside a step settles first. */
  async settle(): Promise<void> {
    if (this.applying) await this.applying;
    this.applying = null;
    if (this.applyError !== null) {
      const err = this.applyError;
      this.applyError = null;
      throw err;
    }
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

  /** A gradient buffer, here again: when it is new memory (a thread's transfer, or the other buffer), the tail is laid over it. */
  private take(flat: Float32Array): void {
    if (flat === this.flat) return;
    this.flat = flat;
    this.tail.attach(flat, this.parameterCount, this.worldSize);
  }
}
