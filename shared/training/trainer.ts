/**
 * The DOM-free training core: one synchronous data-parallel step, as MultiWorkerMirroredStrategy
 * does it. Each replica computes gradients on its slice of the global batch, flattens them
 * into one reused buffer in a fixed variable order, all-reduces, divides by N, and applies
 * the result with its own optimizer. Identical inputs in, identical weights out.
 *
 * The collective is injected: a RingAllReduce over data channels in a tab or a Node worker,
 * an in-memory ring in the unit tests. So are where the examples come from (a DataSource),
 * the clock that times the step, and the faults a test plays.
 */
import * as tf from '@tensorflow/tfjs';
import { COLLECTIVE_TAG, type Collective, type CollectiveOptions } from '../collectives/collective';
import { advance, stepsRemaining, withoutRanksFrom, type DataCursor, type GlobalBatch } from './sharding';
import { MNIST_PIXELS } from '../data/mnist-format';
import type { DataSource, EpochRoster } from './data-source';
import type { FaultInjector } from './faults';
import { sleep, systemClock, type Clock } from '../util/clock';
import { buildModel, buildOptimizer, setLearningRate } from './models';
import { LearningRateSchedule } from './lr-schedule';
import { ShareBalancer } from './share-balancer';
import { yieldToEventLoop } from '../util/yield';
import { WeightsHasher } from '../util/weights-hash';
import { MAX_ROOM_MEMBERS, type Algorithm, type StartConfig } from '../protocol';
import { chooseAlgorithm, createProbeBuffers, explainChoice, measureLinkModels, type LinkModel, type LinkModels, type LinkReadiness, type ProbeBuffers } from '../collectives/choice';
import { WebringError } from '../protocol/errors';
import { HASH_VOTE_FLOATS, VOTE_FLOATS, counterVote, hashesDiffer, unanimous, writeHashVotes, writeVote } from './agreement';
import { FINGERPRINT_FLOATS, fingerprintCursor, handOverChain, ranksBehind, writeFingerprint } from './hand-over';
import { chainPosition } from '../collectives/chain-broadcast-schedule';
import {
  createOptimizerSlots,
  loadOptimizerWeights,
  optimizerIterations,
  optimizerStateLength,
  optimizerStateVariables,
  setOptimizerIterations,
} from '../checkpoints/optimizer-state';

/**
 * Appended to the gradients so that one all-reduce also agrees on the metrics, on stopping,
 * on admitting the next generation, on whether the replicas still hold the same weights,
 * tells every replica how long each rank took to compute (straggler detection), and
 * averages the link measurements from which every replica picks the same algorithm for
 * the next step.
 */
const TAIL_LOSS = 0;
const TAIL_CORRECT = 1;
const TAIL_STOP = 2;
const TAIL_PAUSE = 3;
const TAIL_ADMIT = 4;
const TAIL_HASH = TAIL_ADMIT + VOTE_FLOATS;
const TAIL_COMPUTE_MS = TAIL_HASH + HASH_VOTE_FLOATS;
/** Each rank's overhead before the step (ms from the end of its previous all-reduce), for the share balancer; 0: not measured. */
const TAIL_OVERHEAD_MS = TAIL_COMPUTE_MS + MAX_ROOM_MEMBERS;
/** α and β of the ring, of halving-doubling, then of the hub: each rank's measurement, summed. */
const TAIL_MODELS = TAIL_OVERHEAD_MS + MAX_ROOM_MEMBERS;
const MODEL_FLOATS = 6;
/** Votes: this replica's halving-doubling partner links are open; its link to the hub is open. */
const TAIL_MESH_READY = TAIL_MODELS + MODEL_FLOATS;
const TAIL_HUB_READY = TAIL_MESH_READY + 1;
/** How many replicas' own gradient or loss was not finite (or absurdly large); they sent zeros instead. */
const TAIL_NON_FINITE = TAIL_HUB_READY + 1;
/**
 * Examples trained in the step, summed: the divisor of the mean. It is what the gradients'
 * sum holds, even where a device skipped a deleted example of its own data (own-data.ts).
 */
const TAIL_EXAMPLES = TAIL_NON_FINITE + 1;
/** Then, for a source that needs them (DataAgreement), each rank's numbers: MAX_ROOM_MEMBERS slots. */
const TAIL_LENGTH = TAIL_EXAMPLES + 1;

/**
 * A replica's own gradient values must stay below this magnitude to travel: then no
 * honest float32 partial sum can overflow (a received finite value plus one below 2^100
 * rounds back below 2^128), so a non-finite value on the wire can only come from a broken or
 * hostile sender. Anything larger is a diverged model.
 */
export const MAX_LOCAL_GRADIENT = 2 ** 100;

/** Replicas compare weight hashes at least this often (every step whose number is a multiple). */
export const HASH_CHECK_EVERY_STEPS = 10;

/** Layout of the state a live replica hands over: position first, then weights, then optimizer. */
const STATE_STEP = 0;
const STATE_EPOCH = 1;
const STATE_OFFSET = 2;
const STATE_PENDING_EVAL = 3;
const STATE_STOPPED = 4;
const STATE_ITERATIONS = 5;
/** The learning-rate ramp (lr-schedule.ts): its float32 ends and its first step, -1 for none yet. */
const STATE_RAMP_FROM = 6;
const STATE_RAMP_TO = 7;
const STATE_RAMP_START = 8;
/**
 * The sender's link measurements (α, β of the ring, halving-doubling and the hub; -1 for
 * one not measured): a joiner appended to measured links takes them instead of the whole
 * class probing again (setCollective's keepLinkModels).
 */
const STATE_MODELS = 9;
const STATE_MODEL_FLOATS = 6;
const STATE_HEADER = STATE_MODELS + STATE_MODEL_FLOATS;

