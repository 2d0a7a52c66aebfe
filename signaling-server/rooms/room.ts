/**
 * One classroom: membership, numbered generations, and the training run's shared view.
 * Pure state, no sockets: the handlers translate events into these calls and broadcast
 * what they return, and the unit of truth stays easy to test.
 */
import { WebringError, type ErrorBody } from '../../shared/protocol/errors';
import {
  DEFAULT_START_CONFIG,
  MAX_ROOM_MEMBERS,
  type Backend,
  type DropRequest,
  type DroppedMember,
  type EvictRequest,
  type MemberDropped,
  type EvaluationReport,
  type FinishReport,
  type Generation,
  type MemberInfo,
  type MetricPoint,
  type ProgressReport,
  type RoomEvent,
  type RoomEventKind,
  type RoomMetrics,
  type RoomState,
  type RoomStatus,
  type StartConfig,
  type TrainStart,
  type WorkerKind,
  type CollectiveReport,
  type ResumePoint,
} from '../../shared/protocol';
import { MNIST_TRAIN_DIGITS } from '../../shared/data/mnist-format';
import { stepsPerEpoch } from '../../shared/training/sharding';
import { sendersOf } from '../../shared/collectives/topology';

/** Enough for a whole lesson's loss curve at one point per step; older points are dropped. */
export const MAX_HISTORY_POINTS = 5_000;
/** The ring's event log keeps this many of the newest events. */
export const MAX_ROOM_EVENTS = 200;
/** The room API shows this many of them. */
export const ROOM_EVENTS_SHOWN = 50;

export interface NewMember {
  id: string;
  /** Null while the member has not reconnected to a restarted server. */
  socketId: string | null;
  /** sha256 of the member's secret token; the token itself is never stored. */
  tokenHash: string;
  name: string;
  backend: Backend;
  kind: WorkerKind;
  adapter: string | null;
  /** The signaling node holding the member's connection (several nodes share rooms over Redis); null on a single server. */
  node: string | null;
}

interface Member extends NewMember {
  index: number;
  examplesPerSec: number;
  step: number;
  weightsHash: string | null;
  computeMs: number;
  batchShare: number;
  linkMBps: number;
  collective: CollectiveReport | null;
  /** Admitted into a running ring and not yet trained a step there (no state yet). */
  awaitingState: boolean;
  /** When its connection was found gone with its node (ms epoch), or null; it has a grace period to come back. */
  disconnectedAt: number | null;
}

type PersistedMember = Omit<Member, 'socketId' | 'computeMs' | 'batchShare' | 'linkMBps' | 'collective' | 'awaitingState' | 'node' | 'disconnectedAt'>;

/**
 * The whole room but its loss history, as plain data: what a shared store (Redis) keeps
 * and every signaling node rebuilds the room from (Room.fromRecord). The history is kept
 * apart, appended point by point, so a progress report does not rewrite the lesson's curve.
 */
export interface RoomRecord {
  name: string;
  nextIndex: number;
  generation: number;
  active: Member[];
  waiting: Member[];
  state: RoomState;
  config: StartConfig | null;
  run: number;
  step: number;
  epoch: number;
  loss: number | null;
  trainAccuracy: number | null;
  accuracy: number | null;
  evaluations: RoomMetrics['evaluations'];
  lastError: ErrorBody | null;
  reportedTotalSteps: number | null;
  dropped: DroppedMember[];
  consistency: { checks: number; mismatches: number; lastMismatchStep: number | null };
  events: RoomEvent[];
  accusations: Record<string, number>;
  mutedReporters: string[];
}

export interface PersistedRoom {
  format: 1;
  name: string;
  nextIndex: number;
  generation: number;
  run: number;
  state: RoomState;
  config: StartConfig | null;
  step: number;
  epoch: number;
  active: PersistedMember[];
  waiting: PersistedMember[];
}

export interface MembershipChange {
  /** The new generation to broadcast, when membership changed. */
  generation: Generation | null;
  /** Set when a running training can no longer continue (every ring member left). */
  trainingAborted: boolean;
}

