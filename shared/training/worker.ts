/**
 * The folder shared/training/ owns what a replica does: the trainer (one synchronous
 * data-parallel step), the training run (the loop from Start to the end), the worker that
 * puts a run on a ring and a room, where the examples come from, the models, straggler
 * detection, the replicas' agreement votes, and the faults tests play. It may import
 * protocol/, collectives/, network/, checkpoints/, data/ and util/; nothing imports it but
 * the pages, the Node worker, checkpoints/ (for the Trainer type) and tests.
 *
 * A training worker: joins a room over socket.io, keeps its ring links current with every
 * generation, and runs a TrainingRun when the teacher starts. The same class runs in a tab
 * and in a Node worker; only the peer factory, the socket and the tfjs backend differ.
 */
import type { Socket } from 'socket.io-client';
import { WebringError, toWebringError, type ErrorBody } from '../protocol/errors';
import type { PeerFactory } from '../network/peer';
import { type ClientToServerEvents, type DeviceClass, type DeviceProbe, type Generation, type JoinAccepted, type JoinRequest, type MemberDropped, type ServerToClientEvents, type TrainStart, type TrainStop, type WorkerKind, type CollectSetting } from '../protocol';
import { RingNetwork } from '../network/ring-network';
import { SocketRelay, withRelay } from '../network/relay-link';
import { NetworkCheck, timeModelOnce } from './network-check';
import type { Trainer } from './trainer';
import { CheckpointWriter, type LocalCheckpoints } from '../checkpoints/checkpoint-writer';
import { restoreFromServer } from '../checkpoints/checkpoint-io';
import { systemClock, type Clock } from '../util/clock';
import type { FaultInjector } from './faults';
import type { DataFactory, DataSource } from '../data/data-source';
import { runData, type OwnRun } from '../data/run-data';
import { collectLabelsOf } from '../tasks/collect';
import type { OwnExamples } from '../data/own-examples';
import { SignalingSession } from './signaling-session';
import { GenerationTracker } from './generation-tracker';
import { LinkWatchdog } from './link-watchdog';
import { DropPolicy } from './drops';
import { WorkerStatusView, type WorkerStatus } from './worker-status';
import { TrainingRun, failedReport } from './training-run';
import { stopRun } from './run-stop';
import { SecureKeys } from './secure-keys';
import { OwnCounts } from './own-counts';
import type { RunCheckpoints, RunControl } from './run-ports';
import type { Compute, ProbeWorkload } from '../compute/compute';
import type { Replica } from '../compute/replica';
import { programDataFor, replicaSpecFor, type ProgramSlot } from './run-workload';

export interface WorkerOptions {
  socket: Socket<ServerToClientEvents, ClientToServerEvents>;
  /** Null: this device opens no WebRTC link, and every link goes through the server (relay-link.ts). */
  peerFactory: PeerFactory | null;
  /** Where each run's examples come from; by default the task's dataset from the data service (streamed-dataset.ts), or this device's own examples. */
  data?: DataFactory;
  /** This device's own examples for a run of a task and classes (own-examples.ts), null where it holds none. They never leave it. */
  ownExamples?: (run: OwnRun) => OwnExamples | null;
  /** Hears what the room collects (the join reply, then `room:collect`): its task and classes, or null. */
  onCollect?(collect: CollectSetting | null): void;
  /** The device's maths: tfjs, its backend and the replicas, in a compute thread or in this one (compute/compute.ts). */
  compute: Compute;
  kind: WorkerKind;
  /** What kind of device this is, for the admission probe ('node' for a Node worker by default). */
  device: DeviceClass;
  /** Base URL of the signaling server's HTTP API (checkpoints). */
  serverUrl: string;
  /** The chief's own checkpoint copies; null where there is nowhere to keep them. */
  localCheckpoints: LocalCheckpoints;
  onStatus(status: WorkerStatus): void;
  /** An error the server sent for an event without an ack (rate limits, refused reports). */
  onServerError?(error: ErrorBody): void;
  log(message: string): void;
  /** Faults a test plays on purpose; production passes none. */
  faults?: FaultInjector;
  /** Times every wait and measurement; the system clock by default. */
  clock?: Clock;
  /** Hears the ICE config (TURN credentials) of every join and rejoin, before any link is dialled. */
  onIceConfig?(ice: unknown): void;
  /** The program a run of a program's model trains (run-workload.ts); absent in the classroom's pages. */
  program?: ProgramSlot;
}