/**
 * Test examples scored per forward pass. Between passes the evaluation yields to the event
 * loop, so a slow device scoring 10,000 digits still answers the server's heartbeats: 100
 * CNN examples take about 0.25 s on one CPU core.
 */
const EVAL_BATCH = 100;

export interface TrainerOptions {
  /** Measures compute and communication times, and paces injected slowness. */
  clock?: Clock;
  /** Faults a test plays on purpose (slowness, drift); production passes none. */
  faults?: FaultInjector;
}

export interface StepOptions {
  /** This replica asks the ring to stop after this step. */
  requestStop?: boolean;
  /** This replica asks the ring to pause after this step (the teacher's Pause). */
  requestPause?: boolean;
  /**
   * The pending generation this replica is ready to switch to (links open), or null. A
   * function is asked only when the tail is written, after the forward and backward pass:
   * links that opened during the compute already count, which saves the class a step of
   * waiting for a joiner.
   */
  readyFor?: number | null | (() => number | null);
  /** Every link halving-doubling needs is open on this replica (RingNetwork.meshReady). */
  meshReady?: boolean;
  /** This replica's link to the room's hub is open (RingNetwork.hubReady); false without a hub. */
  hubReady?: boolean;
}

/** Where one step's time went on this replica, in ms. */
export interface StepTiming {
  /** Waiting for this step's examples to arrive from the data service (0 when the prefetch kept up). */
  dataMs: number;
  /** Forward and backward until the device finished them (the loss read back). */
  computeMs: number;
  /** Reading the gradients back from the device into the all-reduce buffer. */
  readbackMs: number;
  /** The gradient all-reduce, including waiting for the slowest rank. */
  commMs: number;
  /** Averaging and handing the update to the optimizer. */
  applyMs: number;
}

export interface StepResult {
  /** The step just completed (0-based); the replica's step counter is now step + 1. */
  step: number;
  epoch: number;
  /** Mean loss over the whole global batch. */
  loss: number;
  /** Accuracy over the whole global batch. */
  trainAccuracy: number;
  /** L2 norm of the averaged gradient: zero would mean a broken backend readback. */
  gradNorm: number;
  /** True when any replica asked to stop; every replica sees the same value. */
  stop: boolean;
  /** True when any replica asked to pause after this step. */
  pause: boolean;
  /** True when this step was the last of its epoch. */
  epochEnd: boolean;
  /** Examples this replica trained on in this step. */
  examples: number;
  globalBatchSize: number;
  /** True when every replica was ready for the same pending generation: switch to it now. */
  admit: boolean;
  /** Whether this step compared the replicas' weights hashes, and whether they differed. */
  hashChecked: boolean;
  hashMismatch: boolean;
  /** Each rank's compute time for this step in ms, indexed by rank (identical on every replica). */
  computeMs: number[];
  /** The algorithm this step's gradients took. */
  algorithm: Algorithm;
  /** Each algorithm's mean link measurements as agreed in this step (null before any). */
  models: LinkModels | null;
  /** One sentence for the teacher: why the next step's algorithm was picked (choice.ts explainChoice). */
  reason: string;
  /** This rank's measured speed against the ring's median; 0 before it is measured. */
  speedVsMedian: number;
  /** The learning rate the step applied. */
  learningRate: number;
  timing: StepTiming;
}

export class Trainer {
  readonly model: tf.LayersModel;
  readonly optimizer: tf.Optimizer;
  /** The rate of every step: warm-up, and linear scaling with the global batch when configured. */
  readonly schedule: LearningRateSchedule;
  /** Each rank's share of the global batch when shares follow speed (balanceShares). */
  private readonly balancer: ShareBalancer;
  /** Every rank's example count of the step just trained, for the balancer (reused). */
  private readonly rankExamples = new Float64Array(MAX_ROOM_MEMBERS);
  readonly config: StartConfig;
  private readonly variables: tf.Variable[];
  private readonly offsets: number[];
  readonly parameterCount: number;

  private collective: Collective;
  private readonly data: DataSource;
  private readonly clock: Clock;
  private readonly faults: FaultInjector | null;
  private cursor: DataCursor = { epoch: 0, offset: 0 };
  private stepCounter = 0;
  /** The epoch whose closing evaluation is still owed (after an epoch's last step), or null. */
  pendingEvaluation: number | null = null;
  /** Set once the ring agreed to stop; part of the shared state, like the step. */
  stopped = false;
  /** Bumped whenever the weights change, so the hash is read back only when needed. */
  private weightsVersion = 0;
  private hashCache: { version: number; hash: string } | null = null;

