/**
 * One training run, from the teacher's Start to its end, as a sequence of turns. Each turn
 * adopts the newest ring, hands the chief's state over when a new ring or a weights
 * mismatch calls for it, evaluates when an epoch closed, waits while paused, and otherwise
 * trains one synchronous step: report it, check the stragglers' deadlines, checkpoint if
 * due, and switch to a generation that admits joiners once every replica voted for it. A
 * step a ring change interrupted is redone on the new ring from the chief's state.
 *
 * The server side (reports, checkpoint storage, generations) and time come in through
 * small interfaces (run-ports.ts), so a unit test runs real trainers over an in-memory
 * ring. What an admission costs is measured in join-cost.ts.
 */
import { WebringError, toWebringError, type ErrorCode } from '../protocol/errors';
import { HUB_RANK, type FinishReport, type Generation, type TrainStart } from '../protocol';
import type { LinkModel } from '../collectives/choice';
import { PeerMisbehavedError } from '../collectives/admission';
import type { CollectiveEngine } from '../collectives/collective';
import type { SecureAggregation } from '../secagg/secure-collective';
import { SecureRun } from './secure-run';
import type { Clock } from '../util/clock';
import { yieldToEventLoop } from '../util/yield';
import { Trainer, type StepResult } from './trainer';
import { StragglerDetector } from './straggler';
import type { DataSource } from '../data/data-source';
import type { Replica } from '../compute/replica';
import type { FaultInjector } from './faults';
import type { RingView } from './generation-tracker';
import type { WorkerStatus, WorkerStatusView } from './worker-status';
import { JoinCostMeter, type JoinCost } from './join-cost';
import type { RunCheckpoints, RunControl, RunGenerations, RunReporter } from './run-ports';

/** Steps/s is measured over this many recent steps. */
const STEP_RATE_WINDOW = 10;
/** The members' admission probes (ms per example) by rank; 0 for a member without one. */
const probesOf = (g: Generation | null): number[] | null => g?.members.map((m) => m.probe?.msPerExample ?? 0) ?? null;
/** Errors of a collective that a new generation heals: the step is redone from the chief's state. */
const RECOVERABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['ERR_STALE_GENERATION', 'ERR_PEER_FAILED', 'ERR_TIMEOUT', 'ERR_ABORTED', 'ERR_PEER_MISBEHAVED', 'ERR_SECAGG_MISMATCH']);

/** A member's `worker:finished` for a run that failed here (its own failure, not the class's). */
export const failedReport = (run: number, generation: number, step: number, e: WebringError): FinishReport => ({
  run,
  generation,
  step,
  reason: 'failed',
  code: e.code,
  message: e.message.slice(0, 500),
});

export interface TrainingRunOptions {
  start: TrainStart;
  /** The network whose current collective the run trains over; it must hold start.generation already. */
  network: RingView;
  generations: RunGenerations;
  reporter: RunReporter;
  checkpoints: RunCheckpoints;
  status: WorkerStatusView;
  control: RunControl;
  /** Where this replica's examples come from. */
  data: DataSource;
  /** The model and its maths (compute/replica.ts), in the device's compute thread; default one in this thread. */
  replica?: Replica;
  clock: Clock;
  faults?: FaultInjector;
  /** Masks this run's gradients; required when start.config.secureAggregation is on (shared/secagg/). */
  secure?: SecureAggregation;
  log(message: string): void;
}

export class TrainingRun {
  readonly trainer: Trainer;
  private readonly options: TrainingRunOptions;
  private ring: CollectiveEngine;
  private readonly detector = new StragglerDetector();
  /** The collective the trainer sums over (masked in a secure run), and the hold of a secure ring of two. */
  private readonly secure: SecureRun;
  /** The key of the state hand-over still owed (0 on every new ring), or null. */
  private syncKey: number | null = 0;
  /** What the admissions of this run cost, as this worker sees them. */
  private readonly joinCosts: JoinCostMeter;
  /** Join costs measured by the last step, for its progress report. */
  private joinCost: JoinCost = {};
  /** The examples the class trained per epoch, for the epoch's line in the log. */
  /** Set after a step the ring agreed to pause after; cleared on resume. */
  private holding = false;
  /** When the last turns ended and at which step: a round of local steps is many steps. */
  private readonly recentStepEnds: Array<{ at: number; step: number }> = [];
  /** The generation this run's ring belongs to. */
  private trainedOn: Generation | null;

