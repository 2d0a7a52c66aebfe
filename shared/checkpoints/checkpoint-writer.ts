/**
 * The chief's checkpoint writer (only rank 0 ever calls it). A save reads the replica's
 * state at once, then writes it to the local store (IndexedDB in a tab) and to the server
 * in the background, one checkpoint at a time, so training goes on while bytes move.
 */
import { WebringError, toWebringError, type ErrorBody } from '../protocol/errors';
import type { CheckpointInfo } from './checkpoint';
import { CHECKPOINT_UPLOAD_TIMEOUT_MS, captureCheckpoint, uploadCheckpoint, type CaptureContext, type CapturedCheckpoint, type FetchLike } from './checkpoint-io';
import type { ReplicaState } from './replica-state';
import { systemClock, type Clock } from '../util/clock';
import { withDeadline } from '../util/deadline';

/**
 * The chief's final flush (before it reports the run's end) gives up after this long: a
 * local save and an upload, each with its own deadline, plus whatever was queued before.
 */
export const CHECKPOINT_FLUSH_TIMEOUT_MS = 3 * CHECKPOINT_UPLOAD_TIMEOUT_MS;

/**
 * Where the chief keeps its own copies: IndexedDB in a tab (each loads with
 * tf.loadLayersModel('indexeddb://…')); tests pass a map. Nothing uploads them later: the
 * server takes checkpoints only during a run and near the class's step (docs/security.md).
 */
export interface LocalCheckpointStore {
  save(checkpoint: CapturedCheckpoint, maxToKeep: number): Promise<void>;
}
/** A store, none, or a function asked at each save: a program's fitDataset picks its `backup` after joining. */
export type LocalCheckpoints = LocalCheckpointStore | null | (() => LocalCheckpointStore | null);

export interface CheckpointWriterOptions {
  serverUrl: string;
  memberToken: string;
  local: LocalCheckpoints;
  fetchImpl?: FetchLike;
  /** Times the uploads' and the flush's deadlines; the system clock by default. */
  clock?: Clock;
  /** Overrides CHECKPOINT_UPLOAD_TIMEOUT_MS. */
  uploadTimeoutMs?: number;
  /** Overrides CHECKPOINT_FLUSH_TIMEOUT_MS. */
  flushTimeoutMs?: number;
  onSaved(where: 'local' | 'server', step: number, info: CheckpointInfo | null): void;
  onError(error: ErrorBody): void;
}

export class CheckpointWriter {
  private queue: Promise<void> = Promise.resolve();
  /** The newest checkpoint the server did not take (it was down, say); offered again by retry(). */
  private unsent: CapturedCheckpoint | null = null;

  constructor(private readonly options: CheckpointWriterOptions) {}

  /** Captures now (awaited: the next step may not start before), writes in the background. */
  async save(trainer: ReplicaState, ctx: CaptureContext, maxToKeep: number): Promise<void> {
    const checkpoint = await captureCheckpoint(trainer, ctx);
    this.queue = this.queue.then(() => this.write(checkpoint, maxToKeep));
  }

  /** Uploads the newest checkpoint that failed to reach the server, if any (after a reconnect). */
  retry(): Promise<void> {
    const pending = this.unsent;
    if (!pending) return this.queue;
    this.queue = this.queue.then(() => (this.unsent === pending ? this.upload(pending) : undefined));
    return this.queue;
  }

  /**
   * Resolves once every queued write has finished (successfully or not); fails with
   * ERR_TIMEOUT when they take longer than the flush deadline.
   */
  flush(): Promise<void> {
    const ms = this.options.flushTimeoutMs ?? CHECKPOINT_FLUSH_TIMEOUT_MS;
    const queue = this.queue;
    return withDeadline(ms, () => new WebringError('ERR_TIMEOUT', `the final checkpoint flush timed out after ${ms} ms`), () => queue, this.options.clock ?? systemClock);
  }

  private async write(checkpoint: CapturedCheckpoint, maxToKeep: number): Promise<void> {
    const { onSaved, onError } = this.options;
    const local = typeof this.options.local === 'function' ? this.options.local() : this.options.local;
    if (local) {
      try {
        await local.save(checkpoint, maxToKeep);
        onSaved('local', checkpoint.metadata.step, null);
      } catch (err) {
        onError(toWebringError(err).toBody());
      }
    }
    await this.upload(checkpoint);
  }

  private async upload(checkpoint: CapturedCheckpoint): Promise<void> {
    const { serverUrl, memberToken, fetchImpl, clock, uploadTimeoutMs, onSaved, onError } = this.options;
    try {
      const info = await uploadCheckpoint(serverUrl, memberToken, checkpoint, { fetchImpl, clock, timeoutMs: uploadTimeoutMs });
      if (this.unsent === checkpoint) this.unsent = null;
      onSaved('server', checkpoint.metadata.step, info);
    } catch (err) {
      const e = toWebringError(err);
      // Refusals are final (no longer chief, bad data); a network failure or a server that
      // never answered is worth a retry, and so is a step past the reports the server has:
      // this tab's progress reports were held back by a broken connection, and the rejoin
      // resends them before it retries. So is a server busy with another upload of the room
      // (a chief that just took over, while its predecessor's is still arriving).
      if (e.code === 'ERR_UNREACHABLE' || e.code === 'ERR_TIMEOUT' || e.code === 'ERR_STEP_OUT_OF_RANGE' || e.code === 'ERR_RATE_LIMITED') {
        if (!this.unsent || this.unsent.metadata.step <= checkpoint.metadata.step) this.unsent = checkpoint;
      }
      onError(e.toBody());
    }
  }
}