  // Reused across steps: the per-step path allocates no JS buffers of its own.
  private readonly flat: Float32Array;
  /** Floats after the gradients: TAIL_LENGTH, and the data source's per-rank numbers if it has any. */
  private readonly tailLength: number;
  /** Examples this replica trained in the current step (its share, less any deleted example of its own). */
  private trained = 0;
  private readonly images: Float32Array;
  private readonly labels: Int32Array;
  /** Allocated on the first evaluation, then reused. */
  private evalImages: Float32Array | null = null;
  private evalLabels: Int32Array | null = null;
  private readonly evalBuffer = new Float32Array(2);
  /** Every replica's fingerprint (hand-over.ts), sized for the largest ring so far. */
  private agreeBuffer = new Float32Array(0);
  /** Allocated on the first measurement (a ring of one never measures), then reused. */
  private probes: ProbeBuffers | null = null;
  /** This replica's link measurements in this generation; null until measured. */
  private measured: LinkModels | null = null;
  /** Which algorithms' links were open on every replica in the last step: the agreed vote. */
  private ready: LinkReadiness = { mesh: false, hub: false };
  /**
   * Set when every replica's partner links were open in the last step and the links of
   * this generation are not measured yet (or the hub's link opened since): the worker then
   * calls measureLinks before the next step. Derived from the agreed tail, so it is the
   * same on every replica.
   */
  measureDue = false;
  /** The last sentence explainChoice gave, and the inputs it was for: it is rebuilt only when they change, not every step. */
  private reason = '';
  private readonly reasonInputs = new Float64Array(REASON_INPUTS);
  private readonly reasonScratch = new Float64Array(REASON_INPUTS);
  /** What the next gradient all-reduce uses; every replica derives the same from the tail. */
  private nextAlgorithm: Algorithm = 'ring';
  private readonly timing: StepTiming = { dataMs: 0, computeMs: 0, readbackMs: 0, commMs: 0, applyMs: 0 };
  /**
   * The gradients travel in the configured format (the tail's votes and counts stay exact)
   * with the algorithm picked for the step; one object, updated, not one per step.
   */
  private readonly gradientOptions: CollectiveOptions;
  /** Allocated on the first state hand-over: joins and resyncs are rare. */
  private stateBuffer: Float32Array | null = null;
  /**
   * The first rank that sits the next step out, or null: the ranks a hand-over just brought
   * in at the end of the ring (joiners), and the rank that sends it to them, train no
   * examples in the first step on the new ring, so the class computes while the state
   * still travels instead of waiting for it and then for the joiners' compute. Set from the
   * agreed fingerprints, so the same on every replica.
   */
  private sitOutFrom: number | null = null;
  /**
   * When this replica's last gradient all-reduce ended, while the steps follow each other
   * with nothing else between them; null after anything that is not a step's usual
   * overhead (a new ring, a hand-over, an evaluation, a link measurement).
   */
  private lastReduceEnd: number | null = null;
  private rankTimesViews: { worldSize: number; computeMs: Float32Array; overheadMs: Float32Array } | null = null;

  constructor(config: StartConfig, data: DataSource, collective: Collective, options: TrainerOptions = {}) {
    this.config = config;
    this.data = data;
    this.clock = options.clock ?? systemClock;
    this.faults = options.faults ?? null;
    this.collective = collective;
    this.model = buildModel(config.model, config.seed, config.classes.length);
    this.optimizer = buildOptimizer(config.optimizer, config.learningRate);
    this.schedule = new LearningRateSchedule(config);
    this.balancer = new ShareBalancer(config.balanceShares);
    this.balancer.reset(collective.worldSize);
    this.variables = this.model.trainableWeights.map((w) => (w as unknown as { val: tf.Variable }).val);
    createOptimizerSlots(config.optimizer, this.optimizer, this.variables);
    this.offsets = [];
    let total = 0;
    for (const v of this.variables) {
      this.offsets.push(total);
      total += v.size;
    }
    this.parameterCount = total;
    this.tailLength = TAIL_LENGTH + (data.agreement ? MAX_ROOM_MEMBERS * data.agreement.floatsPerRank : 0);
    this.flat = new Float32Array(total + this.tailLength);
    this.gradientOptions = { wire: config.wire, exactTail: this.tailLength, algorithm: 'ring' };
    const b = this.data.maxShardExamples;
    this.images = new Float32Array(b * MNIST_PIXELS);
    this.labels = new Int32Array(b);
  }

  get step(): number {
    return this.stepCounter;
  }

  get epoch(): number {
    return this.cursor.epoch;
  }

  get dataCursor(): DataCursor {
    return { ...this.cursor };
  }

  get worldSize(): number {
    return this.collective.worldSize;
  }

  get rank(): number {
    return this.collective.rank;
  }

  get globalBatchSize(): number {
    return this.data.globalBatchSize(this.collective.worldSize);
  }

  /** True once the run has nothing left to train: all epochs done, maxSteps reached, or stopped. */
  get finished(): boolean {
    const { epochs, maxSteps } = this.config;
    return this.stopped || this.cursor.epoch >= epochs || (maxSteps !== undefined && this.stepCounter >= maxSteps);
  }

  /** The step the run will end at if the world size stays as it is now. */
  get totalSteps(): number {
    const left = stepsRemaining(this.cursor, this.config.epochs, this.data.trainCount, this.globalBatchSize);
    const end = this.stepCounter + left;
    return this.config.maxSteps === undefined ? end : Math.min(end, this.config.maxSteps);
  }

  /**
   * Trains on over a new generation's collective. With `keepLinkModels` (the generation only
   * appends members to links already measured) the link measurements stay, and the
   * hand-over gives them to the joiners: the class does not stop to probe its links again.
   */
  setCollective(collective: Collective, options: { keepLinkModels?: boolean; probeMsPerExample?: ArrayLike<number> | null } = {}): void {
    this.collective = collective;
    this.lastReduceEnd = null;
    // A new generation starts on the ring until its own measurements are agreed.
    this.nextAlgorithm = 'ring';
    if (!options.keepLinkModels) this.measured = null;
    this.ready = { mesh: false, hub: false };
    this.measureDue = false;
    // Ranks moved: shares start again from the members' probes (or equal), the same on every replica.
    this.balancer.reset(collective.worldSize, options.probeMsPerExample ?? null);
  }

  /** The first shares of this generation from its members' admission probes (share-balancer.ts). */
  seedShares(probeMsPerExample: ArrayLike<number> | null): void {
    this.balancer.reset(this.collective.worldSize, probeMsPerExample);
  }

