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
import { compressedOver } from '../collectives/power-sgd';
import type { DataCursor, GlobalBatch } from '../data/batch-plan';
import { stepsRemaining } from '../data/sharding';
import type { DataSource, EpochRoster } from '../data/data-source';
import { sleep, systemClock, type Clock } from '../util/clock';
import { LearningRateSchedule } from './lr-schedule';
import { ShareBalancer, ShareTimes } from './share-balancer';
import { MAX_ROOM_MEMBERS, replicaRecipe, type StartConfig } from '../protocol';
import type { LinkModels } from '../collectives/choice';
import { StepVotes } from './agreement';
import { Ledger } from './ledger';
import { RunPosition } from './run-position';
import type { EpochAccount, EpochTally } from './epoch-tally';
import { StateSync } from './state-sync';
import { StepBuffers } from './step-buffers';
import { StepCount, StepMetrics, checkSummedGradient, initialFacts, startTurn, type StepOptions, type StepFacts, type StepResult, type StepTiming, type TailSection } from './step-ledger';
import { LinkSelection } from './link-selection';
import { DataAgreementTail } from './data-sections';
import { Evaluation, type Scores } from './evaluation';
import { featuresOf } from '../tasks/registry';
import { LocalReplica } from '../compute/local-replica';
import type { Replica } from '../compute/replica';
import type { FaultInjector } from './faults';
import { HASH_CHECK_EVERY_STEPS, REHEARSAL_EXAMPLES, type TrainerOptions } from './trainer-options';
import { syncModeFor, type SyncModeRun, type TurnHost } from './sync-mode';
import type { OuterOptimizer } from './outer-optimizer';