export interface Admission {
  generation: Generation;
  /** Ids of the members admitted into the running ring. */
  joiners: string[];
  /** What each joiner is told: the run in progress, to be joined with the chief's live state. */
  start: TrainStart;
}

const NO_CHANGE: MembershipChange = { generation: null, trainingAborted: false };

/** An accepted ring:evict: who goes, and what each is told. */
export interface Eviction {
  change: MembershipChange;
  evicted: Array<{ id: string; socketId: string | null; notice: Extract<MemberDropped, { reason: 'evicted' }> }>;
  /**
   * A refused accusation: the reporter is muted for the run (a change to keep), and the
   * caller answers with this error once the change is stored.
   */
  refused: WebringError | null;
}

export class Room {
  readonly name: string;
  private nextIndex = 0;
  private generation = 0;
  /** Ring members, ordered by index: rank is the position, rank 0 the chief. */
  private active: Member[] = [];
  /** Joined while training ran; admitted together into the running ring (admitWaiting). */
  private waiting: Member[] = [];
  private state: RoomState = 'idle';
  private config: StartConfig | null = null;
  /** The current run, or the last one once it ended: its replicas' last reports still count. */
  private run = 0;
  private step = 0;
  private epoch = 0;
  private loss: number | null = null;
  private trainAccuracy: number | null = null;
  private accuracy: number | null = null;
  private history: MetricPoint[] = [];
  private evaluations: RoomMetrics['evaluations'] = [];
  private lastError: ErrorBody | null = null;
  /** The chief's estimate of the run's last step, from its latest report. */
  private reportedTotalSteps: number | null = null;
  private dropped: DroppedMember[] = [];
  /** Accepted accusations per reporter in this run; reporters refuted once are in `mutedReporters`. */
  private accusations: Record<string, number> = {};
  private mutedReporters: string[] = [];
  private consistency = { checks: 0, mismatches: 0, lastMismatchStep: null as number | null };
  private events: RoomEvent[] = [];
  /** Clock for event times; replaceable in tests. */
  now: () => number = Date.now;

  constructor(name: string) {
    this.name = name;
  }

  get size(): number {
    return this.active.length + this.waiting.length;
  }

  get isEmpty(): boolean {
    return this.size === 0;
  }

  get currentGeneration(): number {
    return this.generation;
  }

  /** A run is in progress (training, or paused by the teacher). */
  get isTraining(): boolean {
    return this.state === 'training' || this.state === 'paused';
  }

  /**
   * A known member comes back on a new connection (after a server restart or a network
   * blip): same id, index and rank, and no new generation, so a live ring is not disturbed.
   */
  rejoin(memberId: string, tokenHash: string, socketId: string, node: string | null = null): { index: number } | null {
    const m = this.find(memberId);
    if (!m || m.tokenHash !== tokenHash) return null;
    m.socketId = socketId;
    m.node = node;
    m.disconnectedAt = null;
    return { index: m.index };
  }

  /**
   * Members whose signaling node is gone (it crashed or was killed, so their connections
   * closed without a word) count as disconnected from `now`; they have a grace period to
   * reconnect to another node (overdue). Returns whether anything changed.
   */
  markNodesGone(isAlive: (node: string) => boolean, now: number): boolean {
    let changed = false;
    for (const m of [...this.active, ...this.waiting]) {
      if (m.socketId !== null && m.node !== null && !isAlive(m.node)) {
        m.socketId = null;
        m.disconnectedAt = now;
        changed = true;
      }
    }
    return changed;
  }

  /** Members disconnected for longer than `graceMs`, to be dropped like a closed tab. */
  overdue(now: number, graceMs: number): string[] {
    return [...this.active, ...this.waiting].filter((m) => m.disconnectedAt !== null && now - m.disconnectedAt > graceMs).map((m) => m.id);
  }

  /** The signaling nodes holding this room's connections. */
  get nodes(): Set<string> {
    return new Set([...this.active, ...this.waiting].flatMap((m) => (m.node === null || m.socketId === null ? [] : [m.node])));
  }