  /**
   * Measures both algorithms' links (collective-choice.ts) when measureDue says so; every
   * replica calls it before the same step. The next step's tail averages the measurements.
   */
  async measureLinks(): Promise<LinkModels> {
    this.measureDue = false;
    this.lastReduceEnd = null;
    // Probed at the gradient buffer's own size and format: β where the choice is made.
    this.probes ??= createProbeBuffers(this.flat.length);
    this.measured = await measureLinkModels(this.collective, this.stepCounter, this.probes, this.ready, this.config.wire);
    return this.measured;
  }

  /** Why the next step takes `nextAlgorithm`, in one sentence; the same sentence as long as its inputs stay the same. */
  private explain(worldSize: number, wireBytes: number, models: LinkModels | null, ready: LinkReadiness): string {
    const next = this.reasonScratch;
    next[0] = ALGORITHM_CODES[this.nextAlgorithm];
    next[1] = worldSize;
    next[2] = wireBytes;
    next[3] = ready.mesh ? 1 : 0;
    next[4] = ready.hub ? 1 : 0;
    next[5] = models?.ring?.alphaMs ?? -1;
    next[6] = models?.ring?.betaBytesPerMs ?? -1;
    next[7] = models?.halvingDoubling?.alphaMs ?? -1;
    next[8] = models?.halvingDoubling?.betaBytesPerMs ?? -1;
    next[9] = models?.hub?.alphaMs ?? -1;
    next[10] = models?.hub?.betaBytesPerMs ?? -1;
    let changed = this.reason === '';
    for (let i = 0; i < REASON_INPUTS; i++) {
      if (this.reasonInputs[i] !== next[i]) changed = true;
      this.reasonInputs[i] = next[i]!;
    }
    if (changed) this.reason = explainChoice(this.config.allreduce, this.nextAlgorithm, worldSize, wireBytes, models, ready);
    return this.reason;
  }

  /** Replaces the weights, given in variable order (checkpoint restore). */
  setWeights(values: tf.Tensor[]): void {
    if (values.length !== this.variables.length) {
      throw new WebringError('ERR_BAD_DATA', `checkpoint has ${values.length} weights, the ${this.config.model} has ${this.variables.length}`);
    }
    this.variables.forEach((v, i) => {
      const value = values[i]!;
      if (value.shape.join('x') !== v.shape.join('x')) {
        throw new WebringError('ERR_BAD_DATA', `checkpoint weight ${i} has shape ${value.shape}, the model needs ${v.shape}`);
      }
    });
    this.variables.forEach((v, i) => v.assign(values[i]!));
    this.weightsVersion++;
  }

  /** Replaces the optimizer state with saved weights (checkpoint restore). */
  loadOptimizerWeights(weights: Parameters<tf.Optimizer['setWeights']>[0]): Promise<void> {
    return loadOptimizerWeights(this.config.optimizer, this.optimizer, weights, this.variables);
  }

  /**
   * Positions the replica, e.g. at a resumed step; the cursor must come from the same run,
   * and so must the epoch's roster for a run on the class's own data (null: none yet).
   */
  setPosition(step: number, cursor: DataCursor, roster: EpochRoster | null = null): void {
    this.lastReduceEnd = null;
    this.stepCounter = step;
    this.cursor = { ...cursor };
    this.data.agreement?.restore(roster);
  }

  /** The current epoch's roster on the class's own data (keys and counts: own-data.ts); null otherwise. */
  get dataRoster(): EpochRoster | null {
    return this.data.agreement?.roster ?? null;
  }

  /** Floats of the state a replica hands over: position, weights, optimizer state. */
  get stateLength(): number {
    return STATE_HEADER + this.parameterCount + optimizerStateLength(this.config.optimizer, this.parameterCount) + (this.data.agreement?.stateFloats ?? 0);
  }

  /**
   * Makes every replica's whole state (weights, optimizer state, step, data cursor, owed
   * evaluation, learning-rate ramp, link measurements) equal to rank 0's.
   *
   * First a small all-reduce gives every replica every replica's fingerprint
   * (hand-over.ts); survivors of a leave usually agree, and then nothing more is sent.
   * Otherwise the state travels as a pipelined chain broadcast along the ring, from the
   * rank just before the first replica that differs, to the last one: a joiner at the end
   * of the ring takes it from its left neighbour over one link, while the rest of the class
   * only waits, instead of all-reducing the state against zeros over every link.
   *
   * The first collectives of every generation are this hand-over, keyed at step 0: a
   * joiner does not know the step yet; it learns it from the state. Returns how many
   * replicas took the state (0: they already agreed).
   */
  async syncState(keyStep = 0): Promise<number> {
    this.lastReduceEnd = null;
    const n = this.collective.worldSize;
    // The fingerprints, then the data source's per-rank numbers: a new ring agrees on them before its first step.
    const agreement = this.data.agreement;
    const dataFloats = agreement ? n * agreement.floatsPerRank : 0;
    const length = n * FINGERPRINT_FLOATS + dataFloats;
    if (this.agreeBuffer.length < length) this.agreeBuffer = new Float32Array(length);
    const buffer = this.agreeBuffer.subarray(0, length);
    buffer.fill(0);
    const check = buffer.subarray(0, n * FINGERPRINT_FLOATS);
    const dataValues = buffer.subarray(n * FINGERPRINT_FLOATS);
    if (agreement) agreement.writeOwn(dataValues, this.collective.rank * agreement.floatsPerRank);
    writeFingerprint(check, this.collective.rank, {
      step: this.stepCounter,
      epoch: this.cursor.epoch,
      offset: this.cursor.offset,
      pendingEvaluation: this.pendingEvaluation,
      stopped: this.stopped,
      weightsHash: await this.weightsHash(),
    });
    await this.collective.allReduce(buffer, keyStep, COLLECTIVE_TAG.agree);
    if (agreement) agreement.agree(dataValues, n);
    const behind = ranksBehind(check, n);
    const chain = handOverChain(behind);
    this.sitOutFrom = sitOutFrom(behind, n);
    if (!chain) return 0;

    const state = (this.stateBuffer ??= new Float32Array(this.stateLength));
    const optimizerVars = optimizerStateVariables(this.config.optimizer, this.optimizer);
    const { at: position, hops } = chainPosition(this.collective.rank, n, chain);
    const receives = position >= 1 && position <= hops;
    // The agreement round told us where rank 0 is: fetch the first examples while the state travels.
    if (receives && this.data.prefetch) this.data.prefetch(this.nextGlobalBatch(fingerprintCursor(check, 0)), this.collective.rank);
    if (position === 0) await this.writeState(state, optimizerVars);
    await this.collective.broadcast(state, keyStep, COLLECTIVE_TAG.sync, chain);
    if (receives) this.loadState(state, optimizerVars);
    return behind.length;
  }

