/**
 * The replica: the model, its optimizer and the maths of a step, behind one interface that
 * runs either in this thread (LocalReplica, local-replica.ts) or in a compute thread of its
 * own (a Web Worker in a tab, worker_threads in Node: thread-compute.ts). The trainer is
 * the step's coordinator and owns the network side (the tail, the votes, the collective);
 * everything it asks of the maths goes through this interface, so the network never waits
 * for a kernel.
 *
 * Buffers cross by transfer, not by copy: a method that takes a buffer hands it over, and
 * its reply hands it (or the same memory) back. The caller must use the returned views
 * afterwards; in a thread, the ones it passed are detached. Every buffer passed must own
 * its whole ArrayBuffer (no subarray views), so that transferring it moves nothing else.
 */
import type { CheckpointOptimizer, StartConfig } from '../protocol';
import type { ProgramModel } from './program-model';
import type { WeightSpec } from './weight-bytes';

export type { WeightSpec } from './weight-bytes';

/** The replica's whole trained state in the checkpoint's formats: the bytes a tfjs model and its optimizer save. */
export interface ReplicaSnapshot {
  /** model.json's model topology (tfjs's), so `tf.loadLayersModel` loads a checkpoint. */
  modelTopology: object | ArrayBuffer;
  format?: string;
  generatedBy?: string;
  convertedBy?: string | null;
  /** The weights' specs in variable order, and their bytes. */
  weightSpecs: WeightSpec[];
  weights: Uint8Array;
  optimizer: CheckpointOptimizer;
  optimizerSpecs: WeightSpec[];
  optimizerData: Uint8Array;
}

/** A batch of examples in the trainer's reused buffers: `n` examples of F floats each (the task's example shape, row-major) and their targets, indices into the outputs. */
export interface Examples {
  features: Float32Array;
  labels: Int32Array;
  n: number;
}

/** What a call that trains reports besides its buffers: the summed loss and correct count, and where the time went. */
export interface TrainingReport {
  /** Sum of the examples' losses, and how many the model got right. */
  loss: number;
  correct: number;
  /** The maths on the device, then reading its result back (the gradients; a round's local weights). */
  computeMs: number;
  readbackMs: number;
  /** When the replica began and ended the call, disposal included (threadsNow): outside it, the time went on the crossing. */
  startedAt: number;
  endedAt: number;
  /** Tensors alive in the replica's tfjs engine after the call. */
  numTensors: number;
}

/** What a gradient computation returns: the buffers back, and its report. */
export interface Gradients extends TrainingReport {
  /** The buffer that was passed, holding the gradient sums in [0, parameterCount). */
  flat: Float32Array;
  features: Float32Array;
  labels: Int32Array;
}

/** What applying the gradients returns: the buffer back, the new weights' hash, and when the replica began and ended it (threadsNow). */
export interface Applied {
  flat: Float32Array;
  /** Every step reports it: answered with the update, it costs no message of its own. */
  weightsHash: string;
  startedAt: number;
  /** When the optimizer's update was done; the hash follows until `endedAt`. */
  appliedAt: number;
  endedAt: number;
}

/**
 * Where a local-steps round's updates run (device-round.ts): as the backend's kernels on
 * the device, or as the fused pass on a copy of the weights in the replica's thread.
 */
export type RoundPlace = 'device' | 'host';

/**
 * A leg of a local-steps round (shared/training/local-rounds.ts): up to `capacity` local
 * steps' examples, which the replica trains one after another with no crossing between
 * them, so that in a compute thread a round costs one message there and one back per leg
 * (a default round is one leg). Step s's examples are rows [s·stride, s·stride + counts[s])
 * of `features` (F floats each) and `labels`.
 */
export interface RoundLeg {
  features: Float32Array;
  labels: Int32Array;
  /** Each step's examples (0: this rank sat the step out), and its inner learning rate. */
  counts: Int32Array;
  rates: Float32Array;
  /** The steps of this leg, at most counts.length. */
  steps: number;
  /** Examples a step's rows may hold. */
  stride: number;
  /** The round's first leg: the replica notes the state it starts from. */
  first: boolean;
  /** With the first leg: added to the weights after every trained step of the round (drift-correction.ts); null for none. */
  drift: Float32Array | null;
  /** The round's last leg: the local weights go into `weights`, and the replica is back at the state the round started from. */
  last: boolean;
  weights: Float32Array;
}