  toRecord(): RoomRecord {
    const { name, nextIndex, generation, active, waiting, state, config, run, step, epoch, loss, trainAccuracy, accuracy, evaluations, lastError, reportedTotalSteps, dropped, consistency, events, accusations, mutedReporters } = this;
    return { name, nextIndex, generation, active, waiting, state, config, run, step, epoch, loss, trainAccuracy, accuracy, evaluations, lastError, reportedTotalSteps, dropped, consistency, events, accusations, mutedReporters };
  }

  /** The room from its record and history; takes ownership of both (clone them first to keep them). */
  static fromRecord(record: RoomRecord, history: MetricPoint[] = []): Room {
    const room = new Room(record.name);
    Object.assign(room, record);
    room.history = history;
    return room;
  }

  /**
   * The loss points this room holds. A room rebuilt from its record (fromRecord) starts
   * without history, so after a change these are the points the change recorded, which a
   * store appends to the history it keeps apart.
   */
  historyPoints(): readonly MetricPoint[] {
    return this.history;
  }

  /** Members still without a connection (after a restart), to be dropped after a grace period. */
  disconnectedMembers(): string[] {
    return [...this.active, ...this.waiting].filter((m) => m.socketId === null).map((m) => m.id);
  }

  get runConfig(): StartConfig | null {
    return this.config;
  }

  /** What must outlive a server restart: membership, generation and the run. */
  toPersisted(): PersistedRoom {
    const strip = ({ socketId: _s, node: _n, computeMs: _c, batchShare: _b, linkMBps: _l, collective: _k, awaitingState: _a, disconnectedAt: _d, ...m }: Member): PersistedMember => m;
    return {
      format: 1,
      name: this.name,
      nextIndex: this.nextIndex,
      generation: this.generation,
      run: this.run,
      state: this.state,
      config: this.config,
      step: this.step,
      epoch: this.epoch,
      active: this.active.map(strip),
      waiting: this.waiting.map(strip),
    };
  }

  static fromPersisted(p: PersistedRoom): Room {
    const room = new Room(p.name);
    room.nextIndex = p.nextIndex;
    room.generation = p.generation;
    room.run = p.run;
    room.state = p.state;
    room.config = p.config;
    room.step = p.step;
    room.epoch = p.epoch;
    const revive = (m: PersistedMember): Member => ({ ...m, socketId: null, node: null, computeMs: 0, batchShare: 0, linkMBps: 0, collective: null, awaitingState: false, disconnectedAt: null });
    room.active = p.active.map(revive);
    room.waiting = p.waiting.map(revive);
    return room;
  }

  /** The member holding `token`, and whether it is the current chief. */
  memberByTokenHash(tokenHash: string): { id: string; chief: boolean } | null {
    const at = this.active.findIndex((m) => m.tokenHash === tokenHash);
    if (at >= 0) return { id: this.active[at]!.id, chief: at === 0 };
    const waiting = this.waiting.find((m) => m.tokenHash === tokenHash);
    return waiting ? { id: waiting.id, chief: false } : null;
  }

  get maxToKeep(): number {
    return this.config?.maxToKeep ?? DEFAULT_START_CONFIG.maxToKeep;
  }

  socketIdOf(id: string): string | null {
    return this.find(id)?.socketId ?? null;
  }

  /**
   * Adds a member. While a run trains, it waits to be admitted (admitWaiting) together with
   * everyone else who arrives meanwhile; otherwise it is in the ring at once.
   */
  join(member: NewMember): { index: number; change: MembershipChange; awaitingAdmission: boolean } {
    if (this.size >= MAX_ROOM_MEMBERS) {
      throw new WebringError('ERR_ROOM_FULL', `room ${this.name} already has ${MAX_ROOM_MEMBERS} members`);
    }
    const joined: Member = { ...member, index: this.nextIndex++, examplesPerSec: 0, step: 0, weightsHash: null, computeMs: 0, batchShare: 0, linkMBps: 0, collective: null, awaitingState: false, disconnectedAt: null };
    if (this.isTraining) {
      this.waiting.push(joined);
      return { index: joined.index, change: NO_CHANGE, awaitingAdmission: true };
    }
    this.active.push(joined);
    const change = { generation: this.bumpGeneration(), trainingAborted: false };
    this.log('joined', [joined.name], '');
    return { index: joined.index, change, awaitingAdmission: false };
  }