  /** Throws ERR_STALE_GENERATION when `network` holds no ring of start.generation or newer. */
  constructor(options: TrainingRunOptions) {
    const ring = options.network.collective;
    if (!ring || ring.generation < options.start.generation) {
      throw new WebringError('ERR_STALE_GENERATION', `start for generation ${options.start.generation} does not match this worker's ring`);
    }
    this.secure = new SecureRun(options);
    this.options = options;
    this.ring = ring;
    this.trainedOn = options.network.generation;
    ring.setRun(options.start.run);
    this.trainer = new Trainer(options.start.config, options.data, this.secure.over(ring), { clock: options.clock, faults: options.faults, ...(options.replica ? { replica: options.replica } : {}) });
    this.trainer.seedShares(probesOf(options.network.generation));
    this.joinCosts = new JoinCostMeter(options.start.admitted ? options.clock.now() : null, options.status, options.log);
  }

  private get status(): Readonly<WorkerStatus> {
    return this.options.status.current;
  }

  private update(patch: Partial<WorkerStatus>): void {
    this.options.status.update(patch);
  }

  /** Trains until the run ends, stops or fails; every outcome is reported, none is thrown. */
  async execute(): Promise<void> {
    const { start, control, log } = this.options;
    const trainer = this.trainer;
    control.stopRequested = false;
    control.stopReason = null;
    this.update({
      state: 'training',
      step: trainer.step,
      totalSteps: trainer.totalSteps,
      examplesProcessed: 0,
      loss: null,
      testAccuracy: null,
      testLoss: null,
      evaluatedEpoch: null,
      epochs: trainer.tally.recent(),
      error: null,
      resyncs: 0,
      secureAggregation: start.config.secureAggregation,
      secureWait: null,
      round: trainer.round,
      localSteps: start.config.sync === 'local-steps' ? start.config.localSteps : null,
    });
    this.options.status.showRing(this.options.network.generation, true);
    try {
      await this.restoreIfResumed();
      // A joiner rehearses a step while the class dials it and votes it in: its first real
      // step then runs on warm kernels instead of holding the class up.
      if (start.admitted) await this.rehearse();
      while (!(await this.turn()));
      await this.finish();
    } catch (err) {
      const e = toWebringError(err);
      log(`training stopped: ${e.code} ${e.message}`);
      if (e.code === 'ERR_DROPPED' || this.status.state === 'dropped') return;
      if (e.code === 'ERR_RUN_ENDED' && control.stopReason === 'ended') {
        this.update({ state: 'ready' });
        return;
      }
      this.update({ state: 'error', error: e.toBody() });
      if (e.code !== 'ERR_RUN_ENDED' && e.code !== 'ERR_RUN_STALLED') this.options.reporter.report('worker:finished', failedReport(start.run, this.ring.generation, trainer.step, e));
    }
  }

  private async rehearse(): Promise<void> {
    const t0 = this.options.clock.now();
    await this.trainer.rehearse();
    this.options.log(`rehearsed a step in ${(this.options.clock.now() - t0).toFixed(0)} ms before taking part`);
  }

  /** BackupAndRestore: every replica loads the same checkpoint (weights, optimizer, cursor). */
  private async restoreIfResumed(): Promise<void> {
    const { start, checkpoints, log } = this.options;
    if (!start.resume) {
      this.update({ resumedFrom: null, resumedHash: null });
      return;
    }
    await checkpoints.restore(start.resume.checkpointId, this.trainer);
    const restored = await this.trainer.weightsHash();
    log(`resumed from ${start.resume.checkpointId} at step ${this.trainer.step}`);
    this.update({ resumedFrom: start.resume.checkpointId, resumedHash: restored, step: this.trainer.step, round: this.trainer.round, epoch: this.trainer.epoch });
  }

  /** One turn of the loop; true once the run has nothing left to train. */
  private async turn(): Promise<boolean> {
    try {
      // Heartbeats, generations and reports get their turn between steps.
      await yieldToEventLoop();
      this.adoptLatestRing();
      await this.syncIfDue();
      if (this.trainer.pendingEvaluation !== null) await this.evaluate();
      if (this.trainer.finished) return true;
      if (await this.holdWhilePaused()) return false;
      if (await this.secure.hold(this.ring.worldSize, this.trainer)) return false;
      await this.measureIfDue();
      const voted = this.options.generations.pending;
      const result = await this.step(voted);
      this.reportStep(result);
      this.checkDeadlines(result);
      await this.checkpointIfDue(result);
      this.switchIfAdmitted(result, voted);
    } catch (err) {
      // The ring this turn last trained on: adopted at the top of the turn if it was new.
      await this.recover(err, this.ring);
    }
    return false;
  }