export class TrainingWorker {
  private readonly options: WorkerOptions;
  private readonly clock: Clock;
  private readonly session: SignalingSession;
  private readonly generations: GenerationTracker;
  /** Names the ring neighbours whose links stay shut, so that the server sheds them (link-watchdog.ts). */
  private readonly linkWatchdog: LinkWatchdog;
  /** Secure aggregation's keys, generation by generation, while a secure run is on. */
  private readonly secureKeys: SecureKeys;
  /** Links try WebRTC first, else go through the server over this socket (relay-link.ts). */
  private readonly relay: SocketRelay;
  /** What a drop shows, and when to join again after it (drops.ts). */
  private readonly drops = new DropPolicy();
  private readonly status: WorkerStatusView;
  private readonly control: RunControl = { stopRequested: false, stopReason: null, pauseRequested: false };
  private network: RingNetwork | null = null;
  /** The last run's trainer: its weights answer predict() after the run too. */
  private trainer: Trainer | null = null;
  private running = false;
  /** Ends the running run's fetches of examples (with the run, or at once on a stall: run-stop.ts). */
  private runFetches: AbortController | null = null;
  /** A start that arrived while the previous run was still unwinding. */
  private pendingStart: TrainStart | null = null;
  /** A start handled before this worker's join reply (a slow device reads reply, generation and Start at once). */
  private startBeforeJoined: TrainStart | null = null;
  private room: string | null = null;
  private writer: CheckpointWriter | null = null;
  /** This device's admission probe, run once before the first join (prepare); null if it failed. */
  private probe: Promise<DeviceProbe | null> | null = null;
  /** This device's own examples per class, as the server hears them (counts only). */
  private readonly ownCounts = new OwnCounts(
    (counts) => this.session.report('worker:own-examples', { counts }),
    () => this.session.identity !== null,
  );

  constructor(options: WorkerOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
    const { socket, log } = options;
    this.session = new SignalingSession(socket, this.clock, options.onIceConfig);
    this.generations = new GenerationTracker(this.clock, log);
    this.linkWatchdog = new LinkWatchdog({
      clock: this.clock,
      unreachableIn: (g) => this.network?.unreachableIn(g) ?? null,
      latest: () => this.generations.latest,
      report: (request) => this.session.askReform(request),
      log,
    });
    this.status = new WorkerStatusView({ backend: options.compute.info.backend, connected: socket.connected, numTensors: 0 }, options.onStatus);
    this.secureKeys = new SecureKeys(socket, this.clock, log);
    this.relay = new SocketRelay(socket, log);
    const timeModel = (w: ProbeWorkload) => timeModelOnce(options.compute, options.device, this.prepare(), w, log);
    new NetworkCheck({ session: this.session, serverUrl: options.serverUrl, links: () => this.network?.probeLinks() ?? Promise.resolve([]), timeModel, clock: this.clock, log });
    socket.on('ring:generation', (g) => this.onGeneration(g));
    socket.on('signal:relay', ({ from, linkId, data }) => this.network?.handleSignal(from, linkId, data));
    socket.on('train:start', (start) => {
      this.ownCounts.runStarting(start.config);
      void this.startRun(start);
    });
    socket.on('room:collect', (collect) => this.heardCollect(collect));
    socket.on('train:stop', ({ reason }) => this.onStop(reason));
    socket.on('member:dropped', (d) => this.onDropped(d));
    socket.on('train:pause', () => {
      this.control.pauseRequested = true;
    });
    socket.on('train:resume', () => {
      this.control.pauseRequested = false;
      this.generations.notify();
    });
    socket.on('server:error', (e) => {
      log(`server error ${e.code}: ${e.message}`);
      options.onServerError?.(e);
    });
    // Training between tabs goes on without the server; only reports and new generations wait.
    socket.on('disconnect', (reason) => {
      log(`signaling connection lost (${reason})`);
      this.status.update({ connected: false });
    });
    socket.on('connect', () => {
      this.status.update({ connected: true });
      // socket.io reconnects by itself; the membership is ours to restore.
      if (this.session.identity) void this.rejoin();
    });
  }