  /**
   * Admits every waiting member into the running ring in one generation. They come after
   * the current members (their indexes are higher), so the ring only grows at its end
   * and the survivors keep their ranks and chief.
   */
  admitWaiting(): Admission | null {
    if (!this.isTraining || this.waiting.length === 0 || !this.config) return null;
    const joiners = this.waiting;
    this.waiting = [];
    for (const m of joiners) {
      m.step = this.step;
      m.awaitingState = true;
    }
    this.active.push(...joiners);
    this.active.sort((a, b) => a.index - b.index);
    const generation = this.bumpGeneration();
    this.log('admitted', joiners.map((m) => m.name), `${joiners.length} joiner(s) take the chief's live state`);
    const start: TrainStart = { run: this.run, generation: this.generation, config: this.config, startStep: this.step, resume: null, admitted: true };
    return { generation, joiners: joiners.map((m) => m.id), start };
  }

  /**
   * A member is gone. During a run the survivors re-form at once and go on from the new
   * chief's state; only when nobody is left does the run end.
   */
  leave(id: string): MembershipChange {
    const waitingAt = this.waiting.findIndex((m) => m.id === id);
    if (waitingAt >= 0) {
      this.waiting.splice(waitingAt, 1);
      return NO_CHANGE;
    }
    const at = this.active.findIndex((m) => m.id === id);
    if (at < 0) return NO_CHANGE;
    const [gone] = this.active.splice(at, 1);
    this.log('left', [gone!.name], at === 0 && this.active.length > 0 ? `chief now ${this.active[0]!.name}` : '');
    return this.afterRemoval();
  }

  /** The chief drops a straggler; it may join again. Refused from anyone but the chief. */
  drop(reporterId: string, request: DropRequest): MembershipChange {
    const reporter = this.requireMemberOfRun(reporterId, request.run);
    if (this.active[0] !== reporter) throw new WebringError('ERR_NOT_CHIEF', 'only the chief drops stragglers');
    if (request.generation !== this.generation) {
      throw new WebringError('ERR_STALE_GENERATION', `drop for generation ${request.generation}; the room is at ${this.generation}`);
    }
    const at = this.active.findIndex((m) => m.id === request.member);
    if (at < 0) throw new WebringError('ERR_NOT_IN_ROOM', `member ${request.member} is not in the ring`);
    const [gone] = this.active.splice(at, 1);
    const m = gone!;
    this.dropped.push({
      id: m.id,
      name: m.name,
      index: m.index,
      reason: 'straggler',
      step: request.step,
      computeMs: request.computeMs,
      deadlineMs: request.deadlineMs,
      misbehaviour: null,
      reportedBy: null,
      detail: '',
      at: this.now(),
    });
    this.log('dropped', [m.name], `straggler: ${Math.round(request.computeMs)} ms per step against a ${Math.round(request.deadlineMs)} ms deadline`);
    return this.afterRemoval();
  }