  /** A newer generation replaced the ring: train on from the chief's state over the new one. */
  private adoptLatestRing(): void {
    const latest = this.options.network.collective;
    if (latest === this.ring) return;
    if (!latest) throw new WebringError('ERR_DROPPED', 'this worker is no longer in the ring');
    const before = this.trainedOn;
    const now = this.options.network.generation;
    this.joinCosts.ringChanged();
    this.ring = latest;
    this.trainedOn = now;
    latest.setRun(this.options.start.run);
    // The same hub: the links already measured stay measured. The models are the class's
    // means per algorithm, agreed on every replica; a member joining or leaving barely moves
    // them, while probing them again cost a class of thirty 2-3 s per change (bench:class's
    // churn). A new hub (or none) changes what the hub's model describes: measure again.
    const sameHub = before !== null && now !== null && before.hub?.id === now.hub?.id;
    this.trainer.setCollective(this.secure.over(latest), { keepLinkModels: sameHub, probeMsPerExample: probesOf(now) });
    // The first collective of every generation hands the chief's whole state to everyone:
    // survivors redo an interrupted step from it, joiners start from it.
    this.syncKey = 0;
    this.options.status.showRing(this.options.network.generation, true);
  }

  private async syncIfDue(): Promise<void> {
    if (this.syncKey === null) return;
    const { clock, log } = this.options;
    const trainer = this.trainer;
    const t0 = clock.now();
    const receivers = await trainer.syncState(this.syncKey);
    this.syncKey = null;
    const syncMs = clock.now() - t0;
    const hash = await trainer.weightsHash();
    log(
      receivers > 0
        ? `the chief's state to ${receivers} replica(s): step ${trainer.step}, ${trainer.stateLength * 4} bytes in ${syncMs.toFixed(0)} ms`
        : `replicas already agree at step ${trainer.step} (checked in ${syncMs.toFixed(0)} ms)`,
    );
    this.update({ weightsHash: hash, step: trainer.step, epoch: trainer.epoch, epochs: trainer.tally.recent(), lastSyncMs: syncMs, totalSteps: trainer.totalSteps });
    this.joinCosts.stateArrived(clock.now());
  }

  /** The evaluation owed at an epoch's end (or the run's), data-parallel over the held-out examples. */
  private async evaluate(): Promise<void> {
    const trainer = this.trainer;
    const epoch = trainer.pendingEvaluation!;
    const scores = await trainer.evaluate();
    trainer.pendingEvaluation = null;
    if (scores === null) {
      this.options.log(`epoch ${epoch}: no test example anywhere in the class to score (own data holds out 1 in 5 of each device's)`);
      return;
    }
    const { accuracy, loss: testLoss } = scores;
    const count = trainer.tally.of(epoch);
    const trained = count ? `${count.examples} examples trained${count.whole ? '' : ' since the run resumed'}` : 'no step seen';
    this.options.log(`epoch ${epoch}: ${trained}; held out: ${testLoss.toFixed(4)} nats per example, accuracy ${accuracy.toFixed(4)} over ${scores.examples}`);
    this.update({ testAccuracy: accuracy, testLoss, evaluatedEpoch: epoch });
    const { start, network } = this.options;
    this.options.reporter.report('worker:evaluated', { run: start.run, generation: network.generation?.generation ?? start.generation, step: trainer.step, epoch, accuracy, testLoss });
  }

  /** Paused after the same step as everyone: waits for resume, stop or a new generation. True while held. */
  private async holdWhilePaused(): Promise<boolean> {
    const { control, generations } = this.options;
    if (this.holding && control.pauseRequested && !control.stopRequested) {
      this.update({ state: 'paused' });
      await generations.nextChange();
      return true;
    }
    if (this.holding) {
      this.holding = false;
      this.update({ state: 'training' });
    }
    return false;
  }

  /** Every replica saw the same tail: all measure their links before this same step. */
  private async measureIfDue(): Promise<void> {
    if (!this.trainer.measureDue) return;
    const { ring: r, halvingDoubling: h } = await this.trainer.measureLinks();
    const show = (m: LinkModel | null) => (m ? `α ${m.alphaMs.toFixed(2)} ms per hop, β ${(m.betaBytesPerMs / 1e3).toFixed(1)} MB/s` : 'not measured');
    this.options.log(`links measured: ring ${show(r)}; halving-doubling ${show(h)}`);
  }

