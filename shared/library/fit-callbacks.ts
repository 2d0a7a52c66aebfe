/**
 * tfjs's callbacks on a distributed run, fed from the member's status: every member sees
 * the same all-reduced loss of each step and the same held-out loss of each epoch, so every
 * member's callbacks get the logs one worker's model.fitDataset would give. The ring does
 * not wait for them: they run in order, each awaited before the next, behind the training.
 *
 * The logs: onBatchEnd(batch, {loss}) with `batch` counted from 0 within the epoch, and
 * onEpochEnd(epoch, {loss, val_loss?}) with the epoch's mean batch loss; History records
 * the epochs' logs as tfjs's does.
 */
import * as tf from '@tensorflow/tfjs';
import type { WorkerStatus } from '../training/worker-status';
import type { EpochCount } from '../training/epoch-tally';

/** What fitDataset takes as callbacks: tfjs's (tf.callbacks.earlyStopping(), a tf.Callback) or plain objects of hooks. */
export type FitCallback = tf.CustomCallbackArgs | tf.Callback;
type Logs = Record<string, number>;

interface Hooks {
  onTrainBegin?(logs?: Logs): unknown;
  onTrainEnd?(logs?: Logs): unknown;
  onEpochBegin?(epoch: number, logs?: Logs): unknown;
  onEpochEnd?(epoch: number, logs?: Logs): unknown;
  onBatchBegin?(batch: number, logs?: Logs): unknown;
  onBatchEnd?(batch: number, logs?: Logs): unknown;
}

export class FitCallbacks {
  readonly history = new tf.History();
  private readonly hooks: Hooks[];
  private queue: Promise<void> = Promise.resolve();
  /** The epoch being trained; -1 until the run's first step says which. */
  private epoch = -1;
  private batch = 0;
  private lastStep = -1;
  /**
   * The class's account of each epoch (epoch-tally.ts), as the statuses last gave it: part
   * of the replicated state, so every member, whichever attempts of a step it saw and
   * whatever a hand-over skipped it past, closes an epoch with the same mean loss.
   */
  private readonly accounts = new Map<number, EpochCount>();
  /**
   * The open epoch's loss by step, for an epoch the account does not hold whole (a run
   * resumed from a checkpoint written before accounts): a step heard again in the same epoch
   * (the room went back to a checkpoint after a failure) takes its new value.
   */
  private epochLosses = new Map<number, number>();
  private began = false;
  private ended = false;
  /** The epoch after which a callback asked to stop (model.stopTraining): what the ring trains until the stop lands belongs to no epoch. */
  private stopAfter: number | null = null;
  private readonly epochs: number;

  constructor(
    private readonly model: tf.LayersModel,
    callbacks: FitCallback | FitCallback[] | undefined,
    params: { epochs: number; steps: number; validation: boolean },
    /** After an epoch's callbacks: whether one asked to stop (model.stopTraining, as earlyStopping sets it). */
    private readonly onEpochDone: (stopRequested: boolean) => void,
  ) {
    const list = callbacks === undefined ? [] : Array.isArray(callbacks) ? callbacks : [callbacks];
    this.hooks = [this.history as unknown as Hooks, ...list.map((c) => c as Hooks)];
    for (const c of [this.history, ...list]) {
      if (c instanceof tf.Callback || c instanceof tf.History) {
        c.setModel(model);
        c.setParams({ epochs: params.epochs, steps: params.steps, doValidation: params.validation });
      }
    }
    model.stopTraining = false;
    this.epochs = params.epochs;
  }

  private run(call: (h: Hooks) => unknown): void {
    this.queue = this.queue.then(async () => {
      for (const h of this.hooks) await call(h);
    });
  }

  /**
   * Hears a status of the member's run. A status reports each step with the epoch it trained
   * in; an epoch ends with its evaluation (evaluatedEpoch) when there is validation data,
   * else when a step of the next epoch arrives, or when the run ends.
   */
  status(s: WorkerStatus): void {
    // A member's statuses before this run began are the last run's (its 'done', its epoch).
    if (!this.began) {
      if (s.state !== 'training') return;
      this.began = true;
      this.lastStep = s.step;
      this.run((h) => h.onTrainBegin?.({}));
    }
    for (const account of s.epochs) this.accounts.set(account.epoch, account);
    if (s.step > this.lastStep && s.loss !== null) {
      this.lastStep = s.step;
      // The run's first step tells its epoch (a resumed run's may be any).
      if (this.epoch < 0) {
        this.epoch = s.epoch;
        const first = s.epoch;
        this.run((h) => h.onEpochBegin?.(first, {}));
      }
      if (s.epoch > this.epoch) this.closeEpoch(s.epoch, null);
      const loss = s.loss;
      const batch = this.batch++;
      this.epochLosses.set(s.step, loss);
      this.run((h) => h.onBatchEnd?.(batch, { batch, loss }));
    } else if (s.loss !== null && s.epoch === this.epoch && this.epochLosses.has(s.step)) {
      this.epochLosses.set(s.step, s.loss);
    }
    if (this.epoch >= 0 && s.evaluatedEpoch !== null && s.evaluatedEpoch >= this.epoch && s.testLoss !== null && this.epochLosses.size > 0) {
      this.closeEpoch(s.evaluatedEpoch + 1, s.testLoss);
    }
  }

  private closeEpoch(next: number, valLoss: number | null): void {
    const epoch = this.epoch;
    const account = this.accounts.get(epoch);
    const losses = [...this.epochLosses.values()];
    const logs: Logs = { loss: account?.whole ? account.meanLoss : losses.reduce((a, b) => a + b, 0) / Math.max(1, losses.length) };
    if (valLoss !== null) logs.val_loss = valLoss;
    // Checked as the queue reaches it: an epoch after the one whose callbacks asked to stop is not reported.
    const reported = () => this.stopAfter === null || epoch <= this.stopAfter;
    this.run((h) => (reported() ? h.onEpochEnd?.(epoch, { ...logs }) : undefined));
    this.queue = this.queue.then(() => {
      if (!reported()) return;
      if (this.model.stopTraining) this.stopAfter = epoch;
      this.onEpochDone(this.model.stopTraining);
    });
    if (!this.ended && next < this.epochs) this.run((h) => (this.stopAfter === null ? h.onEpochBegin?.(next, {}) : undefined));
    this.epoch = next;
    this.batch = 0;
    this.epochLosses = new Map();
  }

  /** The run ended: an epoch still open closes with what is known, then onTrainEnd; resolves once every callback ran. */
  async end(final: WorkerStatus | null): Promise<tf.History> {
    this.ended = true;
    if (final) this.status(final);
    await this.queue;
    // tfjs stops at the epoch's end; a stop here lands some steps later, and those steps are not an epoch.
    if (this.epochLosses.size > 0) this.closeEpoch(this.epoch + 1, null);
    this.run((h) => h.onTrainEnd?.({}));
    await this.queue;
    return this.history;
  }
}