  /** Joins `room` with its join code (as typed or from the class link; see protocol/join-code.ts). */
  async join(room: string, name: string, code: string): Promise<JoinAccepted> {
    this.status.update({ state: 'joining', error: null });
    const probe = await this.prepare();
    const result = await this.session.requestJoin({ ...this.joinRequest(room, name), ...(probe ? { probe } : {}) }, code);
    if (!result.ok) {
      this.status.update({ state: 'error', error: result.error });
      throw new WebringError(result.error.code, result.error.message);
    }
    this.session.identity = { room, name, code, memberId: result.memberId, memberToken: result.memberToken };
    this.network?.close();
    const faults = this.options.faults;
    this.network = new RingNetwork({
      selfId: result.memberId,
      // The silent fault answers nobody, through the relay neither: no relay around its links.
      factory: faults?.noPeerLinks && this.options.peerFactory ? this.options.peerFactory : withRelay(this.options.peerFactory, { relay: this.relay, clock: this.clock, log: this.options.log }),
      sendSignal: faults?.noPeerLinks ? () => undefined : (to, linkId, data) => this.session.relaySignal(to, linkId, data),
      log: this.options.log,
      poison: faults?.poison ? (step) => faults.poison!(step) : undefined,
    });
    this.room = result.room;
    this.writer = new CheckpointWriter({
      serverUrl: this.options.serverUrl,
      memberToken: result.memberToken,
      local: this.options.localCheckpoints,
      clock: this.clock,
      onSaved: (where, step) => {
        this.options.log(`checkpoint of step ${step} saved (${where})`);
        this.status.update(where === 'local' ? { lastLocalCheckpointStep: step } : { lastServerCheckpointStep: step });
      },
      onError: (e) => this.options.log(`checkpoint not saved: ${e.code} ${e.message}`),
    });
    this.status.update({ memberId: result.memberId, index: result.index, state: 'waiting' });
    this.heardCollect(result.collect);
    if (this.generations.latest) this.onGeneration(this.generations.latest);
    // A start that overtook this join's reply runs now that the ring exists.
    const overtaken = this.startBeforeJoined;
    this.startBeforeJoined = null;
    if (overtaken) void this.startRun(overtaken);
    return result;
  }

  /** Output probabilities for `n` examples (n × F numbers) from the live weights, n × outputs; null before the first run (the try panels). */
  async predict(features: Float32Array, n = 1): Promise<Float32Array | null> {
    return this.replica ? this.replica.predict(features, n) : null;
  }

  /** The last run's replica (its weights outlive the run), or null before any run. */
  get replica(): Replica | null { return this.trainer?.replica ?? null; }

  /** This tab's member token while it is a member, for its reads of the room (never the join code); null before joining. */
  get memberToken(): string | null { return this.session.identity?.memberToken ?? null; }

  close(): void {
    this.linkWatchdog.stop(); // its timer would hold a finished Node process open until it fires
    this.network?.close();
    this.generations.notify(); // a run waiting for its ring to re-form finds it gone now
    this.session.disconnect();
  }

  /** Said on pagehide: the ring re-forms without waiting for a timeout. */
  leave(): void {
    if (!this.session.identity) return;
    this.session.leave();
    this.control.stopRequested = true;
    this.network?.close();
    this.generations.notify();
  }

  /** The admission probe, once, before any join: a tab runs it while its student types a name. */
  prepare = (): Promise<DeviceProbe | null> => (this.probe ??= this.runProbe());

  /**
   * The admission probe (device-probe.ts): prepares the backend and the default model's
   * kernels, and measures this device, before it joins. A failure is logged and shown, and
   * the worker joins unmeasured: the ring then measures it in its first steps.
   */
  private async runProbe(): Promise<DeviceProbe | null> {
    const { log, device } = this.options;
    try {
      const { compute } = this.options;
      const probe = await compute.probe(device, this.options.faults?.slowMsPerExample?.(0));
      log(`admission probe: ${probe.device}, ${probe.model} ${probe.msPerExample.toFixed(2)} ms per example on ${compute.info.backend}`);
      this.status.update({ probe, numTensors: await compute.numTensors() });
      return probe;
    } catch (err) {
      const e = toWebringError(err);
      log(`admission probe failed (${e.code}: ${e.message}); joining unmeasured`);
      return null;
    }
  }