  /**
   * A ring member names a sender whose message its ring rejected (issue 7). Only the two of
   * them saw the message, so the server cannot tell which one tells the truth; it checks what
   * the topology lets it check and bounds the damage a liar can do:
   *  1. the reporter is a ring member of this run and speaks of the current generation; an
   *     older one is refused with ERR_STALE_GENERATION and not held against anyone (the ring
   *     has already moved on, maybe by evicting the same sender on another's word);
   *  2. the accused is one of the reporter's senders in that generation (sendersOf: its left
   *     neighbour or a halving-doubling partner). Anyone else is refused with
   *     ERR_BAD_ACCUSATION and nothing changes, and the reporter's later accusations in this
   *     run are refused too: honest code never names a member that does not send to it;
   *  3. a reporter's first accepted accusation in a run evicts the accused; a second one
   *     evicts the reporter instead. A lying member thus removes at most one honest member per
   *     run, and then itself; an honest member unlucky enough to face two broken senders in
   *     one run leaves, and the second one's next receiver names it.
   * Evicted members may join again as fresh members (a new id and token), like stragglers.
   */
  evict(reporterId: string, request: EvictRequest): Eviction {
    const reporter = this.requireMemberOfRun(reporterId, request.run);
    if (request.generation !== this.generation) {
      throw new WebringError('ERR_STALE_GENERATION', `eviction for generation ${request.generation}; the room is at ${this.generation}`);
    }
    if (this.mutedReporters.includes(reporterId)) {
      throw new WebringError('ERR_BAD_ACCUSATION', `${reporter.name} named a member that does not send to it earlier in this run; its accusations are refused`);
    }
    const n = this.active.length;
    const accusedAt = this.active.findIndex((m) => m.id === request.member);
    const reporterAt = this.active.indexOf(reporter);
    if (accusedAt < 0 || !sendersOf(reporterAt, n).has(accusedAt)) {
      this.mutedReporters.push(reporterId);
      const refused = new WebringError('ERR_BAD_ACCUSATION', `member ${request.member} does not send ring data to ${reporter.name} in generation ${this.generation}`);
      return { change: NO_CHANGE, evicted: [], refused };
    }
    const accused = this.active[accusedAt]!;
    const count = (this.accusations[reporterId] ?? 0) + 1;
    this.accusations[reporterId] = count;
    const second = count > 1;
    const gone = second ? reporter : accused;
    const misbehaviour = second ? 'accusations' : request.reason;
    const detail = second
      ? `its second accusation in this run (of ${accused.name}: ${request.reason}); the server cannot tell which of the two lies`
      : `${accused.name} sent ${request.reason} ring data to ${reporter.name} at step ${request.step}`;
    this.active.splice(this.active.indexOf(gone), 1);
    this.dropped.push({
      id: gone.id,
      name: gone.name,
      index: gone.index,
      reason: 'evicted',
      step: request.step,
      computeMs: 0,
      deadlineMs: 0,
      misbehaviour,
      reportedBy: second ? null : reporter.name,
      detail,
      at: this.now(),
    });
    this.log('evicted', [gone.name], detail);
    const notice: Extract<MemberDropped, { reason: 'evicted' }> = { reason: 'evicted', step: request.step, misbehaviour, detail };
    return { change: this.afterRemoval(), evicted: [{ id: gone.id, socketId: gone.socketId, notice }], refused: null };
  }

  /** A member's link broke while everyone is still here: the same members, a fresh generation. */
  reform(memberId: string, generation: number, reason: string): MembershipChange {
    const m = this.active.find((x) => x.id === memberId);
    if (!m) throw new WebringError('ERR_NOT_IN_ROOM', 'only ring members ask for a re-form');
    // Every member of a broken ring may ask; the first request for a generation is enough.
    if (generation !== this.generation) return NO_CHANGE;
    const change = { generation: this.bumpGeneration(), trainingAborted: false };
    this.log('reformed', [m.name], reason);
    return change;
  }

  private afterRemoval(): MembershipChange {
    if (this.isTraining && this.active.length === 0) {
      // Nobody holds the live state any more: the run ends, and whoever waits resumes from
      // the latest checkpoint (BackupAndRestore).
      this.endRun('idle', { code: 'ERR_MEMBER_LEFT', message: 'every ring member left; the run goes on from the latest checkpoint' });
      this.active = this.waiting.sort((a, b) => a.index - b.index);
      this.waiting = [];
      return { generation: this.bumpGeneration(), trainingAborted: true };
    }
    return { generation: this.bumpGeneration(), trainingAborted: false };
  }

