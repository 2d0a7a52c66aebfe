/**
 * Local steps (DiLoCo, Douillard et al. 2023; federated averaging, McMahan et al. 2017):
 * a turn is a round. Each rank trains its own slice of each of up to `localSteps` global
 * batches alone, with the inner optimizer (`localOptimizer` at `localLearningRate`: plain
 * SGD by default, since the replica is built with them, StartConfig replicaRecipe); then the class all-reduces once: each rank sends (weights at the last sync
 * − its local weights) × the examples it trained, so the mean is the change weighted by
 * examples (scaled by one round's usual examples per rank, so that what travels stays near
 * the change's own size, well inside fp16's range at any H); the outer optimizer (outer-optimizer.ts) moves the weights at the last sync by
 * it, identically on every replica.
 *
 * What this keeps exact:
 * - the data: the round's global batches are the same ones every-step sync trains, cut by
 *   the same plan (balanced shares, own data), so each epoch's examples are trained once;
 *   a slow device takes a smaller slice of every local step, as it does of every step. A
 *   round ends with its epoch (the evaluation closes it) and at maxSteps.
 * - the device: a local step stays on it. The replica trains the round's steps as the
 *   backend's kernels (compute/device-round.ts), with no gradient read back and no
 *   crossing to this thread until the round ends (round-legs.ts: one message there and
 *   one back a round, in legs only when its examples pass 16 MB).
 * - the replicas: outside a round every replica stands at the weights of the last sync and
 *   the inner optimizer's state of the round's start, so they are bit-identical after
 *   every outer step, the hash is compared every round, and the hand-over and the
 *   checkpoints carry that state with the outer momentum. An inner optimizer with state
 *   (Adam, when chosen) is therefore reset at every round to what it was at the run's start:
 *   no replica's history leaks into the class's state, and a joiner needs nothing of
 *   anyone's but the chief's. The drift correction's state (drift-correction.ts) is the one
 *   exception, kept per device and outside the class's state, as SCAFFOLD's cᵢ are.
 * - a lost member: the survivors keep their round's change. The next generation sums what
 *   they kept (the round is not trained again, and the lost member's slices of it are not
 *   trained in that epoch); a rank that has no change for it (a joiner) sends zeros.
 *   In a secure run nobody sends what it kept: the round is skipped. Its first sum may
 *   have been seen (by the hub, or by a rank that spoiled the check word), and that sum
 *   minus the survivors' would be the lost member's exact change.
 */
import { advance, type DataCursor, type GlobalBatch } from '../data/batch-plan';
import type { StartConfig } from '../protocol';
import type { LedgerSection } from './ledger';
import { OuterOptimizer } from './outer-optimizer';
import type { SyncModeRun, TurnHost, TurnWork } from './sync-mode-run';
import { DEFAULT_COLLECTIVE_TIMEOUT_MS } from '../collectives/ring-allreduce';
import { DriftCorrection } from './drift-correction';
import { RoundLegs } from './round-legs';

/**
 * A round's all-reduce waits for every rank's whole round of compute: this many times the
 * slowest rank's last round, when that is longer than the engine's timeout (a rank slower
 * than that is the straggler rule's to judge, between turns).
 */
const ROUND_PATIENCE_FACTOR = 4;
/** Before any round is measured, the engine's timeout per this many local steps (at least once). */
const UNMEASURED_STEPS_PER_TIMEOUT = 10;

/** The most steps the round from step `step` trains: `localSteps`, or what maxSteps leaves, at least one. */
export function roundLimit(config: Pick<StartConfig, 'localSteps' | 'maxSteps'>, step: number): number {
  return Math.max(1, config.maxSteps === undefined ? config.localSteps : Math.min(config.localSteps, config.maxSteps - step));
}

/**
 * Whether a round ends after its `steps`-th step, `batch`, whose next cursor is `next`: at
 * its limit, or with its epoch (the evaluation that closes an epoch runs between turns). So
 * a round reads the examples of one epoch only, however long it is: the data service's
 * windows, one an epoch (signaling-server/edge/data-budget.ts), rely on it.
 */
export function roundEndsAfter(steps: number, limit: number, batch: GlobalBatch, next: DataCursor): boolean {
  return steps >= limit || next.epoch !== batch.epoch;
}

/** A round's work kept until its sum is applied: what the survivors of a lost member send again. */
interface KeptRound {
  step: number;
  first: GlobalBatch;
  trained: number;
  loss: number;
  correct: number;
}

export class LocalRounds implements SyncModeRun {
  readonly hashEveryTurn = true;
  readonly stateSections: ReadonlyArray<LedgerSection<unknown>>;
  readonly outer: OuterOptimizer;
  private readonly parameterCount: number;
  /** The replica's whole state at the round's start: the weights of the last sync first. */
  private start: Float32Array | null = null;
  /** This rank's last round's change × examples, reused; valid while `kept` is set. */
  private readonly change: Float32Array;
  private kept: KeptRound | null = null;
  /**
   * What travels is the change × examples / this (a round's usual examples per rank, the
   * same on every replica): near the change's own size, so fp16 carries it at any H; the
   * outer step multiplies the mean back.
   */
  private readonly exampleScale: number;
  /** This device's drift correction, when the run corrects drift; null otherwise. */
  private readonly correction: DriftCorrection | null;
  /** The round's examples on their way to the replica, made at the first round (the data source's sizes are known by then). */
  private legs: RoundLegs | null = null;