  private joinRequest(room: string, name: string): JoinRequest {
    const { kind, compute } = this.options;
    const { backend, adapter } = compute.info;
    return { room, name, kind, backend, ...(adapter ? { adapter } : {}) };
  }

  /**
   * Back on a new connection (the server restarted, or the network blipped): claim the same
   * membership. The ring may have trained on meanwhile; the reports the server missed are
   * sent again. A server that does not know us any more gets a fresh join.
   */
  private async rejoin(): Promise<void> {
    const id = this.session.identity!;
    const log = this.options.log;
    let result;
    try {
      const probe = await this.probe;
      result = await this.session.requestJoin({ ...this.joinRequest(id.room, id.name), ...(probe ? { probe } : {}), rejoin: { memberId: id.memberId, memberToken: id.memberToken } }, id.code);
    } catch (err) {
      log(`rejoin failed: ${toWebringError(err).message}`);
      return;
    }
    if (result.ok) {
      log(`rejoined ${id.room} as ${id.memberId}`);
      // Progress first: the server stores a checkpoint only up to the step the class has
      // reported (signaling-server/rooms/checkpoint-guard.ts). Then the checkpoint it missed,
      // so that a resent end-of-run finds it stored.
      this.session.resendUnsent(['worker:progress']);
      if (this.status.current.chief) await this.writer?.retry();
      this.session.resendUnsent();
      this.heardCollect(result.collect);
      return;
    }
    log(`the server no longer knows this tab (${result.error.code}); joining afresh`);
    await this.joinAfresh(id);
  }

  /** A fresh membership in the same room, under the same name: the old one is forgotten. */
  private async joinAfresh(id: { room: string; name: string; code: string }): Promise<void> {
    this.network?.close();
    this.network = null;
    this.session.identity = null;
    this.generations.reset();
    this.session.dropUnsent();
    try {
      await this.join(id.room, id.name, id.code);
    } catch (err) {
      this.options.log(`join failed: ${toWebringError(err).message}`);
    }
  }

  private onGeneration(g: Generation): void {
    const outcome = this.generations.receive(g, this.network, this.running);
    if (outcome === 'applied') this.showRing();
    if (outcome === 'stale' || outcome === 'deferred') return;
    const self = this.session.identity?.memberId ?? null;
    this.secureKeys.generation(g, self);
    if (g.members.some((m) => m.id === self)) this.linkWatchdog.watch(g);
    else this.linkWatchdog.stop();
  }

  private onStop(reason: TrainStop['reason']): void {
    this.options.log(`stop requested (${reason})`);
    const { control, clock, runFetches: data } = this;
    const ring = this.network?.collective ?? null;
    stopRun(reason, { control, clock, ring, data, wake: () => this.generations.notify(), running: () => this.running && this.runFetches === data, giveUp: (e) => this.giveUp(e) });
  }

  /** A run that could not stop (run-stop.ts): this device leaves the room, and its page says why. */
  private giveUp(error: WebringError): void {
    this.options.log(error.message);
    this.leave();
    this.status.update({ state: 'error', rank: null, chief: false, error: error.toBody() });
  }

  private onDropped(d: MemberDropped): void {
    const { error, rejoinInMs, reprobe } = this.drops.dropped(d, this.clock.now());
    if (reprobe) this.probe = null; // the next join measures this device again (drops.ts)
    this.options.log(`dropped from the ring at step ${d.step} (${d.reason}): ${error.message}`);
    const id = this.session.identity;
    this.session.identity = null;
    this.linkWatchdog.stop();
    this.network?.close();
    this.network = null;
    this.status.update({ state: 'dropped', rank: null, chief: false, error });
    if (!id || rejoinInMs === null) return;
    this.options.log(`joining again in ${rejoinInMs} ms`);
    this.clock.setTimeout(() => {
      if (!this.session.identity) void this.joinAfresh(id);
    }, rejoinInMs);
  }

