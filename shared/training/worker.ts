/**
 * A training worker: joins a room over socket.io, keeps its ring links current with every
 * generation, and runs the synchronous training loop when the teacher starts. The same
 * class runs in a browser tab and in a headless Node worker; only the peer factory, the
 * socket and the tfjs backend differ.
 */
import * as tf from '@tensorflow/tfjs';
import type { Socket } from 'socket.io-client';
import { ERROR_CODES, WebringError, toWebringError, type ErrorBody, type ErrorCode } from '../protocol/errors';
import type { MnistDataset } from '../data/mnist-format';
import type { PeerFactory } from '../network/peer';
import type {
  JoinRequest,
  AckResult,
  Backend,
  ClientToServerEvents,
  Generation,
  JoinAccepted,
  MemberDropped,
  ServerToClientEvents,
  SocketAuth,
  TrainStart,
  TrainStop,
  WorkerKind,
} from '../protocol';
import { RingNetwork } from '../network/ring-network';
import { Trainer } from './trainer';
import type { LinkModel } from '../collectives/choice';
import { predictDigit } from './models';
import { PeerMisbehavedError, type RingAllReduce } from '../collectives/ring-allreduce';
import { StragglerDetector } from './straggler';
import type { FaultInjector } from './faults';
import { yieldToEventLoop } from '../util/yield';
import { leftOf, rightOf } from '../collectives/topology';
import { CheckpointWriter, type LocalCheckpointStore } from '../checkpoints/checkpoint-writer';
import { checkpointsUrl, restoreFromServer, type CaptureContext } from '../checkpoints/checkpoint-io';

export type WorkerState = 'idle' | 'joining' | 'ready' | 'waiting' | 'training' | 'paused' | 'done' | 'dropped' | 'error';

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
  /** This worker's compute time of the last step (ms). */
  computeMs: number;
  /** Duration of the last state hand-over from the chief (ms): the pause a join or recovery cost. */
  lastSyncMs: number | null;
  /** For a late joiner: from the admission to holding the live state (ms). */
  joinMs: number | null;
  /** Times this replica reloaded the chief's state because the weight hashes differed. */
  resyncs: number;
  /** This worker's share of the last global batch (0..1). */
  batchShare: number;
  /** Steps per second, over the last few steps. */
  stepsPerSec: number;
  /** Measured throughput to the right neighbour in the last all-reduce (MB/s). */
  linkMBps: number;
  /** Ring neighbours' names (left, right) in the current generation. */
  neighbours: { left: string; right: string } | null;
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
  /** An error the server sent for an event without an ack (rate limits, refused reports). */
  onServerError?(error: ErrorBody): void;
  log(message: string): void;
  /** Faults a test plays on purpose; production passes none. */
  faults?: FaultInjector;
  /** Hears the ICE config (TURN credentials) of every join and rejoin, before any link is dialled. */
  onIceConfig?(ice: unknown): void;
}

const JOIN_TIMEOUT_MS = 10_000;

/** The coded error of a handshake the server's auth middleware refused, or null for a network error. */
export function refusalOf(err: Error): ErrorBody | null {
  const data = (err as Error & { data?: unknown }).data;
  if (typeof data !== 'object' || data === null) return null;
  const { code, message } = data as Record<string, unknown>;
  return typeof code === 'string' && (ERROR_CODES as readonly string[]).includes(code) && typeof message === 'string'
    ? { code: code as ErrorCode, message }
    : null;
}
/** Steps/s is measured over this many recent steps. */
const STEP_RATE_WINDOW = 10;
/** A ring that has not re-formed this long after an interrupted step gives up (the run fails). */
export const RECOVERY_TIMEOUT_MS = 60_000;
/** A broken link with nobody gone: ask the server to re-form the ring after this long. */
export const REFORM_AFTER_MS = 3_000;
/** Errors of a collective that a new generation heals: the step is redone from the chief's state. */
const RECOVERABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['ERR_STALE_GENERATION', 'ERR_PEER_FAILED', 'ERR_TIMEOUT', 'ERR_ABORTED', 'ERR_PEER_MISBEHAVED']);

/** True when `next` is `current` with members added at the end: a pure admission of joiners. */
function extendsRing(current: Generation, next: Generation): boolean {
  return (
    next.generation > current.generation &&
    next.members.length > current.members.length &&
    current.members.every((m, i) => next.members[i]?.id === m.id)
  );
}