  /** Throws unless a run could start now. */
  assertCanStart(): void {
    if (this.isTraining) throw new WebringError('ERR_BAD_STATE', `room ${this.name} is already training`);
    if (this.active.length === 0) throw new WebringError('ERR_NO_WORKERS', `no workers have joined room ${this.name}`);
  }

  start(config: StartConfig, resume: ResumePoint | null): TrainStart {
    this.assertCanStart();
    this.state = 'training';
    this.config = config;
    this.run++;
    this.step = resume?.step ?? 0;
    this.epoch = resume?.dataCursor.epoch ?? 0;
    this.loss = null;
    this.trainAccuracy = null;
    this.accuracy = null;
    this.history = [];
    this.evaluations = [];
    this.lastError = null;
    this.reportedTotalSteps = null;
    this.dropped = [];
    this.accusations = {};
    this.mutedReporters = [];
    this.consistency = { checks: 0, mismatches: 0, lastMismatchStep: null };
    for (const m of this.active) {
      m.step = this.step;
      m.weightsHash = resume?.weightsHash ?? null;
      m.examplesPerSec = 0;
    }
    return { run: this.run, generation: this.generation, config, startStep: this.step, resume, admitted: false };
  }

  /** Checks that a stop makes sense; the replicas agree on the step to stop after. */
  requestStop(): void {
    if (!this.isTraining) throw new WebringError('ERR_BAD_STATE', `room ${this.name} is not training`);
  }

  /** The teacher pauses; the replicas agree on the step to pause after. */
  pause(): void {
    if (this.state !== 'training') throw new WebringError('ERR_BAD_STATE', `room ${this.name} is not training`);
    this.state = 'paused';
  }

  resume(): void {
    if (this.state !== 'paused') throw new WebringError('ERR_BAD_STATE', `room ${this.name} is not paused`);
    this.state = 'training';
  }

  recordProgress(memberId: string, report: ProgressReport): void {
    const m = this.requireMemberOfRun(memberId, report.run);
    m.step = report.step;
    m.examplesPerSec = report.examplesPerSec;
    m.weightsHash = report.weightsHash;
    m.computeMs = report.computeMs;
    m.batchShare = report.batchShare;
    m.linkMBps = report.linkMBps;
    m.collective = report.collective;
    m.awaitingState = false;
    // Every replica computes the same global loss; the chief's report is the room's.
    if (this.active[0] === m && report.step > this.step) {
      if (report.hashChecked) this.consistency.checks++;
      if (report.hashMismatch) {
        this.consistency.mismatches++;
        this.consistency.lastMismatchStep = report.step;
        this.log('resynced', [], `weights differed at step ${report.step}; every replica reloaded the chief's state`);
      }
      this.reportedTotalSteps = report.totalSteps;
      this.step = report.step;
      this.epoch = report.epoch;
      this.loss = report.loss;
      this.trainAccuracy = report.trainAccuracy;
      this.history.push({ at: this.now(), step: report.step, loss: report.loss, trainAccuracy: report.trainAccuracy });
      if (this.history.length > MAX_HISTORY_POINTS) this.history.splice(0, this.history.length - MAX_HISTORY_POINTS);
    }
  }

  recordEvaluation(memberId: string, report: EvaluationReport): void {
    const m = this.requireMemberOfRun(memberId, report.run);
    if (this.active[0] !== m) return;
    this.accuracy = report.accuracy;
    this.evaluations.push({ epoch: report.epoch, step: report.step, accuracy: report.accuracy });
  }