  /** This replica's whole state into `state` (the hand-over's sender). */
  private async writeState(state: Float32Array, optimizerVars: tf.Variable[]): Promise<void> {
    state[STATE_STEP] = this.stepCounter;
    state[STATE_EPOCH] = this.cursor.epoch;
    state[STATE_OFFSET] = this.cursor.offset;
    state[STATE_PENDING_EVAL] = this.pendingEvaluation === null ? 0 : this.pendingEvaluation + 1;
    state[STATE_STOPPED] = this.stopped ? 1 : 0;
    state[STATE_ITERATIONS] = optimizerIterations(this.optimizer);
    const ramp = this.schedule.state;
    state[STATE_RAMP_FROM] = ramp?.from ?? 0;
    state[STATE_RAMP_TO] = ramp?.to ?? 0;
    state[STATE_RAMP_START] = ramp?.startStep ?? -1;
    writeStateModels(state, STATE_MODELS, this.measured);
    const values = await Promise.all([...this.variables, ...optimizerVars].map((v) => v.data() as Promise<Float32Array>));
    let at = STATE_HEADER;
    for (const vals of values) {
      state.set(vals, at);
      at += vals.length;
    }
    this.data.agreement?.writeState(state, at);
  }

  /** Takes the sender's state (the hand-over's receivers). */
  private loadState(state: Float32Array, optimizerVars: tf.Variable[]): void {
    this.stepCounter = state[STATE_STEP]!;
    this.cursor = { epoch: state[STATE_EPOCH]!, offset: state[STATE_OFFSET]! };
    const pending = state[STATE_PENDING_EVAL]!;
    this.pendingEvaluation = pending === 0 ? null : pending - 1;
    this.stopped = state[STATE_STOPPED]! > 0;
    setOptimizerIterations(this.optimizer, state[STATE_ITERATIONS]!);
    const rampStart = state[STATE_RAMP_START]!;
    this.schedule.restore(rampStart < 0 ? null : { from: state[STATE_RAMP_FROM]!, to: state[STATE_RAMP_TO]!, startStep: rampStart });
    this.measured = readStateModels(state, STATE_MODELS);
    tf.tidy(() => {
      let at = STATE_HEADER;
      for (const v of [...this.variables, ...optimizerVars]) {
        // slice, not subarray: the CPU backend keeps the array it is given as the tensor's
        // storage, and the variable would then change whenever the buffer is reused.
        v.assign(tf.tensor(state.slice(at, at + v.size), v.shape, 'float32'));
        at += v.size;
      }
      this.data.agreement?.readState(state, at);
    });
    this.weightsVersion++;
  }