  constructor(
    private readonly host: TurnHost,
    private readonly config: Pick<StartConfig, 'localSteps' | 'maxSteps' | 'batchSizePerWorker' | 'outerOptimizer' | 'outerLearningRate' | 'outerMomentum' | 'secureAggregation' | 'localCorrection'>,
  ) {
    this.exampleScale = config.localSteps * config.batchSizePerWorker;
    this.parameterCount = host.replica.parameterCount;
    this.outer = new OuterOptimizer(config, this.parameterCount);
    this.change = new Float32Array(this.parameterCount);
    this.stateSections = [this.outer.section];
    this.correction = config.localCorrection === 'scaffold' ? new DriftCorrection(this.parameterCount) : null;
  }

  async contribute(rank: number, worldSize: number): Promise<TurnWork> {
    const { host } = this;
    const { position, buffers, replica, clock } = host;
    await buffers.settle();
    // The weights of the last sync and the inner state every round starts from.
    this.start = await replica.readState();
    const finishing = position.finishing;
    if (finishing) return this.finish(finishing.end, finishing.steps);
    const step = position.step;
    const limit = roundLimit(this.config, step);
    const { facts, timing } = host;
    const legs = (this.legs ??= new RoundLegs(this.parameterCount, buffers.features.length / host.data.maxShardExamples, host.data.maxShardExamples, this.config.localSteps));
    const sum = { loss: 0, correct: 0, dataMs: 0, computeMs: 0, readbackMs: 0, crossMs: 0 };
    let cursor = position.cursor;
    let first: GlobalBatch | null = null;
    let steps = 0;
    let trained = 0;
    let trainedSteps = 0;
    const drift = this.correction?.drift() ?? null;
    let opened = false;
    let ended = false;
    let finished = false;
    try {
      // The round's steps in legs (a default round is one): the network thread reads each
      // step's shard, and the replica trains a leg's steps on the device without a crossing.
      while (!ended) {
        const tData = clock.now();
        let k = 0;
        while (k < legs.capacity && !ended) {
          const batch = host.nextBatch(cursor);
          first ??= batch;
          host.endSitOut();
          const slot = legs.slot(k);
          const n = batch.slices[rank]! > 0 ? await host.data.readShard(batch, rank, slot.features, slot.labels) : 0;
          legs.set(k, n, host.rateAt(step + steps, worldSize));
          trained += n;
          if (n > 0) trainedSteps++;
          steps++;
          k++;
          cursor = advance(batch, host.data.trainCount);
          ended = roundEndsAfter(steps, limit, batch, cursor);
        }
        sum.dataMs += clock.now() - tData;
        const done = await legs.train(replica, k, { first: !opened, last: ended, drift: opened ? null : drift });
        opened = true;
        finished = ended;
        sum.loss += done.loss;
        sum.correct += done.correct;
        sum.computeMs += done.computeMs;
        sum.readbackMs += done.readbackMs;
        sum.crossMs += done.crossMs;
        buffers.numTensors = done.numTensors;
      }
    } finally {
      // A round that did not finish (a data source or the replica failed): back to the
      // class's state, so a hand-over, a hash or a checkpoint never sees local weights. A
      // finished round's last leg left the replica there.
      if (!finished) await replica.writeState(this.start);
    }
    const local = legs.weights;
    const anchor = this.start;
    const change = this.change;
    const weight = trained / this.exampleScale;
    for (let i = 0; i < change.length; i++) change[i] = (anchor[i]! - local[i]!) * weight;
    if (trainedSteps > 0) this.correction?.trained(anchor, local, trainedSteps);
    else this.correction?.reset();
    buffers.flat.set(this.change);
    Object.assign(timing, { dataMs: sum.dataMs, computeMs: sum.computeMs, readbackMs: sum.readbackMs, crossMs: sum.crossMs });
    facts.loss = sum.loss;
    facts.correct = sum.correct;
    this.kept = { step, first: first!, trained, loss: sum.loss, correct: sum.correct };
    position.finishing = { end: cursor, steps };
    return { first: first!, end: cursor, steps, trained, finishing: false };
  }

  /** The round the survivors trained before a member was lost: what this rank kept of it, or zeros (always, in a secure run). */
  private finish(end: TurnWork['end'], steps: number): TurnWork {
    const { host } = this;
    const kept = !this.config.secureAggregation && this.kept?.step === host.position.step ? this.kept : null;
    const first = kept?.first ?? host.nextBatch(host.position.cursor);
    host.endSitOut();
    host.facts.loss = kept?.loss ?? 0;
    host.facts.correct = kept?.correct ?? 0;
    if (kept) host.buffers.flat.set(this.change);
    else this.correction?.reset();
    return { first, end, steps, trained: kept?.trained ?? 0, finishing: true };
  }

  patienceMs(slowestLastMs: number): number {
    if (slowestLastMs > 0) return ROUND_PATIENCE_FACTOR * slowestLastMs;
    return DEFAULT_COLLECTIVE_TIMEOUT_MS * Math.max(1, Math.ceil(this.config.localSteps / UNMEASURED_STEPS_PER_TIMEOUT));
  }

  async apply(step: number, worldSize: number, examples: number): Promise<number> {
    const { host } = this;
    const start = this.start!;
    if (examples > 0) {
      this.correction?.summed(host.buffers.flat, this.exampleScale);
      // The trainer divided the sum by the class's examples; what travelled was scaled down by exampleScale.
      this.outer.step(start.subarray(0, this.parameterCount), host.buffers.flat, this.exampleScale);
      await host.replica.writeState(start);
    }
    this.kept = null;
    host.position.finishing = null;
    // The inner rate of the round's first step: what the teacher's page shows for it.
    return host.rateAt(step, worldSize);
  }
}
