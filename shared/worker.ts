/**
 * A training worker: joins a room over socket.io, keeps its ring links current with every
 * generation, and runs the synchronous training loop when the teacher starts. The same
 * class runs in a browser tab and in a headless Node worker; only the peer factory, the
 * socket and the tfjs backend differ.
 */
import * as tf from '@tensorflow/tfjs';
import type { Socket } from 'socket.io-client';
import { WebringError, toWebringError, type ErrorBody } from './errors';
import type { MnistDataset } from './mnist-format';
import type { PeerFactory } from './peer';
import type {
  JoinRequest,
  AckResult,
  Backend,
  ClientToServerEvents,
  Generation,
  JoinAccepted,
  ServerToClientEvents,
  TrainStart,
  WorkerKind,
} from './protocol';
import { RingNetwork } from './ring-network';
import { Trainer } from './trainer';
import { CheckpointWriter, type LocalCheckpointStore } from './checkpoint-writer';
import { checkpointsUrl, restoreFromServer, type CaptureContext } from './checkpoint-io';

export type WorkerState = 'idle' | 'joining' | 'ready' | 'waiting' | 'training' | 'done' | 'error';

export interface WorkerStatus {
  state: WorkerState;
  memberId: string | null;
  index: number | null;
  rank: number | null;
  worldSize: number;
  chief: boolean;
  generation: number;
  step: number;
  totalSteps: number | null;
  epoch: number;
  loss: number | null;
  trainAccuracy: number | null;
  testAccuracy: number | null;
  weightsHash: string | null;
  gradNorm: number | null;
  examplesPerSec: number;
  examplesProcessed: number;
  numTensors: number;
  backend: Backend;
  /** Whether the signaling connection is up. The ring itself does not need it between steps. */
  connected: boolean;
  /** The checkpoint this run resumed from, and the weights hash right after restoring it. */
  resumedFrom: string | null;
  resumedHash: string | null;
  /** Step of the chief's newest checkpoint stored locally and on the server (chief only). */
  lastLocalCheckpointStep: number | null;
  lastServerCheckpointStep: number | null;
  error: ErrorBody | null;
}

export interface WorkerOptions {
  socket: Socket<ServerToClientEvents, ClientToServerEvents>;
  peerFactory: PeerFactory;
  dataset: MnistDataset;
  backend: Backend;
  kind: WorkerKind;
  adapter?: string;
  /** Base URL of the signaling server's HTTP API (checkpoints). */
  serverUrl: string;
  /** The chief's own checkpoint copies; null where there is nowhere to keep them. */
  localCheckpoints: LocalCheckpointStore | null;
  onStatus(status: WorkerStatus): void;
  log(message: string): void;
}

const JOIN_TIMEOUT_MS = 10_000;

export class TrainingWorker {
  private readonly options: WorkerOptions;
  private network: RingNetwork | null = null;
  private trainer: Trainer | null = null;
  private running = false;
  private stopRequested = false;
  private latestGeneration: Generation | null = null;
  private identity: { room: string; name: string; memberId: string; memberToken: string } | null = null;
  private readonly unsent = new Map<string, unknown>();
  /** A start that arrived while the previous run was still unwinding. */
  private pendingStart: TrainStart | null = null;
  private room: string | null = null;
  private writer: CheckpointWriter | null = null;
  /** The generation at which this chief offered its local checkpoint to the server (-1: not yet). */
  private reseededAt = -1;
  private readonly status: WorkerStatus;