  /** One synchronous step on the next global batch. */
  async trainStep(options: StepOptions = {}): Promise<StepResult> {
    const step = this.stepCounter;
    if (this.faults?.driftBefore?.(step)) this.nudgeWeights();
    const t0 = this.clock.now();
    const { rank, worldSize } = this.collective;
    const batch = this.nextGlobalBatch(this.cursor);
    this.sitOutFrom = null;
    const n = this.data.shareOf(batch, rank);
    // Compare hashes of the weights this step starts from, every HASH_CHECK_EVERY_STEPS.
    const hashChecked = step % HASH_CHECK_EVERY_STEPS === 0;
    const hash = hashChecked ? await this.weightsHash() : null;

    const flat = this.flat;
    const P = this.parameterCount;
    const timing = this.timing;
    flat.fill(0, P);
    timing.dataMs = 0;
    timing.computeMs = 0;
    timing.readbackMs = 0;
    this.trained = n > 0 ? await this.computeGradients(batch, rank) : 0;
    // More ranks than examples left in the epoch, or none of its own: contribute nothing.
    if (this.trained === 0) flat.fill(0, 0, P);
    const slowMs = (this.faults?.slowComputeMs?.(step) ?? 0) + n * (this.faults?.slowMsPerExample?.(step) ?? 0);
    if (slowMs > 0) await sleep(this.clock, slowMs);
    flat[P + TAIL_STOP] = options.requestStop ? 1 : 0;
    flat[P + TAIL_PAUSE] = options.requestPause ? 1 : 0;
    const readyFor = typeof options.readyFor === 'function' ? options.readyFor() : options.readyFor;
    writeVote(flat, P + TAIL_ADMIT, readyFor == null ? 0 : counterVote(readyFor));
    if (hash) writeHashVotes(flat, P + TAIL_HASH, hash);
    flat[P + TAIL_COMPUTE_MS + rank] = this.clock.now() - t0;
    flat[P + TAIL_OVERHEAD_MS + rank] = this.lastReduceEnd === null ? 0 : Math.max(0, t0 - this.lastReduceEnd);
    writeModels(flat, P + TAIL_MODELS, this.measured);
    flat[P + TAIL_MESH_READY] = options.meshReady ? 1 : 0;
    flat[P + TAIL_HUB_READY] = options.hubReady ? 1 : 0;
    // The sender's own check: a diverged replica sends zeros and says so, rather than NaN.
    const ownNonFinite = !finiteBelow(flat, 0, P, MAX_LOCAL_GRADIENT) || !Number.isFinite(flat[P + TAIL_LOSS]!);
    if (ownNonFinite) {
      flat.fill(0, 0, P);
      flat[P + TAIL_LOSS] = 0;
      flat[P + TAIL_CORRECT] = 0;
    }
    flat[P + TAIL_NON_FINITE] = ownNonFinite ? 1 : 0;
    flat[P + TAIL_EXAMPLES] = ownNonFinite ? 0 : this.trained;
    const agreement = this.data.agreement;
    if (agreement) agreement.writeOwn(flat, P + TAIL_LENGTH + rank * agreement.floatsPerRank);

    const algorithm = this.nextAlgorithm;
    this.gradientOptions.algorithm = algorithm;
    const tComm = this.clock.now();
    await this.collective.allReduce(flat, step, COLLECTIVE_TAG.gradients, this.gradientOptions);
    const tApply = this.clock.now();
    timing.commMs = tApply - tComm;
    this.lastReduceEnd = tApply;

    // Each rank sent the sum of its examples' gradients: divide by the global batch for the mean.
    const diverged = flat[P + TAIL_NON_FINITE]!;
    if (diverged > 0) {
      // Every replica holds the same sum, so every replica stops here, before applying anything.
      throw new WebringError(
        'ERR_BAD_DATA',
        `step ${step}: ${diverged} replica(s) computed a gradient or loss that is not finite (the model diverged); resume from a checkpoint with a lower learning rate`,
      );
    }
    if (agreement) agreement.agree(flat.subarray(P + TAIL_LENGTH, P + TAIL_LENGTH + worldSize * agreement.floatsPerRank), worldSize);
    // Every replica holds the same count: a step in which nobody trained anything (every
    // example of it deleted) applies nothing, on every replica.
    const trainedExamples = flat[P + TAIL_EXAMPLES]!;
    const inv = trainedExamples > 0 ? 1 / trainedExamples : 0;
    let sq = 0;
    for (let i = 0; i < P; i++) {
      const g = flat[i]! * inv;
      flat[i] = g;
      sq += g * g;
    }
    if (this.config.wire === 'fp16' && !Number.isFinite(sq)) {
      // Every replica holds the same sum, so every replica stops here, before applying it.
      throw new WebringError(
        'ERR_BAD_DATA',
        `step ${step}: the summed gradient is not finite on the fp16 wire (a partial sum beyond ±65504, or a diverged model); resume with wire 'fp32'`,
      );
    }
    // Every replica is at the same step, world and ramp, so every replica applies the same rate.
    const learningRate = this.schedule.rateAt(step, this.data.globalBatchSize(worldSize));
    setLearningRate(this.optimizer, learningRate);
    // These tensors may alias `flat` (the CPU backend does not copy); that is safe because
    // they live only inside this tidy, and `flat` is not written again until the next step.
    if (trainedExamples > 0) this.applyFlat();
    timing.applyMs = this.clock.now() - tApply;

    // Every replica holds the same sums, so every replica picks the same next algorithm.
    const models = readModels(flat, P + TAIL_MODELS, worldSize);
    const ready: LinkReadiness = { mesh: flat[P + TAIL_MESH_READY] === worldSize, hub: flat[P + TAIL_HUB_READY] === worldSize };
    this.ready = ready;
    const wireBytes = P * (this.config.wire === 'fp16' ? 2 : 4) + this.tailLength * 4;
    this.nextAlgorithm = chooseAlgorithm(this.config.allreduce, worldSize, wireBytes, models, ready);
    const reason = this.explain(worldSize, wireBytes, models, ready);
    // Measure once the partner links are open, and again when the hub's links open later.
    this.measureDue = worldSize > 1 && ready.mesh && (this.measured === null || (ready.hub && this.measured.hub === null));

    // Every replica holds the same times and cuts the same batch, so every replica re-balances alike.
    for (let r = 0; r < worldSize; r++) this.rankExamples[r] = this.data.shareOf(batch, r);
    const times = this.rankTimes(worldSize);
    this.balancer.observe(times.computeMs, this.rankExamples, times.overheadMs);
    this.cursor = advance(batch, this.data.trainCount);
    this.stepCounter = step + 1;
    const stop = flat[P + TAIL_STOP]! > 0;
    const epochEnd = this.cursor.epoch !== batch.epoch;
    if (stop) this.stopped = true;
    // The evaluation that closes an epoch, or the run, is owed until it has run.
    if (epochEnd || this.finished) this.pendingEvaluation = batch.epoch;
    const computeMs: number[] = [];
    for (let r = 0; r < worldSize; r++) computeMs.push(flat[P + TAIL_COMPUTE_MS + r]!);
    return {
      step,
      epoch: batch.epoch,
      loss: flat[P + TAIL_LOSS]! * inv,
      trainAccuracy: flat[P + TAIL_CORRECT]! * inv,
      gradNorm: Math.sqrt(sq),
      stop,
      pause: flat[P + TAIL_PAUSE]! > 0,
      epochEnd,
      examples: this.trained,
      globalBatchSize: trainedExamples,
      admit: unanimous(flat, P + TAIL_ADMIT, worldSize),
      hashChecked,
      hashMismatch: hashChecked && hashesDiffer(flat, P + TAIL_HASH, worldSize),
      computeMs,
      algorithm,
      models,
      reason,
      learningRate,
      speedVsMedian: this.balancer.speedVsMedian(rank),
      timing: { ...timing },
    };
  }