/** What a leg returns: its buffers back, and its steps' report (compute: their forward, backward and updates). */
export type RoundLegDone = Pick<RoundLeg, 'features' | 'labels' | 'counts' | 'rates' | 'weights' | 'drift'> & TrainingReport;

/** What scoring a batch returns: the buffers back, the examples predicted right, and their summed loss. */
export interface Scored {
  correct: number;
  loss: number;
  features: Float32Array;
  labels: Int32Array;
}

export interface Replica {
  /** Floats of the model's weights, in variable order. */
  readonly parameterCount: number;
  /** Each trainable variable's shape, in the flat layout's order (PowerSGD factors the matrices: shared/collectives/power-sgd.ts). */
  readonly weightShapes: ReadonlyArray<readonly number[]>;
  /** Floats of the replica's whole state: weights, optimizer slots and the optimizer's iteration count. */
  readonly stateLength: number;
  /**
   * Forward and backward on the first `n` examples: the SUM of their gradients goes into
   * `flat[0, parameterCount)` (the loss is summed, so shares of different sizes average exactly).
   */
  computeGradients(examples: Examples, flat: Float32Array): Promise<Gradients>;
  /** Applies `flat[0, parameterCount)` (the mean gradient) through the optimizer at `learningRate`; the buffer comes back. */
  applyGradients(flat: Float32Array, learningRate: number): Promise<Applied>;
  /**
   * Trains a leg of a local-steps round: each step's mean gradient through the optimizer at
   * its rate, then the drift. Until the last leg ends, the weights' hash, a state read and a
   * checkpoint see the state the round started from; the last leg returns the local weights
   * and leaves the replica there. A failed leg leaves it there too.
   */
  trainRound(leg: RoundLeg): Promise<RoundLegDone>;
  /** How many of the first `n` examples the model predicts right, and their summed loss (nats): the evaluation. */
  score(examples: Examples): Promise<Scored>;
  /**
   * Output probabilities for the `n` examples in `features` (n × F floats), from the live
   * weights: n × outputs floats. The try panels ask it (the digit pad's guess, a name's next letter).
   */
  predict(features: Float32Array, n: number): Promise<Float32Array>;
  /** One blank forward, backward and update, so the first real step runs on warm kernels (what it changes, the hand-over replaces). */
  rehearse(n: number): Promise<void>;
  /** The weights' fingerprint (shared/util/weights-hash.ts); cached until the weights change. */
  weightsHash(): Promise<string>;
  /** All weights concatenated in variable order. */
  readWeights(): Promise<Float32Array>;
  /** The whole state (weights, optimizer slots, iterations) in `stateLength` floats, for a hand-over. */
  readState(): Promise<Float32Array>;
  /** Replaces the whole state with one `readState` gave on another replica. */
  writeState(state: Float32Array): Promise<void>;
  /** The state as a checkpoint keeps it. */
  snapshot(): Promise<ReplicaSnapshot>;
  /** Loads a checkpoint's weights and optimizer state; weights are matched by position, shapes checked. */
  load(snapshot: Pick<ReplicaSnapshot, 'weightSpecs' | 'weights' | 'optimizerSpecs' | 'optimizerData'>): Promise<void>;
  /** Nudges one weight, as numeric drift between backends would (an injected fault). */
  nudge(): Promise<void>;
  dispose(): Promise<void>;
}

/** What a replica is built from: a task's model (the run's config names it, its seed and optimizer), or a program's own model; and a test's fault. */
export type ReplicaSpec = TaskReplicaSpec | ProgramReplicaSpec;

export interface TaskReplicaSpec {
  config: Pick<StartConfig, 'task' | 'model' | 'seed' | 'classes' | 'optimizer' | 'learningRate'>;
  program?: undefined;
  /**
   * A fault a test plays: every gradient computation holds the compute thread this long, as
   * a device whose maths is slow does (in a thread, the network side still answers).
   */
  busyComputeMs?: number;
  /** Where a local-steps round's updates run; unset: by the backend (device-round.ts). A test or a bench sets it to compare the two. */
  roundPlace?: RoundPlace;
}

/** A program's own compiled model, described for the maths thread (program-model.ts, model-replica.ts). */
export interface ProgramReplicaSpec {
  program: ProgramModel;
  busyComputeMs?: number;
}