  /**
   * Every replica ends at the same step; the chief's report ends the run, because the chief
   * reports only after its final checkpoint is stored. A failure report from anyone ends it.
   */
  recordFinished(memberId: string, report: FinishReport): MembershipChange {
    const m = this.requireMemberOfRun(memberId, report.run);
    if (!this.isTraining) return NO_CHANGE;
    if (report.reason !== 'failed' && this.active[0] !== m) return NO_CHANGE;
    this.active.push(...this.waiting);
    this.active.sort((a, b) => a.index - b.index);
    const admitted = this.waiting.length > 0;
    this.waiting = [];
    if (report.reason === 'failed') {
      // The ring could not heal itself: everyone stops, and the room goes back to the
      // latest checkpoint in a fresh generation (a fresh ring).
      this.endRun('idle', { code: 'ERR_PEER_FAILED', message: report.message ?? report.code ?? 'a worker failed' });
      return { generation: this.bumpGeneration(), trainingAborted: true };
    }
    this.step = Math.max(this.step, report.step);
    this.endRun('done', null);
    return admitted ? { generation: this.bumpGeneration(), trainingAborted: false } : NO_CHANGE;
  }

  /** Joiners admitted too late to take part: the run ended before the ring handed them the state. */
  takeAdmittedWithoutState(): string[] {
    const ids = this.active.filter((m) => m.awaitingState).map((m) => m.id);
    for (const m of this.active) m.awaitingState = false;
    return ids;
  }

  snapshot(): Generation {
    return { room: this.name, generation: this.generation, members: this.active.map((m, rank) => this.info(m, rank)) };
  }

  status(): RoomStatus {
    const n = this.active.length;
    const estimate =
      this.config && n > 0
        ? Math.min(
            this.config.epochs * stepsPerEpoch(MNIST_TRAIN_DIGITS, this.config.batchSizePerWorker * n),
            this.config.maxSteps ?? Number.POSITIVE_INFINITY,
          )
        : null;
    const totalSteps = this.reportedTotalSteps ?? estimate;
    return {
      room: this.name,
      state: this.state,
      run: this.run,
      generation: this.generation,
      step: this.step,
      epoch: this.epoch,
      chief: this.active[0]?.id ?? null,
      members: this.active.map((m, rank) => this.info(m, rank)),
      waiting: this.waiting.map((m) => this.info(m, null)),
      config: this.config,
      totalSteps,
      metrics: { loss: this.loss, accuracy: this.accuracy, trainAccuracy: this.trainAccuracy },
      lastError: this.lastError,
      dropped: [...this.dropped],
      consistency: { ...this.consistency },
      events: this.events.slice(-ROOM_EVENTS_SHOWN),
    };
  }

  metrics(): RoomMetrics {
    return { room: this.name, history: [...this.history], evaluations: [...this.evaluations] };
  }

  private endRun(state: RoomState, error: ErrorBody | null): void {
    this.state = state;
    this.lastError = error;
  }

  /**
   * The reporting member, when the report belongs to the running run or to the run that just
   * ended (replicas send their last reports a moment after the first one finished the run).
   */
  private requireMemberOfRun(memberId: string, run: number): Member {
    const m = this.active.find((x) => x.id === memberId);
    if (!m) throw new WebringError('ERR_NOT_IN_ROOM', 'only ring members report training progress');
    if (run !== this.run) throw new WebringError('ERR_STALE_RUN', `report for run ${run}; the room's run is ${this.run}`);
    return m;
  }

  private log(kind: RoomEventKind, members: string[], detail: string): void {
    this.events.push({ at: this.now(), kind, generation: this.generation, step: this.step, members, detail });
    if (this.events.length > MAX_ROOM_EVENTS) this.events.splice(0, this.events.length - MAX_ROOM_EVENTS);
  }

  private bumpGeneration(): Generation {
    this.generation++;
    return this.snapshot();
  }

  private find(id: string): Member | undefined {
    return this.active.find((m) => m.id === id) ?? this.waiting.find((m) => m.id === id);
  }

  private info(m: Member, rank: number | null): MemberInfo {
    return {
      id: m.id,
      name: m.name,
      index: m.index,
      rank,
      backend: m.backend,
      kind: m.kind,
      adapter: m.adapter,
      examplesPerSec: m.examplesPerSec,
      step: m.step,
      weightsHash: m.weightsHash,
      computeMs: m.computeMs,
      batchShare: m.batchShare,
      linkMBps: m.linkMBps,
      collective: m.collective,
      connected: m.socketId !== null,
      node: m.node,
    };
  }
}