export type { StepOptions, StepResult, StepTiming } from './step-ledger';
export { HASH_CHECK_EVERY_STEPS, type TrainerOptions } from './trainer-options';

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
  /** The step, the data cursor, the owed evaluation and the stop: the same on every replica. */
  private readonly position = new RunPosition();
  /** The examples and the gradient buffer, reused by every step; they cross to the replica and back (step-buffers.ts). */
  private readonly buffers: StepBuffers;
  /**
   * The gradient tail (step-ledger.ts): every participant's section, laid over the gradient
   * buffer after the gradients. The trainer keeps the sections it reads itself: the
   * metrics, the count and the votes.
   */
  private readonly tail: Ledger<StepFacts>;
  private readonly facts = initialFacts();
  private readonly metrics = new StepMetrics();
  private readonly count = new StepCount();
  private readonly votes = new StepVotes();
  private readonly times: ShareTimes;
  /** The hand-over of the whole state to replicas that differ from rank 0 (state-sync.ts). */
  private readonly stateSync: StateSync;
  /** Scores the test set; its buffers are allocated on the first evaluation, then reused. */
  private readonly evaluation: Evaluation;
  private readonly timing: StepTiming = { dataMs: 0, computeMs: 0, readbackMs: 0, crossMs: 0, commMs: 0, applyMs: 0 };
  /**
   * The gradients travel in the configured format (the tail's votes and counts stay exact)
   * with the algorithm picked for the step; one object, updated, not one per step.
   */
  private readonly gradientOptions: CollectiveOptions;
  /**
   * The first rank that sits the next step out, or null: joiners and the rank that sends them
   * the state train nothing in the new ring's first step, so the class computes while the
   * state travels. Set from the agreed fingerprints, so the same on every replica.
   */
  private sitOutFrom: number | null = null;
  /** When the last gradient all-reduce ended, while steps follow each other; null after anything else (a new ring, a hand-over, an evaluation, a link measurement). */
  private lastReduceEnd: number | null = null;
  /** How the class sums its work each turn: every step's gradients, or a round of local steps (sync-mode.ts). */
  private readonly mode: SyncModeRun;

  constructor(config: StartConfig, data: DataSource, collective: Collective, options: TrainerOptions = {}) {
    this.config = config;
    this.data = data;
    this.clock = options.clock ?? systemClock;
    this.faults = options.faults ?? null;
    this.replica = options.replica ?? new LocalReplica({ config: replicaRecipe(config) });
    this.collective = compressedOver(collective, config, this.replica.weightShapes);
    this.schedule = new LearningRateSchedule(replicaRecipe(config));
    this.balancer = new ShareBalancer(config.balanceShares);
    this.balancer.reset(collective.worldSize);
    this.links = new LinkSelection(config);
    this.times = new ShareTimes(this.balancer);
    const total = this.replica.parameterCount;
    this.parameterCount = total;
    // The participants of every step, in the tail's order; a new one is one more section here.
    const agreement = data.agreement;
    const tail: TailSection[] = [this.metrics, this.votes, this.times, this.links, this.count];
    if (agreement) tail.push(new DataAgreementTail(agreement));
    this.tail = new Ledger(tail, MAX_ROOM_MEMBERS);
    // The engine knows an example only as F numbers: the task (or a program's source) says how many.
    const features = data.featuresPerExample ?? featuresOf(config.task);
    this.buffers = new StepBuffers(total, this.tail, data.maxShardExamples * features, data.maxShardExamples, collective.worldSize);
    this.evaluation = new Evaluation(features);
    this.links.sizeFor(total, this.tail.length);
    const host: TurnHost = {
      replica: this.replica,
      buffers: this.buffers,
      data,
      clock: this.clock,
      position: this.position,
      facts: this.facts,
      timing: this.timing,
      nextBatch: (cursor) => this.nextGlobalBatch(cursor),
      endSitOut: () => {
        this.sitOutFrom = null;
      },
      rateAt: (step, worldSize) => this.schedule.rateAt(step, data.globalBatchSize(worldSize)),
      computeGradients: (batch, rank) => this.computeGradients(batch, rank),
    };
    this.mode = syncModeFor(config, host);
    // And of the hand-over, in the state's order between the position and the replica's.
    this.stateSync = new StateSync(this.position, this.replica, data, [this.schedule.section, this.links.state, ...this.mode.stateSections]);
    this.gradientOptions = { wire: config.wire, exactTail: this.tail.length, algorithm: 'ring' };
  }

  get step(): number {
    return this.position.step;
  }

  get epoch(): number {
    return this.position.cursor.epoch;
  }

  get dataCursor(): DataCursor {
    return { ...this.position.cursor };
  }

  /** The epoch whose closing evaluation is still owed (after an epoch's last step), or null. */
  get pendingEvaluation(): number | null {
    return this.position.pendingEvaluation;
  }

  set pendingEvaluation(epoch: number | null) {
    this.position.pendingEvaluation = epoch;
  }

  /** Set once the ring agreed to stop; part of the shared state, like the step. */
  get stopped(): boolean {
    return this.position.stopped;
  }

  /** Stops without a vote: for a ring that takes no step to vote in (a secure ring of two, holding), every replica at the same step. */
  stopWithoutVote(): void {
    this.position.stopped = true;
  }

  get worldSize(): number {
    return this.collective.worldSize;
  }

  /** The class's account of the open epoch and the one before (epoch-tally.ts): part of the state, alike on every replica. */
  get tally(): Pick<EpochTally, 'of' | 'recent' | 'accounts'> {
    return this.position.tally;
  }

  get globalBatchSize(): number {
    return this.data.globalBatchSize(this.collective.worldSize);
  }

  /** True once the run has nothing left to train: all epochs done, maxSteps reached, or stopped. */
  get finished(): boolean {
    const { epochs, maxSteps } = this.config;
    const { stopped, cursor, step } = this.position;
    return stopped || cursor.epoch >= epochs || (maxSteps !== undefined && step >= maxSteps);
  }

  /** The step the run will end at if the world size stays as it is now. */
  get totalSteps(): number {
    const left = stepsRemaining(this.position.cursor, this.config.epochs, this.data.trainCount, this.globalBatchSize);
    const end = this.position.step + left;
    return this.config.maxSteps === undefined ? end : Math.min(end, this.config.maxSteps);
  }

  /** Set when the links should be measured before the next step (link-selection.ts); the same on every replica. */
  get measureDue(): boolean {
    return this.links.measureDue;
  }

  /**
   * Trains on over a new generation's collective. With `keepLinkModels` (the generation has
   * the same hub; members came or went) the link measurements stay, and the hand-over gives
   * them to the joiners: the class does not stop to probe its links again.
   */
  setCollective(collective: Collective, options: { keepLinkModels?: boolean; probeMsPerExample?: ArrayLike<number> | null } = {}): void {
    this.collective = compressedOver(collective, this.config, this.replica.weightShapes);
    this.lastReduceEnd = null;
    this.links.reset(options.keepLinkModels ?? false);
    this.buffers.bind(collective.worldSize);
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
    return this.links.measure(this.collective, this.position.step);
  }

  /**
   * Positions the replica, e.g. at a resumed step; the cursor must come from the same run,
   * and so must the epoch's roster for a run on the class's own data (null: none yet).
   */
  setPosition(step: number, cursor: DataCursor, roster: EpochRoster | null = null, accounts: readonly EpochAccount[] = []): void {
    this.lastReduceEnd = null;
    this.position.moveTo(step, cursor, accounts);
    this.data.agreement?.restore(roster);
  }

  /** The current epoch's roster on the class's own data (keys and counts: own-data.ts); null otherwise. */
  get dataRoster(): EpochRoster | null {
    return this.data.agreement?.roster ?? null;
  }

  /** Floats of the state a replica hands over (its ledger: position, ramp, links, weights, optimizer state, roster). */
  get stateLength(): number {
    return this.stateSync.length;
  }

  /**
   * Makes every replica's whole state equal to rank 0's (state-sync.ts), first in every
   * generation, keyed at step 0: a joiner learns the step from the state. Returns how many
   * replicas took the state (0: they already agreed).
   */
  async syncState(keyStep = 0): Promise<number> {
    this.lastReduceEnd = null;
    await this.buffers.settle();
    const { took, sitOutFrom } = await this.stateSync.sync(this.collective, keyStep, (cursor) => this.nextGlobalBatch(cursor));
    this.sitOutFrom = sitOutFrom;
    return took;
  }

  /** The outer optimizer of a local-steps run (its momentum goes into checkpoints); null every step. */
  get outer(): OuterOptimizer | null {
    return this.mode.outer;
  }

  /** Outer steps so far: one per step, or one per round of local steps (run-position.ts). */
  get round(): number {
    return this.position.round;
  }

  /**
   * Restores a checkpoint's outer state: the round and, in local-steps mode, the outer
   * optimizer's momentum (null: a checkpoint without one starts it at zero).
   */
  restoreOuter(round: number, momentum: Float32Array | null): void {
    this.position.round = round;
    this.position.finishing = null;
    this.outer?.restore(momentum);
  }

  /**
   * One turn: one synchronous step on the next global batch, or in local-steps mode one
   * round of local steps and its outer step (sync-mode.ts).
   */
  async trainStep(options: StepOptions = {}): Promise<StepResult> {
    const step = this.position.step;
    if (this.faults?.driftBefore?.(step)) await this.replica.nudge();
    const t0 = this.clock.now();
    const { rank, worldSize } = this.collective;
    // Compare hashes of the weights this turn starts from, every HASH_CHECK_EVERY_STEPS (every round).
    const hashChecked = this.mode.hashEveryTurn || step % HASH_CHECK_EVERY_STEPS === 0;
    const hash = hashChecked ? await this.weightsHash() : null;

    const { timing, facts } = this;
    startTurn(facts, timing);
    const work = await this.mode.contribute(rank, worldSize);
    const { trained } = work;
    const buffers = this.buffers;
    // More ranks than examples left in the epoch, or none of its own: contribute nothing.
    if (trained === 0) buffers.clearGradients();
    const slowMs = (this.faults?.slowComputeMs?.(step) ?? 0) + trained * (this.faults?.slowMsPerExample?.(step) ?? 0);
    if (slowMs > 0) await sleep(this.clock, slowMs);
    // The sender's own check: a diverged replica sends zeros and says so, rather than NaN.
    const nonFinite = !buffers.gradientsTravel() || !Number.isFinite(facts.loss);
    if (nonFinite) buffers.clearGradients();
    facts.step = step;
    facts.rank = rank;
    facts.worldSize = worldSize;
    facts.batch = work.first;
    facts.options = options;
    facts.hash = hash;
    facts.trained = trained;
    facts.nonFinite = nonFinite;
    facts.computeMs = this.clock.now() - t0;
    facts.overheadMs = this.lastReduceEnd === null ? 0 : Math.max(0, t0 - this.lastReduceEnd);
    this.tail.write(facts);

    const algorithm = this.links.next;
    this.gradientOptions.algorithm = algorithm;
    this.gradientOptions.patienceMs = this.mode.patienceMs(this.times.slowestMs());
    const tComm = this.clock.now();
    await this.collective.allReduce(buffers.flat, step, COLLECTIVE_TAG.gradients, this.gradientOptions);
    const tApply = this.clock.now();
    timing.commMs = tApply - tComm;
    this.lastReduceEnd = tApply;

    // Every replica holds the same sums, so every section reads the same: the count stops a
    // diverged step here, the data agreement agrees, the balancer re-balances and link
    // selection picks the next step's algorithm alike on every replica.
    this.tail.read(facts);
    // Each rank sent the sum over its examples (of gradients, or of its round's change in
    // weights): divide by the examples the class trained for the mean. Every replica holds
    // the same count: a turn in which nobody trained anything (every example of it deleted)
    // applies nothing, on every replica.
    const trainedExamples = this.count.examples;
    const inv = trainedExamples > 0 ? 1 / trainedExamples : 0;
    const sq = buffers.mean(trainedExamples);
    checkSummedGradient(sq, this.config.wire, step);
    const learningRate = await this.mode.apply(step, worldSize, trainedExamples);
    // Averaging and posting the update here, and the optimizer's last time in the replica.
    timing.applyMs = this.clock.now() - tApply + (trainedExamples > 0 ? buffers.lastApplyMs : 0);

    const loss = this.metrics.lossSum * inv;
    this.position.tally.add(work.first.epoch, this.position.cursor.offset, trainedExamples, loss);
    this.position.cursor = work.end;
    this.position.step = step + work.steps;
    this.position.round++;
    const { stop, pause, admit, hashMismatch } = this.votes;
    const epochEnd = work.end.epoch !== work.first.epoch;
    if (stop) this.position.stopped = true;
    // The evaluation that closes an epoch, or the run, is owed until it has run.
    if (epochEnd || this.finished) this.position.pendingEvaluation = work.first.epoch;
    return {
      step,
      steps: work.steps,
      round: this.position.round,
      finishing: work.finishing,
      epoch: work.first.epoch,
      loss,
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

  /**
   * The global batch the next step trains from `cursor`: cut by the current shares, without
   * the ranks sitting it out (a source that decides the slices itself, own data, cuts it as
   * where the examples are says).
   */
  private nextGlobalBatch(cursor: DataCursor): GlobalBatch {
    return this.data.nextBatch(cursor, this.collective.worldSize, { weights: this.balancer.current, sitOutFrom: this.sitOutFrom });
  }

  /** This rank's examples of `batch`, then forward and backward on them in the replica; how many it trained. */
  private async computeGradients(batch: GlobalBatch, rank: number): Promise<number> {
    const tData = this.clock.now();
    const { features, labels } = this.buffers;
    const n = await this.data.readShard(batch, rank, features, labels);
    this.timing.dataMs = this.clock.now() - tData;
    if (n > 0) await this.buffers.compute(this.replica, n, this.facts, this.timing);
    return n;
  }

  /**
   * A joiner's rehearsal while the class still trains without it: one forward, backward,
   * read-back and optimizer update of a few blank examples (REHEARSAL_EXAMPLES), so that its first
   * step in the ring runs on warm kernels (a WebGPU tab compiles its shaders, V8 its CPU
   * kernels, the optimizer makes its slots). Whatever it changes, the hand-over replaces:
   * weights, optimizer state, iterations, position.
   */
  async rehearse(): Promise<void> {
    const share = Math.round(this.globalBatchSize / this.collective.worldSize);
    await this.buffers.settle();
    await this.replica.rehearse(Math.min(this.data.maxShardExamples, REHEARSAL_EXAMPLES, Math.max(1, share)));
    this.stateSync.rehearsed();
  }

  /**
   * Held-out accuracy and loss, evaluated data-parallel (evaluation.ts); null when the class
   * holds no test example (own data, none held out yet).
   */
  async evaluate(): Promise<Scores | null> {
    this.lastReduceEnd = null;
    await this.buffers.settle();
    return this.evaluation.run(this.replica, this.data, this.collective, this.position.step);
  }

  /** Fingerprint of all weights, in variable order; equal hashes mean bit-identical replicas. */
  async weightsHash(): Promise<string> {
    await this.buffers.settle();
    return this.replica.weightsHash();
  }

  /** All weights concatenated in variable order (for tests and state transfer). */
  async readWeights(): Promise<Float32Array> {
    await this.buffers.settle();
    return this.replica.readWeights();
  }

  /** Tensors alive in the replica's engine after the last step. */
  get numTensors(): number {
    return this.buffers.numTensors;
  }

  /**
   * Frees the replica. An update still on its way is applied first (the thread takes its
   * messages in order); a run checks its last update when it reads the final weights hash.
   */
  dispose(): Promise<void> {
    return this.replica.dispose();
  }
}