  constructor(options: WorkerOptions) {
    this.options = options;
    this.status = {
      state: 'idle',
      memberId: null,
      index: null,
      rank: null,
      worldSize: 0,
      chief: false,
      generation: 0,
      step: 0,
      totalSteps: null,
      epoch: 0,
      loss: null,
      trainAccuracy: null,
      testAccuracy: null,
      weightsHash: null,
      gradNorm: null,
      examplesPerSec: 0,
      examplesProcessed: 0,
      numTensors: tf.memory().numTensors,
      backend: options.backend,
      connected: options.socket.connected,
      resumedFrom: null,
      resumedHash: null,
      lastLocalCheckpointStep: null,
      lastServerCheckpointStep: null,
      error: null,
    };
    const { socket } = options;
    socket.on('ring:generation', (g) => this.onGeneration(g));
    socket.on('signal:relay', ({ from, linkId, data }) => this.network?.handleSignal(from, linkId, data));
    socket.on('train:start', (start) => void this.run(start));
    socket.on('train:stop', ({ reason }) => {
      this.options.log(`stop requested (${reason})`);
      this.stopRequested = true;
      // A membership change ends this generation's ring at once; a teacher's stop is
      // agreed through the ring so that every replica stops after the same step.
      if (reason === 'membership') this.network?.collective?.abort(new WebringError('ERR_MEMBER_LEFT', 'a ring member left'));
    });
    socket.on('server:error', (e) => this.options.log(`server error ${e.code}: ${e.message}`));
    // Training between tabs goes on without the server; only reports and new generations wait.
    socket.on('disconnect', (reason) => {
      this.options.log(`signaling connection lost (${reason})`);
      this.update({ connected: false });
    });
    socket.on('connect', () => {
      this.update({ connected: true });
      // socket.io reconnects by itself; the membership is ours to restore.
      if (this.identity) void this.rejoin();
    });
  }