export class TrainingWorker {
  private readonly options: WorkerOptions;
  private network: RingNetwork | null = null;
  private trainer: Trainer | null = null;
  private running = false;
  private stopRequested = false;
  private latestGeneration: Generation | null = null;
  private identity: { room: string; name: string; code: string; memberId: string; memberToken: string } | null = null;
  private readonly unsent = new Map<string, unknown>();
  /** A start that arrived while the previous run was still unwinding. */
  private pendingStart: TrainStart | null = null;
  private room: string | null = null;
  private writer: CheckpointWriter | null = null;
  /** The generation at which this chief offered its local checkpoint to the server (-1: not yet). */
  private reseededAt = -1;
  /** A generation that admits joiners, while its links open; the ring switches at a step boundary. */
  private pendingGeneration: Generation | null = null;
  private generationWaiters: Array<() => void> = [];
  private stopReason: TrainStop['reason'] | null = null;
  /** The teacher's Pause is in force (until train:resume). */
  private pauseRequested = false;
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
      computeMs: 0,
      lastSyncMs: null,
      joinMs: null,
      resyncs: 0,
      batchShare: 0,
      stepsPerSec: 0,
      linkMBps: 0,
      neighbours: null,
      error: null,
    };
    const { socket } = options;
    socket.on('ring:generation', (g) => this.onGeneration(g));
    socket.on('signal:relay', ({ from, linkId, data }) => this.network?.handleSignal(from, linkId, data));
    socket.on('train:start', (start) => void this.run(start));
    socket.on('train:stop', ({ reason }) => {
      this.options.log(`stop requested (${reason})`);
      this.stopReason = reason;
      this.pauseRequested = false;
      this.notifyGeneration();
      this.stopRequested = true;
      // A failure ends the run at once (the room goes back to a checkpoint); a teacher's
      // stop is agreed through the ring so that every replica stops after the same step.
      if (reason === 'failure') this.network?.collective?.abort(new WebringError('ERR_RUN_ENDED', 'the run ended after a failure'));
      // A joiner admitted as the run finished waits for a hand-over that will not come.
      if (reason === 'ended') this.network?.collective?.cancel(new WebringError('ERR_RUN_ENDED', 'the run ended before this worker took part'));
    });
    socket.on('member:dropped', (d) => this.onDropped(d));
    socket.on('train:pause', () => {
      this.pauseRequested = true;
    });
    socket.on('train:resume', () => {
      this.pauseRequested = false;
      this.notifyGeneration();
    });
    socket.on('server:error', (e) => {
      this.options.log(`server error ${e.code}: ${e.message}`);
      this.options.onServerError?.(e);
    });
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

  /**
   * Sends the join once this connection is let into `request.room` with `code`: the
   * handshake carries the room and its join code (the server's auth middleware checks
   * them), so a connection made for another room, or none yet, connects (again) first. A
   * refused handshake answers with its coded error (ERR_BAD_JOIN_CODE, ERR_RATE_LIMITED).
   * The join is emitted only once connected: emitted earlier it would sit in socket.io's
   * buffer and go out on the next successful connection, after a refusal too.
   */
  private async requestJoin(request: JoinRequest, code: string): Promise<AckResult<JoinAccepted>> {
    const deadline = Date.now() + JOIN_TIMEOUT_MS;
    const refused = await this.connectTo(request.room, code, JOIN_TIMEOUT_MS);
    if (refused) return { ok: false, error: refused };
    return new Promise<AckResult<JoinAccepted>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new WebringError('ERR_TIMEOUT', 'the server did not answer the join')), Math.max(0, deadline - Date.now()));
      this.options.socket.emit('room:join', request, (r) => {
        clearTimeout(timer);
        try {
          if (r.ok) this.options.onIceConfig?.(r.ice);
        } catch (err) {
          // A config this worker cannot use (another server version?) fails the join with its code.
          reject(toWebringError(err));
          return;
        }
        resolve(r);
      });
    });
  }

  /** Connects with `room` and `code` in the handshake; resolves null once in, or the refusal. */
  private connectTo(room: string, code: string, timeoutMs: number): Promise<ErrorBody | null> {
    const { socket } = this.options;
    const auth = socket.auth as Partial<SocketAuth> | undefined;
    if (socket.connected && auth?.room === room && auth.code === code) return Promise.resolve(null);
    return new Promise<ErrorBody | null>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        socket.off('connect', connected);
        socket.off('connect_error', failed);
      };
      const timer = setTimeout(() => {
        done();
        reject(new WebringError('ERR_TIMEOUT', 'the classroom server could not be reached'));
      }, timeoutMs);
      const connected = () => {
        done();
        resolve(null);
      };
      const failed = (err: Error) => {
        const body = refusalOf(err);
        if (!body) return; // a network error: socket.io retries by itself, and the timer runs on
        done();
        resolve(body);
      };
      socket.on('connect', connected);
      socket.on('connect_error', failed);
      socket.disconnect();
      socket.auth = { room, code } satisfies SocketAuth;
      socket.connect();
    });
  }

  private joinRequest(room: string, name: string): JoinRequest {
    const { backend, kind, adapter } = this.options;
    return { room, name, kind, backend, ...(adapter ? { adapter } : {}) };
  }

  /** Joins `room` with its join code (as typed or from the class link; see shared/join-code.ts). */
  async join(room: string, name: string, code: string): Promise<JoinAccepted> {
    this.update({ state: 'joining', error: null });
    const { socket } = this.options;
    const result = await this.requestJoin(this.joinRequest(room, name), code);
    if (!result.ok) {
      this.update({ state: 'error', error: result.error });
      throw new WebringError(result.error.code, result.error.message);
    }
    this.identity = { room, name, code, memberId: result.memberId, memberToken: result.memberToken };
    this.network?.close();
    const poison = this.options.faults?.poison;
    this.network = new RingNetwork({
      selfId: result.memberId,
      factory: this.options.peerFactory,
      sendSignal: (to, linkId, data) => socket.emit('signal:relay', { to, linkId, data }),
      log: this.options.log,
      poison: poison ? (step) => poison(step) : undefined,
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

  /**
   * Class probabilities for one 28×28 image (values 0..1) from this replica's live weights,
   * or null before the first run. Runs between training steps on the same backend.
   */
  async predict(image: Float32Array): Promise<Float32Array | null> {
    const model = this.trainer?.model;
    return model ? predictDigit(model, image) : null;
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
      result = await this.requestJoin({ ...this.joinRequest(id.room, id.name), rejoin: { memberId: id.memberId, memberToken: id.memberToken } }, id.code);
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
      await this.join(id.room, id.name, id.code);
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
    const network = this.network;
    const applied = network?.generation ?? null;
    const previous = this.latestGeneration;
    if (previous && g.generation < previous.generation) return; // reordered; a newer one is known
    this.latestGeneration = g;
    if (!network) return; // the join ack has not arrived yet; replayed after it
    // A rejoin repeats the generation we already have: the ring must not be rebuilt for it.
    if (applied?.generation === g.generation && network.collective?.generation === g.generation) {
      this.notifyGeneration();
      return;
    }
    const ring = network.collective;
    if (this.running && applied && ring && !ring.isAborted && extendsRing(applied, g)) {
      // Joiners only: keep training while their links open; the ring switches at a step
      // boundary once every member is ready (the vote in trainStep).
      network.prepare(g);
      this.pendingGeneration = g;
      this.options.log(`generation ${g.generation} admits ${g.members.length - applied.members.length} joiner(s); connecting`);
    } else {
      // Someone left (or this worker is not training): the old ring is over now.
      network.applyGeneration(g);
      this.pendingGeneration = null;
      this.showRing();
    }
    this.notifyGeneration();
  }

  /** Rank, world size and chief of the ring this worker trains in now. */
  private showRing(): void {
    const g = this.network?.generation;
    if (!g) return;
    const rank = g.members.findIndex((m) => m.id === this.status.memberId);
    const n = g.members.length;
    this.update({
      neighbours: rank >= 0 && n > 1 ? { left: g.members[leftOf(rank, n)]!.name, right: g.members[rightOf(rank, n)]!.name } : null,
      generation: g.generation,
      rank: rank >= 0 ? rank : null,
      worldSize: g.members.length,
      chief: rank === 0,
      state: this.running ? this.status.state : rank >= 0 ? 'ready' : this.status.state === 'dropped' ? 'dropped' : 'waiting',
    });
    if (rank === 0 && !this.running && this.reseededAt < 0) {
      this.reseededAt = g.generation;
      void this.reseedServer();
    }
  }

  private notifyGeneration(): void {
    const waiters = this.generationWaiters;
    this.generationWaiters = [];
    for (const w of waiters) w();
  }

  /**
   * After an interrupted collective: waits until a newer generation is applied. A broken
   * link with nobody gone brings no new generation by itself, so after a grace period this
   * worker asks the server to re-form the ring (links are dialled again).
   */
  private async awaitRingChange(ring: RingAllReduce, cause: WebringError): Promise<void> {
    const network = this.network!;
    const started = performance.now();
    let asked = false;
    while (network.collective === ring || (network.collective === null && network.generation?.members.some((m) => m.id === this.status.memberId))) {
      const waited = performance.now() - started;
      if (waited > RECOVERY_TIMEOUT_MS) throw new WebringError('ERR_TIMEOUT', `the ring did not re-form within ${RECOVERY_TIMEOUT_MS} ms after ${cause.code}`);
      if (!asked && waited >= REFORM_AFTER_MS && ring.generation === network.generation?.generation) {
        asked = true;
        this.options.socket.emit('ring:reform', { generation: ring.generation, reason: `${cause.code}: ${cause.message}`.slice(0, 200) });
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, REFORM_AFTER_MS);
        this.generationWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Said on pagehide: the ring re-forms without waiting for a timeout. */
  leave(): void {
    if (!this.identity) return;
    this.options.socket.emit('room:leave');
    this.identity = null;
    this.stopRequested = true;
    this.network?.close();
  }

  private onDropped(d: MemberDropped): void {
    const message =
      d.reason === 'straggler'
        ? `this device took ${Math.round(d.computeMs)} ms per step; the ring's deadline is ${Math.round(d.deadlineMs)} ms. Join again to rejoin.`
        : `evicted from the ring at step ${d.step}: ${d.detail}. Join again to rejoin.`;
    this.options.log(d.reason === 'straggler' ? `dropped from the ring as a straggler at step ${d.step}: ${message}` : message);
    this.identity = null;
    this.network?.close();
    this.network = null;
    this.update({ state: 'dropped', rank: null, chief: false, error: { code: d.reason === 'straggler' ? 'ERR_DROPPED' : 'ERR_PEER_MISBEHAVED', message } });
  }

  /**
   * This worker's ring rejected a message: name its sender to the server, which checks that
   * the sender is one of ours in that generation before it evicts anyone (Room.evict).
   */
  private accuse(ring: RingAllReduce, e: PeerMisbehavedError, run: number, step: number): void {
    const g = this.network?.generation;
    const member = g?.generation === ring.generation ? g.members[e.rank] : undefined;
    if (!member) return; // a newer generation already replaced the ring: nothing to name
    this.options.log(`rank ${e.rank} (${member.name}) sent bad ring data (${e.misbehaviour}); asking the server to evict it`);
    this.options.socket.emit(
      'ring:evict',
      { run, generation: ring.generation, member: member.id, step, reason: e.misbehaviour, detail: e.message.slice(0, 200) },
      (r) => {
        if (!r.ok) this.options.log(`eviction of ${member.name} refused: ${r.error.code} ${r.error.message}`);
      },
    );
  }

  private async reseedServer(): Promise<void> {
    const { localCheckpoints, serverUrl } = this.options;
    const room = this.room;
    if (!localCheckpoints || !room || !this.writer) return;
    try {
      const local = await localCheckpoints.latest(room);
      if (!local) return;
      // Reading the room's checkpoints takes this member's token.
      const res = await fetch(checkpointsUrl(serverUrl, room), { headers: { authorization: `Bearer ${this.identity?.memberToken ?? ''}` } });
      if (!res.ok) {
        this.options.log(`could not list the server's checkpoints: HTTP ${res.status}`);
        return;
      }
      if (((await res.json()) as unknown[]).length > 0) return;
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
    const network = this.network;
    let ring = network?.collective ?? null;
    if (!network || !ring || ring.generation < start.generation) {
      log(`start for generation ${start.generation} does not match this worker's ring; not part of this run`);
      return;
    }
    this.running = true;
    this.stopRequested = false;
    this.stopReason = null;
    ring.setRun(start.run);
    this.trainer?.dispose();
    const trainer = new Trainer(start.config, this.options.dataset, ring, { faults: this.options.faults });
    this.trainer = trainer;
    const detector = new StragglerDetector();
    const { run } = start;
    this.update({
      state: 'training',
      step: trainer.step,
      totalSteps: trainer.totalSteps,
      examplesProcessed: 0,
      loss: null,
      testAccuracy: null,
      error: null,
      resyncs: 0,
    });
    this.showRing();
    // The first collective of every generation hands the chief's whole state to everyone:
    // survivors redo an interrupted step from it, joiners start from it.
    let syncKey: number | null = 0;
    let joinedAt: number | null = start.admitted ? performance.now() : null;
    /** Set after a step the ring agreed to pause after; cleared on resume. */
    let holding = false;
    const recentStepEnds: number[] = [];
    try {
      if (start.resume) {
        // BackupAndRestore: every replica loads the same checkpoint (weights, optimizer, cursor).
        await restoreFromServer(this.options.serverUrl, this.room!, start.resume.checkpointId, trainer, this.identity?.memberToken ?? '');
        const restored = await trainer.weightsHash();
        log(`resumed from ${start.resume.checkpointId} at step ${trainer.step}`);
        this.update({ resumedFrom: start.resume.checkpointId, resumedHash: restored, step: trainer.step, epoch: trainer.epoch });
      } else {
        this.update({ resumedFrom: null, resumedHash: null });
      }
      const saveEvery = start.config.saveEverySteps;
      for (;;) {
        try {
          // Heartbeats, generations and reports get their turn between steps.
          await yieldToEventLoop();
          const latest = network.collective;
          if (latest !== ring) {
            if (!latest) throw new WebringError('ERR_DROPPED', 'this worker is no longer in the ring');
            ring = latest;
            ring.setRun(run);
            trainer.setCollective(ring);
            syncKey = 0;
            this.showRing();
          }
          if (syncKey !== null) {
            const t0 = performance.now();
            const transferred = await trainer.syncState(syncKey);
            syncKey = null;
            const syncMs = performance.now() - t0;
            const hash = await trainer.weightsHash();
            log(transferred ? `state from the chief: step ${trainer.step}, ${trainer.stateLength * 4} bytes in ${syncMs.toFixed(0)} ms` : `replicas already agree at step ${trainer.step} (checked in ${syncMs.toFixed(0)} ms)`);
            this.update({ weightsHash: hash, step: trainer.step, epoch: trainer.epoch, lastSyncMs: syncMs, totalSteps: trainer.totalSteps });
            if (joinedAt !== null) {
              this.update({ joinMs: performance.now() - joinedAt });
              joinedAt = null;
            }
          }
          if (trainer.pendingEvaluation !== null) await this.evaluate(trainer, start);
          if (trainer.finished) break;
          if (holding && this.pauseRequested && !this.stopRequested) {
            // Paused after the same step as everyone; wake on resume, stop or a new generation.
            this.update({ state: 'paused' });
            await new Promise<void>((resolve) => this.generationWaiters.push(resolve));
            continue;
          }
          if (holding) {
            holding = false;
            this.update({ state: 'training' });
          }

          if (trainer.measureDue) {
            // Every replica saw the same tail: all measure before this same step.
            const { ring: r, halvingDoubling: h } = await trainer.measureLinks();
            const show = (m: LinkModel | null) => (m ? `α ${m.alphaMs.toFixed(2)} ms per hop, β ${(m.betaBytesPerMs / 1e3).toFixed(1)} MB/s` : 'not measured');
            log(`links measured: ring ${show(r)}; halving-doubling ${show(h)}`);
          }
          const voted = this.pendingGeneration;
          const ready = voted !== null && network.isReadyFor(voted);
          const t0 = performance.now();
          const r = await trainer.trainStep({
            requestStop: this.stopRequested,
            requestPause: this.pauseRequested,
            readyFor: ready ? voted.generation : null,
            meshReady: network.meshReady,
          });
          if (r.pause) holding = true;
          const stepTimes = recentStepEnds;
          stepTimes.push(performance.now());
          if (stepTimes.length > STEP_RATE_WINDOW) stepTimes.shift();
          const stepsPerSec = stepTimes.length > 1 ? ((stepTimes.length - 1) * 1000) / (stepTimes.at(-1)! - stepTimes[0]!) : 0;
          const transfer = ring.lastTransfer;
          const linkMBps = transfer.ms > 0 ? transfer.bytes / 1e6 / (transfer.ms / 1000) : 0;
          const batchShare = r.globalBatchSize > 0 ? r.examples / r.globalBatchSize : 0;
          const weightsHash = await trainer.weightsHash();
          const examplesPerSec = r.examples / Math.max((performance.now() - t0) / 1000, 1e-6);
          const computeMs = r.computeMs[ring.rank] ?? 0;
          this.update({
            step: trainer.step,
            epoch: r.epoch,
            totalSteps: trainer.totalSteps,
            loss: r.loss,
            trainAccuracy: r.trainAccuracy,
            gradNorm: r.gradNorm,
            weightsHash,
            examplesPerSec,
            examplesProcessed: this.status.examplesProcessed + r.examples,
            numTensors: tf.memory().numTensors,
            computeMs,
            stepsPerSec,
            linkMBps,
            batchShare,
          });
          this.report('worker:progress', {
            run,
            generation: ring.generation,
            step: trainer.step,
            epoch: r.epoch,
            loss: r.loss,
            trainAccuracy: r.trainAccuracy,
            examplesPerSec,
            weightsHash,
            totalSteps: trainer.totalSteps,
            computeMs,
            hashChecked: r.hashChecked,
            hashMismatch: r.hashMismatch,
            batchShare,
            linkMBps,
            collective: {
              algorithm: r.algorithm,
              alphaMs: r.models?.ring?.alphaMs ?? 0,
              betaMBps: r.models?.ring ? r.models.ring.betaBytesPerMs / 1e3 : 0,
              timing: r.timing,
            },
          });
          if (r.hashMismatch) {
            log(`weights differed between replicas at step ${r.step}; reloading the chief's state`);
            this.update({ resyncs: this.status.resyncs + 1 });
            syncKey = trainer.step;
          }
          // Every replica keeps the statistics (a new chief starts warm); the chief acts.
          const members = network.generation?.generation === ring.generation ? network.generation.members : [];
          if (members.length === ring.worldSize) {
            for (const s of detector.observe(members.map((m) => m.id), r.computeMs)) {
              detector.forget(s.id);
              if (!this.status.chief) continue;
              log(`member ${s.id} missed the ${Math.round(s.deadlineMs)} ms deadline ${s.strikes} steps running; dropping it`);
              this.options.socket.emit('ring:drop', { run, generation: ring.generation, member: s.id, step: trainer.step, computeMs: s.computeMs, deadlineMs: s.deadlineMs });
            }
          }
          if (this.status.chief && !trainer.finished && (trainer.step % saveEvery === 0 || r.epochEnd)) {
            await this.writer!.save(trainer, this.saveContext(start), start.config.maxToKeep);
          }
          if (r.admit && voted && voted.generation > (network.generation?.generation ?? -1)) {
            // Every replica saw the same vote: all switch after this same step, and the next
            // turn adopts the new ring and hands the state over to the joiners.
            log(`switching to generation ${voted.generation} after step ${r.step}`);
            network.applyGeneration(voted);
            if (this.pendingGeneration === voted) this.pendingGeneration = null;
          }
        } catch (err) {
          const e = toWebringError(err);
          if (!RECOVERABLE.has(e.code)) throw e;
          if (e instanceof PeerMisbehavedError) this.accuse(ring, e, run, trainer.step);
          log(`step interrupted (${e.code}: ${e.message}); waiting for the ring to re-form`);
          await this.awaitRingChange(ring, e);
        }
      }
      if (this.status.chief) {
        // The run's end is always saved, and stored before the chief reports the end, so
        // that the next Start finds it.
        await this.writer!.save(trainer, this.saveContext(start), start.config.maxToKeep);
        await this.writer!.flush();
      }
      this.report('worker:finished', { run, generation: ring.generation, step: trainer.step, reason: trainer.stopped ? 'stopped' : 'completed' });
      this.update({ state: 'done' });
    } catch (err) {
      const e = toWebringError(err);
      log(`training stopped: ${e.code} ${e.message}`);
      if (e.code === 'ERR_DROPPED' || this.status.state === 'dropped') return;
      if (e.code === 'ERR_RUN_ENDED' && this.stopReason === 'ended') {
        this.update({ state: 'ready' });
        return;
      }
      this.update({ state: 'error', error: e.toBody() });
      if (e.code !== 'ERR_RUN_ENDED') {
        this.report('worker:finished', { run, generation: ring.generation, step: trainer.step, reason: 'failed', code: e.code, message: e.message.slice(0, 500) });
      }
    } finally {
      this.running = false;
      const next = this.pendingStart;
      this.pendingStart = null;
      if (next) void this.run(next);
    }
  }

  /** The evaluation owed at an epoch's end (or the run's), data-parallel over the test digits. */
  private async evaluate(trainer: Trainer, start: TrainStart): Promise<void> {
    const epoch = trainer.pendingEvaluation!;
    const accuracy = await trainer.evaluate();
    trainer.pendingEvaluation = null;
    this.update({ testAccuracy: accuracy });
    this.report('worker:evaluated', { run: start.run, generation: this.network?.generation?.generation ?? start.generation, step: trainer.step, epoch, accuracy });
  }

  private update(patch: Partial<WorkerStatus>): void {
    Object.assign(this.status, patch);
    this.options.onStatus({ ...this.status });
  }
}