  /** The tail's per-rank compute and overhead times at `worldSize`, as views of the reused buffer: made once per world size, not per step. */
  private rankTimes(worldSize: number): { computeMs: Float32Array; overheadMs: Float32Array } {
    const P = this.parameterCount;
    if (this.rankTimesViews?.worldSize !== worldSize) {
      this.rankTimesViews = {
        worldSize,
        computeMs: this.flat.subarray(P + TAIL_COMPUTE_MS, P + TAIL_COMPUTE_MS + worldSize),
        overheadMs: this.flat.subarray(P + TAIL_OVERHEAD_MS, P + TAIL_OVERHEAD_MS + worldSize),
      };
    }
    return this.rankTimesViews;
  }

  /** The global batch the next step trains from `cursor`: cut by the current shares, without the ranks sitting it out. */
  private nextGlobalBatch(cursor: DataCursor): GlobalBatch {
    const batch = this.data.nextBatch(cursor, this.collective.worldSize);
    // A source that decides the shares (own data: where the examples are) is cut as it says.
    if (batch.shares) return batch;
    batch.weights = this.balancer.current;
    return this.sitOutFrom === null ? batch : withoutRanksFrom(batch, this.sitOutFrom);
  }

  /**
   * Forward and backward on this rank's examples of `batch`. The loss is the SUM over the shard,
   * so `flat` receives the sum of the examples' gradients straight from autodiff (shards
   * of different sizes then average exactly, with no extra pass over the buffer), and the
   * tail the summed loss and the correct count.
   */
  private async computeGradients(batch: GlobalBatch, rank: number): Promise<number> {
    const tData = this.clock.now();
    const n = await this.data.readShard(batch, rank, this.images, this.labels);
    const tCompute = this.clock.now();
    this.timing.dataMs = tCompute - tData;
    if (n > 0) await this.backprop(n, tCompute);
    return n;
  }

  /** Forward and backward over the first `n` examples of the batch buffers, gradients into `flat`. */
  private async backprop(n: number, tCompute: number): Promise<void> {
    const { value, grads, correct } = tf.tidy(() => {
      const x = tf.tensor4d(this.images.subarray(0, n * MNIST_PIXELS), [n, 28, 28, 1]);
      const labels = tf.tensor1d(this.labels.subarray(0, n), 'int32');
      const y = tf.oneHot(labels, this.config.classes.length);
      let correctCount: tf.Tensor | null = null;
      const result = tf.variableGrads(() => {
        const logits = this.model.apply(x, { training: true }) as tf.Tensor2D;
        correctCount = tf.keep(tf.sum(tf.cast(tf.equal(tf.argMax(logits, -1), labels), 'float32')));
        return tf.losses.softmaxCrossEntropy(y, logits, undefined, undefined, tf.Reduction.SUM) as tf.Scalar;
      }, this.variables);
      return { value: result.value, grads: result.grads, correct: correctCount as unknown as tf.Tensor };
    });
    const flat = this.flat;
    const P = this.parameterCount;
    try {
      // All the step's kernels were queued together, so the loss arrives once the device
      // has finished the forward and backward passes: the split between compute and read-back.
      const [lossData, correctData] = await Promise.all([value.data(), correct.data()]);
      const tReadback = this.clock.now();
      // Read every gradient back at once; the GPU queue overlaps the copies.
      const gradData = await Promise.all(this.variables.map((v) => grads[v.name]!.data()));
      gradData.forEach((g, i) => flat.set(g as Float32Array, this.offsets[i]));
      flat[P + TAIL_LOSS] = lossData[0]!;
      flat[P + TAIL_CORRECT] = correctData[0]!;
      this.timing.computeMs = tReadback - tCompute;
      this.timing.readbackMs = this.clock.now() - tReadback;
    } finally {
      value.dispose();
      correct.dispose();
      tf.dispose(grads);
    }
  }

  /** Applies the gradients in `flat` through the optimizer. */
  private applyFlat(): void {
    const flat = this.flat;
    tf.tidy(() => {
      const named: tf.NamedTensorMap = {};
      this.variables.forEach((v, i) => {
        const off = this.offsets[i]!;
        named[v.name] = tf.tensor(flat.subarray(off, off + v.size), v.shape, 'float32');
      });
      this.optimizer.applyGradients(named);
    });
    this.weightsVersion++;
  }

  /**
   * A joiner's rehearsal while the class still trains without it: one forward, backward,
   * read-back and optimizer update of a typical share of blank examples, so that its first
   * step in the ring runs on warm kernels (a WebGPU tab compiles its shaders, V8 its CPU
   * kernels, the optimizer makes its slots). Whatever it changes, the hand-over replaces:
   * weights, optimizer state, iterations, position.
   */
  async rehearse(): Promise<void> {
    const share = Math.round(this.globalBatchSize / this.collective.worldSize);
    const n = Math.min(this.data.maxShardExamples, Math.max(1, share));
    this.images.fill(0, 0, n * MNIST_PIXELS);
    this.labels.fill(0, 0, n);
    await this.backprop(n, this.clock.now());
    this.applyFlat();
  }

