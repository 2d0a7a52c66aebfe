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
import { COLLECTIVE_TAG, type Collective, type CollectiveOptions } from '../collectives/collective';
import { advance, stepsRemaining, withoutRanksFrom, type DataCursor, type GlobalBatch } from './sharding';
import { MNIST_PIXELS } from '../data/mnist-format';
import type { DataSource, EpochRoster } from './data-source';
import type { FaultInjector } from './faults';
import { sleep, systemClock, type Clock } from '../util/clock';
import { LearningRateSchedule } from './lr-schedule';
import { ShareBalancer, ShareTimes } from './share-balancer';
import { MAX_ROOM_MEMBERS, type StartConfig } from '../protocol';
import type { LinkModels } from '../collectives/choice';
import { WebringError } from '../protocol/errors';
import { StepVotes } from './agreement';
import { FINGERPRINT_FLOATS, fingerprintCursor, handOverChain, ranksBehind, sitOutFrom, writeFingerprint } from './hand-over';
import { chainPosition } from '../collectives/chain-broadcast-schedule';
import { Ledger, type LedgerSection } from './ledger';
import { StepCount, StepMetrics, initialFacts, type StepOptions, type StepFacts, type StepResult, type StepTiming, type TailSection } from './step-ledger';
import { LinkSelection } from './link-selection';
import { DataAgreementTail, dataAgreementState } from './data-sections';
import { Evaluation } from './evaluation';
import { LocalReplica } from '../compute/local-replica';
import type { Replica } from '../compute/replica';

export type { StepOptions, StepResult, StepTiming } from './step-ledger';

/**
 * A replica's own gradient values must stay below this magnitude to travel: then no
 * honest float32 partial sum can overflow (a received finite value plus one below 2^100
 * rounds back below 2^128), so a non-finite value on the wire can only come from a broken or
 * hostile sender. Anything larger is a diverged model.
 */
export const MAX_LOCAL_GRADIENT = 2 ** 100;

/** Replicas compare weight hashes at least this often (every step whose number is a multiple). */
export const HASH_CHECK_EVERY_STEPS = 10;

/** What the hand-over's replica section takes: on the sender the replica's state, read before the ledger is written; on a receiver the state it took. */
interface HandOver {
  state: Float32Array | null;
}

export interface TrainerOptions {
  /** Measures compute and communication times, and paces injected slowness. */
  clock?: Clock;
  /** Faults a test plays on purpose (slowness, drift); production passes none. */
  faults?: FaultInjector;
  /** The model and its maths (compute/replica.ts), in a compute thread or not; default one in this thread. */
  replica?: Replica;
}

export class Trainer {
  /** The model, its optimizer and the maths of a step; the trainer coordinates, the replica computes. */
  readonly replica: Replica;
  /** The rate of every step: warm-up, and linear scaling with the global batch when configured. */
  readonly schedule: LearningRateSchedule;
  /** Each rank's share of the global batch when shares follow speed (balanceShares). */
  private readonly balancer: ShareBalancer;
  /** Which collective the next step takes, from the links every replica measured and voted open. */
  private readonly links: LinkSelection;
  readonly config: StartConfig;
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
  // Reused across steps: the per-step path allocates no JS buffers of its own. They cross
  // to the replica's thread and come back by transfer, so each step takes them anew.
  private flat: Float32Array;
  /**
   * The gradient tail (step-ledger.ts): every participant's section, laid over `flat` after
   * the gradients. The trainer keeps the sections it reads itself: the metrics, the count
   * and the votes.
   */
  private readonly tail: Ledger<StepFacts>;
  private readonly facts = initialFacts();
  private readonly metrics = new StepMetrics();
  private readonly count = new StepCount();
  private readonly votes = new StepVotes();
  private readonly times: ShareTimes;
  /** The hand-over's state: every participant's section around the weights. */
  private readonly handOver: Ledger<HandOver>;
  private images: Float32Array;
  private labels: Int32Array;
  /** Scores the test set; its buffers are allocated on the first evaluation, then reused. */
  private readonly evaluation = new Evaluation();
  /** Every replica's fingerprint (hand-over.ts), sized for the largest ring so far. */
  private agreeBuffer = new Float32Array(0);
  private readonly timing: StepTiming = { dataMs: 0, computeMs: 0, readbackMs: 0, crossMs: 0, commMs: 0, applyMs: 0 };
  /** Tensors alive in the replica's engine after the last step. */
  numTensors = 0;
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