  /** One synchronous step, voting on stop, pause and the pending generation; updates the status. */
  private async step(voted: Generation | null): Promise<StepResult> {
    const { network, control, clock } = this.options;
    const trainer = this.trainer;
    const t0 = clock.now();
    const r = await trainer.trainStep({
      requestStop: control.stopRequested,
      requestPause: control.pauseRequested,
      readyFor: () => (voted !== null && network.isReadyFor(voted) ? voted.generation : null),
      meshReady: network.meshReady,
      hubReady: network.hubReady,
    });
    if (r.pause) this.holding = true;
    this.joinCost = this.joinCosts.stepEnded(clock.now(), r.examples > 0);
    const stepTimes = this.recentStepEnds;
    stepTimes.push({ at: clock.now(), step: trainer.step });
    if (stepTimes.length > STEP_RATE_WINDOW) stepTimes.shift();
    const oldest = stepTimes[0]!;
    const newest = stepTimes.at(-1)!;
    const stepsPerSec = stepTimes.length > 1 ? ((newest.step - oldest.step) * 1000) / (newest.at - oldest.at) : 0;
    const transfer = this.ring.lastTransfer;
    const weightsHash = await trainer.weightsHash();
    this.update({
      step: trainer.step,
      round: r.round,
      epoch: r.epoch,
      epochs: trainer.tally.recent(),
      totalSteps: trainer.totalSteps,
      loss: r.loss,
      trainAccuracy: r.trainAccuracy,
      gradNorm: r.gradNorm,
      weightsHash,
      examplesPerSec: r.examples / Math.max((clock.now() - t0) / 1000, 1e-6),
      examplesProcessed: this.status.examplesProcessed + r.examples,
      numTensors: this.trainer.numTensors,
      computeMs: r.computeMs[this.ring.rank] ?? 0,
      dataMs: r.timing.dataMs,
      stepsPerSec,
      linkMBps: transfer.ms > 0 ? transfer.bytes / 1e6 / (transfer.ms / 1000) : 0,
      batchShare: r.globalBatchSize > 0 ? r.examples / r.globalBatchSize : 0,
      speedVsMedian: r.speedVsMedian,
    });
    return r;
  }

  /** The step's progress report; a weights mismatch owes a hand-over from the chief. */
  private reportStep(r: StepResult): void {
    const s = this.status;
    this.options.reporter.report('worker:progress', {
      run: this.options.start.run,
      generation: this.ring.generation,
      step: this.trainer.step,
      // Where the class stands now (the data cursor's epoch), not where the turn began: after
      // an epoch's last turn, the next one. The data service's byte windows follow it, so a
      // round that reads most of an epoch is charged to that epoch's window (data-budget.ts).
      epoch: this.trainer.epoch,
      loss: r.loss,
      trainAccuracy: r.trainAccuracy,
      examplesPerSec: s.examplesPerSec,
      weightsHash: s.weightsHash!,
      totalSteps: this.trainer.totalSteps,
      computeMs: s.computeMs,
      hashChecked: r.hashChecked,
      hashMismatch: r.hashMismatch,
      batchShare: s.batchShare,
      linkMBps: s.linkMBps,
      learningRate: r.learningRate,
      speedVsMedian: r.speedVsMedian,
      round: r.round,
      bytesSent: this.ring.lastTransfer.bytes,
      roundExamples: r.globalBatchSize,
      ...this.joinCost,
      collective: {
        algorithm: r.algorithm,
        alphaMs: r.models?.ring?.alphaMs ?? 0,
        betaMBps: r.models?.ring ? r.models.ring.betaBytesPerMs / 1e3 : 0,
        reason: r.reason,
        timing: r.timing,
      },
    });
    if (r.finishing) this.options.log(r.globalBatchSize > 0 ? `round ${r.round}: summed the ${r.globalBatchSize} examples the survivors trained before a member was lost (steps ${r.step}-${r.step + r.steps - 1})` : `round ${r.round}: skipped steps ${r.step}-${r.step + r.steps - 1}, whose secure sum failed: summing them again without a member would reveal its contribution`);
    if (r.hashMismatch) {
      this.options.log(`weights differed between replicas at step ${r.step}; reloading the chief's state`);
      this.update({ resyncs: s.resyncs + 1 });
      this.syncKey = this.trainer.step;
    }
  }