  /** Rank, world size and chief of the ring this worker is in now. */
  private showRing(): void {
    this.status.showRing(this.network?.generation ?? null, this.running);
  }

  private async startRun(start: TrainStart): Promise<void> {
    if (this.running) {
      // The previous run is unwinding (its ring was just aborted); start as soon as it has.
      this.pendingStart = start;
      return;
    }
    const network = this.network;
    if (!network && this.status.current.state === 'joining') {
      this.startBeforeJoined = start;
      return;
    }
    const ring = network?.collective ?? null;
    if (!network || !ring || ring.generation < start.generation) {
      this.options.log(`start for generation ${start.generation} does not match this worker's ring; not part of this run`);
      return;
    }
    this.running = true;
    this.status.update({ task: start.config.task, classes: start.config.classes });
    // Ends the run's fetches: a data service retried for a run that is over wastes the class's link.
    const dataAbort = (this.runFetches = new AbortController());
    try {
      await this.trainer?.dispose();
      this.trainer = null;
      const secure = this.secureKeys.runStarting(start.config, start.run, start.generation);
      const replica = await this.options.compute.createReplica(replicaSpecFor(start.config, this.options.program ?? null, this.options.faults?.busyComputeMs));
      const run = new TrainingRun({
        replica,
        start,
        network,
        generations: this.generations,
        reporter: this.session,
        checkpoints: this.runCheckpoints(),
        status: this.status,
        control: this.control,
        data: this.runData(start, dataAbort.signal),
        clock: this.clock,
        faults: this.options.faults,
        ...(secure ? { secure } : {}),
        log: this.options.log,
      });
      this.trainer = run.trainer;
      await run.execute();
    } catch (err) {
      // The run never began here (no replica, no keys): the class hears that this member failed.
      const e = toWebringError(err);
      this.options.log(`could not take part in run ${start.run}: ${e.code} ${e.message}`);
      this.status.update({ state: 'error', error: e.toBody() });
      this.session.report('worker:finished', failedReport(start.run, start.generation, start.startStep, e));
    } finally {
      dataAbort.abort();
      this.secureKeys.runEnded();
      this.running = false;
      const next = this.pendingStart;
      this.pendingStart = null;
      if (next) void this.startRun(next);
    }
  }

  /** This device's own examples per class (counts only: own-examples.ts), for the teacher: sent now if joined, and after every join. */
  reportOwnExamples(counts: Record<string, number>): void {
    this.ownCounts.report(counts);
  }

  /** What the room collects changed (or a join told it): the counts follow its labels. */
  private heardCollect(collect: CollectSetting | null): void {
    this.options.onCollect?.(collect);
    this.ownCounts.collecting(collect ? collectLabelsOf(collect) : null);
  }

  /** The task's dataset, or this device's own examples (data/run-data.ts). */
  private readonly defaultData: DataFactory = runData((run) => this.options.ownExamples?.(run) ?? null);

  /** Where this run's examples come from; `signal` ends its fetches with the run. */
  private runData(start: TrainStart, signal: AbortSignal): DataSource {
    return (programDataFor(start.config, this.options.program ?? null) ?? this.options.data ?? this.defaultData)(start.config, {
      serverUrl: this.options.serverUrl,
      room: this.session.identity!.room,
      // The current membership's token: a fresh join after a drop brings a new one.
      memberToken: () => this.session.identity?.memberToken ?? '',
      signal,
      onWait: (why) => {
        if (why) this.options.log(why);
        this.status.update({ dataWait: why });
      },
    });
  }

  /** The chief's writer and the server's checkpoints, for the run. */
  private runCheckpoints(): RunCheckpoints {
    return {
      save: (trainer, run, maxToKeep) =>
        this.writer!.save(trainer, { room: this.room!, run, backend: this.options.compute.info.backend, members: this.generations.latest?.members ?? [] }, maxToKeep),
      flush: () => this.writer!.flush(),
      restore: async (id, trainer) => {
        await restoreFromServer(this.options.serverUrl, this.room!, id, trainer, this.session.identity?.memberToken ?? '', { clock: this.clock });
      },
    };
  }
}