  constructor(config: StartConfig, data: DataSource, collective: Collective, options: TrainerOptions = {}) {
    this.config = config;
    this.data = data;
    this.clock = options.clock ?? systemClock;
    this.faults = options.faults ?? null;
    this.collective = collective;
    this.replica = options.replica ?? new LocalReplica({ config });
    this.schedule = new LearningRateSchedule(config);
    this.balancer = new ShareBalancer(config.balanceShares);
    this.balancer.reset(collective.worldSize);
    this.links = new LinkSelection(config);
    this.times = new ShareTimes(this.balancer, (batch, rank) => data.shareOf(batch, rank));
    const total = this.replica.parameterCount;
    this.parameterCount = total;
    // The participants of every step, in the tail's order; a new one is one more section here.
    const agreement = data.agreement;
    const tail: TailSection[] = [this.metrics, this.votes, this.times, this.links, this.count];
    if (agreement) tail.push(new DataAgreementTail(agreement));
    this.tail = new Ledger(tail, MAX_ROOM_MEMBERS);
    this.flat = new Float32Array(total + this.tail.length);
    this.tail.attach(this.flat, total, collective.worldSize);
    this.links.sizeFor(total, this.tail.length);
    // And of the hand-over, in the state's order.
    const state: Array<LedgerSection<HandOver>> = [this.positionSection(), this.schedule.section, this.links.state, this.replicaSection()];
    if (agreement) state.push(dataAgreementState(agreement));
    this.handOver = new Ledger(state, MAX_ROOM_MEMBERS);
    this.gradientOptions = { wire: config.wire, exactTail: this.tail.length, algorithm: 'ring' };
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

  /** Set when the links should be measured before the next step (link-selection.ts); the same on every replica. */
  get measureDue(): boolean {
    return this.links.measureDue;
  }

  /**
   * Trains on over a new generation's collective. With `keepLinkModels` (the generation only
   * appends members to links already measured) the link measurements stay, and the
   * hand-over gives them to the joiners: the class does not stop to probe its links again.
   */
  setCollective(collective: Collective, options: { keepLinkModels?: boolean; probeMsPerExample?: ArrayLike<number> | null } = {}): void {
    this.collective = collective;
    this.lastReduceEnd = null;
    this.links.reset(options.keepLinkModels ?? false);
    this.tail.bind(collective.worldSize);
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
  measureLinks(): Promise<LinkModels> {
    this.lastReduceEnd = null;
    return this.links.measure(this.collective, this.stepCounter);
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

  /** Floats of the state a replica hands over (its ledger: position, ramp, links, weights, optimizer state, roster). */
  get stateLength(): number {
    return this.handOver.length;
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

    const state = this.stateBufferFor(n);
    const handOver: HandOver = { state: null };
    const { at: position, hops } = chainPosition(this.collective.rank, n, chain);
    const receives = position >= 1 && position <= hops;
    // The agreement round told us where rank 0 is: fetch the first examples while the state travels.
    if (receives && this.data.prefetch) this.data.prefetch(this.nextGlobalBatch(fingerprintCursor(check, 0)), this.collective.rank);
    if (position === 0) {
      handOver.state = await this.replica.readState();
      this.handOver.write(handOver);
    }
    await this.collective.broadcast(state, keyStep, COLLECTIVE_TAG.sync, chain);
    if (receives) {
      this.handOver.read(handOver);
      await this.replica.writeState(handOver.state!);
    }
    return behind.length;
  }

  /** The hand-over's buffer, laid out by its ledger on the first hand-over: joins and resyncs are rare. */
  private stateBufferFor(worldSize: number): Float32Array {
    if (this.stateBuffer) return this.stateBuffer;
    this.stateBuffer = new Float32Array(this.handOver.length);
    this.handOver.attach(this.stateBuffer, 0, worldSize);
    return this.stateBuffer;
  }

  /** The position's section of the hand-over: step, data cursor, owed evaluation, stop. */
  private positionSection(): LedgerSection<unknown> {
    return {
      floats: () => 5,
      write: (s) => {
        s[0] = this.stepCounter;
        s[1] = this.cursor.epoch;
        s[2] = this.cursor.offset;
        s[3] = this.pendingEvaluation === null ? 0 : this.pendingEvaluation + 1;
        s[4] = this.stopped ? 1 : 0;
      },
      read: (s) => {
        this.stepCounter = s[0]!;
        this.cursor = { epoch: s[1]!, offset: s[2]! };
        this.pendingEvaluation = s[3] === 0 ? null : s[3]! - 1;
        this.stopped = s[4]! > 0;
      },
    };
  }

  /** The replica's section of the hand-over: its weights, optimizer slots and iterations (Replica.readState). */
  private replicaSection(): LedgerSection<HandOver> {
    return {
      floats: () => this.replica.stateLength,
      write: (s, handOver) => s.set(handOver.state!),
      // A copy: the state buffer is reused, and the replica's thread may take what it is given.
      read: (s, handOver) => {
        handOver.state = s.slice();
      },
    };
  }

  /** One synchronous step on the next global batch. */
  async trainStep(options: StepOptions = {}): Promise<StepResult> {
    const step = this.stepCounter;
    if (this.faults?.driftBefore?.(step)) await this.replica.nudge();
    const t0 = this.clock.now();
    const { rank, worldSize } = this.collective;
    const batch = this.nextGlobalBatch(this.cursor);
    this.sitOutFrom = null;
    const n = this.data.shareOf(batch, rank);
    // Compare hashes of the weights this step starts from, every HASH_CHECK_EVERY_STEPS.
    const hashChecked = step % HASH_CHECK_EVERY_STEPS === 0;
    const hash = hashChecked ? await this.weightsHash() : null;

    const P = this.parameterCount;
    const timing = this.timing;
    const facts = this.facts;
    facts.loss = 0;
    facts.correct = 0;
    timing.dataMs = 0;
    timing.computeMs = 0;
    timing.readbackMs = 0;
    timing.crossMs = 0;
    const trained = n > 0 ? await this.computeGradients(batch, rank) : 0;
    // Taken after the compute: the buffer came back from the replica's thread as new memory.
    const flat = this.flat;
    // More ranks than examples left in the epoch, or none of its own: contribute nothing.
    if (trained === 0) flat.fill(0, 0, P);
    const slowMs = (this.faults?.slowComputeMs?.(step) ?? 0) + n * (this.faults?.slowMsPerExample?.(step) ?? 0);
    if (slowMs > 0) await sleep(this.clock, slowMs);
    // The sender's own check: a diverged replica sends zeros and says so, rather than NaN.
    const nonFinite = !finiteBelow(flat, 0, P, MAX_LOCAL_GRADIENT) || !Number.isFinite(facts.loss);
    if (nonFinite) flat.fill(0, 0, P);
    facts.step = step;
    facts.rank = rank;
    facts.worldSize = worldSize;
    facts.batch = batch;
    facts.options = options;
    facts.hash = hash;
    facts.trained = trained;
    facts.nonFinite = nonFinite;
    facts.computeMs = this.clock.now() - t0;
    facts.overheadMs = this.lastReduceEnd === null ? 0 : Math.max(0, t0 - this.lastReduceEnd);
    this.tail.write(facts);

    const algorithm = this.links.next;
    this.gradientOptions.algorithm = algorithm;
    const tComm = this.clock.now();
    await this.collective.allReduce(flat, step, COLLECTIVE_TAG.gradients, this.gradientOptions);
    const tApply = this.clock.now();
    timing.commMs = tApply - tComm;
    this.lastReduceEnd = tApply;

    // Every replica holds the same sums, so every section reads the same: the count stops a
    // diverged step here, the data agreement agrees, the balancer re-balances and link
    // selection picks the next step's algorithm alike on every replica.
    this.tail.read(facts);
    // Each rank sent the sum of its examples' gradients: divide by the global batch for the
    // mean. Every replica holds the same count: a step in which nobody trained anything
    // (every example of it deleted) applies nothing, on every replica.
    const trainedExamples = this.count.examples;
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
    if (trainedExamples > 0) this.takeFlat(await this.replica.applyGradients(flat, learningRate));
    timing.applyMs = this.clock.now() - tApply;

    this.cursor = advance(batch, this.data.trainCount);
    this.stepCounter = step + 1;
    const { stop, pause, admit, hashMismatch } = this.votes;
    const epochEnd = this.cursor.epoch !== batch.epoch;
    if (stop) this.stopped = true;
    // The evaluation that closes an epoch, or the run, is owed until it has run.
    if (epochEnd || this.finished) this.pendingEvaluation = batch.epoch;
    return {
      step,
      epoch: batch.epoch,
      loss: this.metrics.lossSum * inv,
      trainAccuracy: this.metrics.correctSum * inv,
      gradNorm: Math.sqrt(sq),
      stop,
      pause,
      epochEnd,
      examples: trained,
      globalBatchSize: trainedExamples,
      admit,
      hashChecked,
      hashMismatch,
      computeMs: this.times.computeMs(),
      algorithm,
      models: this.links.models,
      reason: this.links.reason,
      learningRate,
      speedVsMedian: this.balancer.speedVsMedian(rank),
      timing: { ...timing },
    };
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
   * Forward and backward on this rank's examples of `batch` in the replica. The loss is the
   * SUM over the shard, so `flat` receives the sum of the examples' gradients straight from
   * autodiff (shards of different sizes then average exactly, with no extra pass over the
   * buffer), and the tail the summed loss and the correct count.
   */
  private async computeGradients(batch: GlobalBatch, rank: number): Promise<number> {
    const tData = this.clock.now();
    const n = await this.data.readShard(batch, rank, this.images, this.labels);
    const tCompute = this.clock.now();
    this.timing.dataMs = tCompute - tData;
    if (n === 0) return 0;
    const result = await this.replica.computeGradients({ images: this.images, labels: this.labels, n }, this.flat);
    const wallMs = this.clock.now() - tCompute;
    this.takeFlat(result.flat);
    this.images = result.images;
    this.labels = result.labels;
    this.facts.loss = result.loss;
    this.facts.correct = result.correct;
    this.numTensors = result.numTensors;
    this.timing.computeMs = result.computeMs;
    this.timing.readbackMs = result.readbackMs;
    // What the thread's two messages and their transfers cost beyond the maths itself.
    this.timing.crossMs = Math.max(0, wallMs - result.computeMs - result.readbackMs);
    return n;
  }

  /** The gradient buffer, back from the replica: when it is new memory (a thread's transfer), the tail is laid over it again. */
  private takeFlat(flat: Float32Array): void {
    if (flat === this.flat) return;
    this.flat = flat;
    this.tail.attach(flat, this.parameterCount, this.collective.worldSize);
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
    await this.replica.rehearse(Math.min(this.data.maxShardExamples, Math.max(1, share)));
  }

  /**
   * Test-set accuracy, evaluated data-parallel (evaluation.ts); null when the class holds no
   * test example (own data, none held out yet).
   */
  evaluate(): Promise<number | null> {
    this.lastReduceEnd = null;
    return this.evaluation.run(this.replica, this.data, this.collective, this.stepCounter);
  }

  /** Fingerprint of all weights, in variable order; equal hashes mean bit-identical replicas. */
  weightsHash(): Promise<string> {
    return this.replica.weightsHash();
  }

  /** All weights concatenated in variable order (for tests and state transfer). */
  readWeights(): Promise<Float32Array> {
    return this.replica.readWeights();
  }

  dispose(): Promise<void> {
    return this.replica.dispose();
  }
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