  /**
   * Test-set accuracy, evaluated data-parallel: each rank scores its shard, one tiny
   * all-reduce sums. Null when the class holds no test example (own data, none held out yet).
   */
  async evaluate(): Promise<number | null> {
    this.lastReduceEnd = null;
    const { rank, worldSize } = this.collective;
    const shard = this.data.testShard(rank, worldSize);
    const from = shard.start;
    const to = shard.start + shard.count;
    const images = (this.evalImages ??= new Float32Array(EVAL_BATCH * MNIST_PIXELS));
    const labels = (this.evalLabels ??= new Int32Array(EVAL_BATCH));
    let correct = 0;
    for (let start = from; start < to; start += EVAL_BATCH) {
      const n = Math.min(EVAL_BATCH, to - start);
      await this.data.readTest(start, n, images, labels);
      // The tensors may alias the reused buffers (the CPU backend does not copy); they live
      // only inside this tidy, and the count is read back before the buffers are written again.
      const hits = tf.tidy(() => {
        const logits = this.model.apply(tf.tensor4d(images.subarray(0, n * MNIST_PIXELS), [n, 28, 28, 1]), { training: false }) as tf.Tensor2D;
        return tf.sum(tf.cast(tf.equal(tf.argMax(logits, -1), tf.tensor1d(labels.subarray(0, n), 'int32')), 'float32'));
      });
      correct += (await hits.data())[0]!;
      hits.dispose();
      // The CPU backend's data() resolves as a microtask: without this, the whole test set is one blocking task.
      await yieldToEventLoop();
    }
    this.evalBuffer[0] = correct;
    this.evalBuffer[1] = to - from;
    await this.collective.allReduce(this.evalBuffer, this.stepCounter, COLLECTIVE_TAG.evaluation);
    return this.evalBuffer[1]! > 0 ? this.evalBuffer[0]! / this.evalBuffer[1]! : null;
  }

  /** Fingerprint of all weights, in variable order; equal hashes mean bit-identical replicas. */
  async weightsHash(): Promise<string> {
    const version = this.weightsVersion;
    if (this.hashCache?.version === version) return this.hashCache.hash;
    const values = await Promise.all(this.variables.map((v) => v.data() as Promise<Float32Array>));
    const hasher = new WeightsHasher();
    for (const vals of values) hasher.update(vals);
    const hash = hasher.digest();
    this.hashCache = { version, hash };
    return hash;
  }

  /** Nudges one weight on this replica, as numeric drift between backends would (an injected fault). */
  private nudgeWeights(): void {
    const v = this.variables[0]!;
    tf.tidy(() => v.assign(v.add(tf.scalar(1e-3))));
    this.weightsVersion++;
  }

  /** All weights concatenated in variable order (for tests and state transfer). */
  async readWeights(): Promise<Float32Array> {
    const values = await Promise.all(this.variables.map((v) => v.data() as Promise<Float32Array>));
    const out = new Float32Array(this.parameterCount);
    values.forEach((vals, i) => out.set(vals, this.offsets[i]));
    return out;
  }

  dispose(): void {
    this.optimizer.dispose();
    this.model.dispose();
  }
}

/**
 * The first rank to sit the step after a hand-over out, when the ranks that took it are
 * the last of the ring (joiners are appended there): the chain's sender, the rank just
 * before them, sits out with them, because a device that computes while it sends starves
 * its own sending (measured in the lab: 1.2 MB took 2.6 s from a 0.2-core laptop that was
 * computing, against 1.3 s from an idle one). Rank 0 always trains, so a step never has
 * no examples. Null, and everyone trains, for a drifted replica in the middle of the ring:
 * resyncs are rare, and the ranks after it would lose their share too.
 */
function sitOutFrom(behind: readonly number[], worldSize: number): number | null {
  const first = behind[0];
  if (first === undefined || behind.length !== worldSize - first) return null;
  return Math.max(1, first - 1);
}

/** The numbers the teacher's sentence depends on: algorithm, world size, bytes, votes, and each model's α and β. */
const REASON_INPUTS = 11;
const ALGORITHM_CODES: Record<Algorithm, number> = { ring: 0, 'halving-doubling': 1, hub: 2 };

/** This replica's measurements into the tail (zeros when not measured: they then sum to zero). */
function writeModels(flat: Float32Array, at: number, models: LinkModels | null): void {
  const values = [models?.ring, models?.halvingDoubling, models?.hub];
  values.forEach((m, i) => {
    flat[at + 2 * i] = m?.alphaMs ?? 0;
    flat[at + 2 * i + 1] = m?.betaBytesPerMs ?? 0;
  });
}

/** The ring's mean measurements; null when nobody has measured in this generation. */
function readModels(flat: Float32Array, at: number, n: number): LinkModels | null {
  const model = (i: number): LinkModel | null => (flat[at + 2 * i]! > 0 ? { alphaMs: flat[at + 2 * i]! / n, betaBytesPerMs: flat[at + 2 * i + 1]! / n } : null);
  const ring = model(0);
  const halvingDoubling = model(1);
  const hub = model(2);
  return ring || halvingDoubling || hub ? { ring, halvingDoubling, hub } : null;
}

/** True when every value of `values[from, from + length)` is finite and below `bound` in magnitude. */
function finiteBelow(values: Float32Array, from: number, length: number, bound: number): boolean {
  for (let i = from; i < from + length; i++) {
    const v = values[i]!;
    // NaN fails both comparisons.
    if (!(v < bound && v > -bound)) return false;
  }
  return true;
}

/** Link measurements into the hand-over's header: α and β per algorithm, -1 for none. */
function writeStateModels(state: Float32Array, at: number, models: LinkModels | null): void {
  const each = [models?.ring ?? null, models?.halvingDoubling ?? null, models?.hub ?? null];
  each.forEach((m, i) => {
    state[at + 2 * i] = m ? m.alphaMs : -1;
    state[at + 2 * i + 1] = m ? m.betaBytesPerMs : -1;
  });
}

function readStateModels(state: Float32Array, at: number): LinkModels | null {
  const one = (i: number): LinkModel | null => (state[at + 2 * i]! < 0 ? null : { alphaMs: state[at + 2 * i]!, betaBytesPerMs: state[at + 2 * i + 1]! });
  const ring = one(0);
  return ring ? { ring, halvingDoubling: one(1), hub: one(2) } : null;
}