  /** Every replica keeps the statistics (a new chief starts warm); the chief acts on them. */
  private checkDeadlines(r: StepResult): void {
    const { network, start, log } = this.options;
    const ring = this.ring;
    const members = network.generation?.generation === ring.generation ? network.generation.members : [];
    if (members.length !== ring.worldSize) return;
    for (const s of this.detector.observe(members.map((m) => m.id), r.computeMs)) {
      this.detector.forget(s.id);
      if (!this.status.chief) continue;
      log(`member ${s.id} missed the ${Math.round(s.deadlineMs)} ms deadline ${s.strikes} steps running; dropping it`);
      this.options.reporter.dropStraggler({ run: start.run, generation: ring.generation, member: s.id, step: this.trainer.step, computeMs: s.computeMs, deadlineMs: s.deadlineMs });
    }
  }

  private async checkpointIfDue(r: StepResult): Promise<void> {
    const { config, run } = this.options.start;
    const trainer = this.trainer;
    // A round of local steps may step over a multiple of saveEverySteps: save at the round that crossed it.
    const crossed = Math.floor(trainer.step / config.saveEverySteps) > Math.floor(r.step / config.saveEverySteps);
    if (this.status.chief && !trainer.finished && (crossed || r.epochEnd)) {
      await this.options.checkpoints.save(trainer, run, config.maxToKeep);
    }
  }

  /**
   * Every replica saw the same vote: all switch after this same step, and the next turn
   * adopts the new ring and hands the state over to the joiners.
   */
  private switchIfAdmitted(r: StepResult, voted: Generation | null): void {
    const { network, generations, log } = this.options;
    if (!r.admit || !voted || voted.generation <= (network.generation?.generation ?? -1)) return;
    log(`switching to generation ${voted.generation} after step ${r.step}`);
    this.joinCosts.switched(this.options.clock.now());
    network.applyGeneration(voted);
    generations.admitted(voted);
  }

  /** A collective a new generation heals: accuse a misbehaving sender, then wait for the new ring. */
  private async recover(err: unknown, ring: CollectiveEngine): Promise<void> {
    const e = toWebringError(err);
    if (!RECOVERABLE.has(e.code)) throw e;
    const { network, generations, reporter, log } = this.options;
    if (e instanceof PeerMisbehavedError) this.accuse(ring, e);
    log(`step interrupted (${e.code}: ${e.message}); waiting for the ring to re-form`);
    await generations.awaitRingChange(network, ring, e, this.status.memberId, (generation, reason, unreachable) =>
      reporter.askReform({ generation, reason, ...(unreachable.length > 0 ? { unreachable } : {}) }),
    );
  }

  /**
   * This worker's ring rejected a message: name its sender to the server, which checks that
   * the sender is one of ours in that generation before it evicts anyone.
   */
  private accuse(ring: CollectiveEngine, e: PeerMisbehavedError): void {
    const { network, start, reporter, log } = this.options;
    const g = network.generation;
    const member = g?.generation !== ring.generation ? undefined : e.rank === HUB_RANK ? (g.hub ?? undefined) : g.members[e.rank];
    if (!member) return; // a newer generation already replaced the ring: nothing to name
    log(`${e.rank === HUB_RANK ? 'the hub' : `rank ${e.rank}`} (${member.name}) sent bad ring data (${e.misbehaviour}); asking the server to evict it`);
    reporter.accuse(
      { run: start.run, generation: ring.generation, member: member.id, step: this.trainer.step, reason: e.misbehaviour, detail: e.message.slice(0, 200) },
      (refusal) => log(`eviction of ${member.name} refused: ${refusal.code} ${refusal.message}`),
    );
  }

  /** The run's end is always saved, and stored before the chief reports the end, so that the next Start finds it. */
  private async finish(): Promise<void> {
    const { start, checkpoints, reporter } = this.options;
    const trainer = this.trainer;
    if (this.status.chief) {
      await checkpoints.save(trainer, start.run, start.config.maxToKeep);
      await checkpoints.flush();
    }
    reporter.report('worker:finished', { run: start.run, generation: this.ring.generation, step: trainer.step, reason: trainer.stopped ? 'stopped' : 'completed' });
    this.update({ state: 'done' });
  }
}