  private requestJoin(request: JoinRequest): Promise<AckResult<JoinAccepted>> {
    return new Promise<AckResult<JoinAccepted>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new WebringError('ERR_TIMEOUT', 'the server did not answer the join')), JOIN_TIMEOUT_MS);
      this.options.socket.emit('room:join', request, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
    });
  }

  private joinRequest(room: string, name: string): JoinRequest {
    const { backend, kind, adapter } = this.options;
    return { room, name, kind, backend, ...(adapter ? { adapter } : {}) };
  }

  async join(room: string, name: string): Promise<JoinAccepted> {
    this.update({ state: 'joining', error: null });
    const { socket } = this.options;
    const result = await this.requestJoin(this.joinRequest(room, name));
    if (!result.ok) {
      this.update({ state: 'error', error: result.error });
      throw new WebringError(result.error.code, result.error.message);
    }
    this.identity = { room, name, memberId: result.memberId, memberToken: result.memberToken };
    this.network = new RingNetwork({
      selfId: result.memberId,
      factory: this.options.peerFactory,
      sendSignal: (to, linkId, data) => socket.emit('signal:relay', { to, linkId, data }),
      log: this.options.log,
    });
    this.room = result.room;
    this.writer = new CheckpointWriter({
      serverUrl: this.options.serverUrl,
      memberToken: result.memberToken,
      local: this.options.localCheckpoints,
      onSaved: (where, step) => {
        this.options.log(`checkpoint of step ${step} saved (${where})`);
        this.update(where === 'local' ? { lastLocalCheckpointStep: step } : { lastServerCheckpointStep: step });
      },
      onError: (e) => this.options.log(`checkpoint not saved: ${e.code} ${e.message}`),
    });
    this.update({ memberId: result.memberId, index: result.index, state: 'waiting' });
    if (this.latestGeneration) this.onGeneration(this.latestGeneration);
    return result;
  }

  close(): void {
    this.network?.close();
    this.options.socket.disconnect();
  }

  /**
   * Back on a new connection (the server restarted, or the network blipped): claim the same
   * membership. The ring may have trained on meanwhile; the reports the server missed are
   * sent again. A server that does not know us any more gets a fresh join.
   */
  private async rejoin(): Promise<void> {
    const id = this.identity!;
    const log = this.options.log;
    let result: AckResult<JoinAccepted>;
    try {
      result = await this.requestJoin({ ...this.joinRequest(id.room, id.name), rejoin: { memberId: id.memberId, memberToken: id.memberToken } });
    } catch (err) {
      log(`rejoin failed: ${toWebringError(err).message}`);
      return;
    }
    if (result.ok) {
      log(`rejoined ${id.room} as ${id.memberId}`);
      // The checkpoint the server missed goes first, so a resent end-of-run finds it stored.
      if (this.status.chief) await this.writer?.retry();
      for (const [event, payload] of this.unsent) (this.options.socket.emit as (e: string, p: unknown) => void)(event, payload);
      this.unsent.clear();
      return;
    }
    log(`the server no longer knows this tab (${result.error.code}); joining afresh`);
    this.network?.close();
    this.network = null;
    this.identity = null;
    this.latestGeneration = null;
    this.reseededAt = -1;
    this.unsent.clear();
    try {
      await this.join(id.room, id.name);
    } catch (err) {
      log(`join failed: ${toWebringError(err).message}`);
    }
  }

  /** Reports go out only while connected; the latest of each kind waits for the rejoin. */
  private report<E extends 'worker:progress' | 'worker:evaluated' | 'worker:finished'>(
    event: E,
    payload: Parameters<ClientToServerEvents[E]>[0],
  ): void {
    if (this.options.socket.connected) (this.options.socket.emit as (e: string, p: unknown) => void)(event, payload);
    else this.unsent.set(event, payload);
  }

  private onGeneration(g: Generation): void {
    const previous = this.latestGeneration;
    this.latestGeneration = g;
    if (!this.network) return; // the join ack has not arrived yet; replayed after it
    // A rejoin repeats the generation we already have: the ring must not be rebuilt for it.
    const same = previous?.generation === g.generation && this.network.collective?.generation === g.generation;
    if (!same) this.network.applyGeneration(g);
    const rank = g.members.findIndex((m) => m.id === this.status.memberId);
    this.update({
      generation: g.generation,
      rank: rank >= 0 ? rank : null,
      worldSize: g.members.length,
      chief: rank === 0,
      state: this.running ? this.status.state : rank >= 0 ? 'ready' : 'waiting',
    });
    if (rank === 0 && !this.running && this.reseededAt < 0) {
      this.reseededAt = g.generation;
      void this.reseedServer();
    }
  }

  /**
   * A new server on the same laptop has no checkpoints, but the chief's IndexedDB may: the
   * chief offers its newest one, so that the next Start resumes from it.
   */
  private async reseedServer(): Promise<void> {
    const { localCheckpoints, serverUrl } = this.options;
    const room = this.room;
    if (!localCheckpoints || !room || !this.writer) return;
    try {
      const local = await localCheckpoints.latest(room);
      if (!local) return;
      const res = await fetch(checkpointsUrl(serverUrl, room));
      if (!res.ok || ((await res.json()) as unknown[]).length > 0) return;
      this.options.log(`the server has no checkpoint; uploading the local one of step ${local.metadata.step}`);
      await this.writer.reseed(local);
    } catch (err) {
      const e = toWebringError(err);
      this.options.log(`could not offer the local checkpoint: ${e.code} ${e.message}`);
    }
  }

  private saveContext(start: TrainStart): CaptureContext {
    return { room: this.room!, run: start.run, backend: this.options.backend, members: this.latestGeneration?.members ?? [] };
  }

  private async run(start: TrainStart): Promise<void> {
    const log = this.options.log;
    if (this.running) {
      // The previous run is unwinding (its ring was just aborted); start as soon as it has.
      this.pendingStart = start;
      return;
    }
    const ring = this.network?.collective;
    if (!ring || ring.generation !== start.generation) {
      log(`start for generation ${start.generation} does not match this worker's ring; not part of this run`);
      return;
    }
    this.running = true;
    this.stopRequested = false;
    ring.setRun(start.run);
    this.trainer?.dispose();
    const trainer = new Trainer(start.config, this.options.dataset, ring);
    this.trainer = trainer;
    const { generation, run } = start;
    this.update({
      state: 'training',
      step: trainer.step,
      totalSteps: trainer.totalSteps,
      examplesProcessed: 0,
      loss: null,
      testAccuracy: null,
      error: null,
    });
    try {
      if (start.resume) {
        // BackupAndRestore: every replica loads the same checkpoint (weights, optimizer, cursor).
        await restoreFromServer(this.options.serverUrl, this.room!, start.resume.checkpointId, trainer);
        const restored = await trainer.weightsHash();
        log(`resumed from ${start.resume.checkpointId} at step ${trainer.step}`);
        this.update({ resumedFrom: start.resume.checkpointId, resumedHash: restored, step: trainer.step, epoch: trainer.epoch });
      } else {
        this.update({ resumedFrom: null, resumedHash: null });
      }
      // MWMS broadcasts the chief's variables before the first step; so do we.
      await trainer.syncFromChief();
      this.update({ weightsHash: await trainer.weightsHash() });
      const saveEvery = start.config.saveEverySteps;
      let finished: 'completed' | 'stopped' = 'completed';
      while (trainer.step < trainer.totalSteps) {
        const t0 = performance.now();
        const r = await trainer.trainStep(this.stopRequested);
        const weightsHash = await trainer.weightsHash();
        const examplesPerSec = r.examples / Math.max((performance.now() - t0) / 1000, 1e-6);
        this.update({
          step: trainer.step,
          epoch: r.epoch,
          loss: r.loss,
          trainAccuracy: r.trainAccuracy,
          gradNorm: r.gradNorm,
          weightsHash,
          examplesPerSec,
          examplesProcessed: this.status.examplesProcessed + r.examples,
          numTensors: tf.memory().numTensors,
        });
        this.report('worker:progress', {
          run,
          generation,
          step: trainer.step,
          epoch: r.epoch,
          loss: r.loss,
          trainAccuracy: r.trainAccuracy,
          examplesPerSec,
          weightsHash,
        });
        if (r.stop) {
          finished = 'stopped';
          break;
        }
        const last = trainer.step >= trainer.totalSteps;
        if (this.status.chief && !last && (trainer.step % saveEvery === 0 || r.epochEnd)) {
          await this.writer!.save(trainer, this.saveContext(start), start.config.maxToKeep);
        }
        if (r.epochEnd && !last) await this.evaluate(trainer, start, r.epoch);
      }
      // Every replica reaches the same decision, so this last evaluation stays in lock-step.
      await this.evaluate(trainer, start, trainer.epoch);
      if (this.status.chief) {
        // The run's end is always saved, and stored before the chief reports the end, so
        // that the next Start finds it.
        await this.writer!.save(trainer, this.saveContext(start), start.config.maxToKeep);
        await this.writer!.flush();
      }
      this.report('worker:finished', { run, generation, step: trainer.step, reason: finished });
      this.update({ state: 'done' });
    } catch (err) {
      const e = toWebringError(err);
      log(`training stopped: ${e.code} ${e.message}`);
      this.update({ state: 'error', error: e.toBody() });
      const membershipEnded = e.code === 'ERR_MEMBER_LEFT' || e.code === 'ERR_STALE_GENERATION';
      if (!membershipEnded) {
        this.report('worker:finished', { run, generation, step: trainer.step, reason: 'failed', code: e.code, message: e.message.slice(0, 500) });
      }
    } finally {
      this.running = false;
      const next = this.pendingStart;
      this.pendingStart = null;
      if (next) void this.run(next);
    }
  }

  private async evaluate(trainer: Trainer, start: TrainStart, epoch: number): Promise<void> {
    const accuracy = await trainer.evaluate();
    this.update({ testAccuracy: accuracy });
    this.report('worker:evaluated', { run: start.run, generation: start.generation, step: trainer.step, epoch, accuracy });
  }

  private update(patch: Partial<WorkerStatus>): void {
    Object.assign(this.status, patch);
    this.options.onStatus({ ...this.status });
  }
}
