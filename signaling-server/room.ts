/**
 * One classroom: membership, numbered generations, and the training run's shared view.
 * Pure state, no sockets: the handlers translate events into these calls and broadcast
 * what they return, and the unit of truth stays easy to test.
 */
import { WebringError, type ErrorBody } from '../shared/errors';
import type { ResumePoint } from '../shared/checkpoint';
import {
  DEFAULT_START_CONFIG,
  MAX_ROOM_MEMBERS,
  type Backend,
  type EvaluationReport,
  type FinishReport,
  type Generation,
  type MemberInfo,
  type MetricPoint,
  type ProgressReport,
  type RoomMetrics,
  type RoomState,
  type RoomStatus,
  type StartConfig,
  type TrainStart,
  type WorkerKind,
} from '../shared/protocol';
import { MNIST_TRAIN_DIGITS } from '../shared/mnist-format';
import { stepsPerEpoch } from '../shared/sharding';

/** Enough for a whole lesson's loss curve at one point per step; older points are dropped. */
export const MAX_HISTORY_POINTS = 5_000;

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
}

interface Member extends NewMember {
  index: number;
  examplesPerSec: number;
  step: number;
  weightsHash: string | null;
}

type PersistedMember = Omit<Member, 'socketId'>;

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
  /** Set when a running training can no longer continue and its workers must stop. */
  trainingAborted: boolean;
}

export class Room {
  readonly name: string;
  private nextIndex = 0;
  private generation = 0;
  /** Ring members, ordered by index: rank is the position, rank 0 the chief. */
  private active: Member[] = [];
  /** Joined while training ran; admitted when the run ends. */
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

  get isTraining(): boolean {
    return this.state === 'training';
  }

  /**
   * A known member comes back on a new connection (after a server restart or a network
   * blip): same id, index and rank, and no new generation, so a live ring is not disturbed.
   */
  rejoin(memberId: string, tokenHash: string, socketId: string): { index: number } | null {
    const m = this.find(memberId);
    if (!m || m.tokenHash !== tokenHash) return null;
    m.socketId = socketId;
    return { index: m.index };
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
    const strip = ({ socketId: _s, ...m }: Member): PersistedMember => m;
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
    room.active = p.active.map((m) => ({ ...m, socketId: null }));
    room.waiting = p.waiting.map((m) => ({ ...m, socketId: null }));
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

  join(member: NewMember): { index: number; change: MembershipChange } {
    if (this.size >= MAX_ROOM_MEMBERS) {
      throw new WebringError('ERR_ROOM_FULL', `room ${this.name} already has ${MAX_ROOM_MEMBERS} members`);
    }
    const joined: Member = { ...member, index: this.nextIndex++, examplesPerSec: 0, step: 0, weightsHash: null };
    if (this.state === 'training') {
      // Mid-run admission at a step boundary is the elastic ring's job; until then, wait.
      this.waiting.push(joined);
      return { index: joined.index, change: { generation: null, trainingAborted: false } };
    }
    this.active.push(joined);
    return { index: joined.index, change: { generation: this.bumpGeneration(), trainingAborted: false } };
  }

  leave(id: string): MembershipChange {
    const waitingAt = this.waiting.findIndex((m) => m.id === id);
    if (waitingAt >= 0) {
      this.waiting.splice(waitingAt, 1);
      return { generation: null, trainingAborted: false };
    }
    const at = this.active.findIndex((m) => m.id === id);
    if (at < 0) return { generation: null, trainingAborted: false };
    this.active.splice(at, 1);
    let trainingAborted = false;
    if (this.state === 'training') {
      // A synchronous ring cannot lose a member mid-run yet (the elastic issue adds that).
      trainingAborted = true;
      this.endRun('idle', { code: 'ERR_MEMBER_LEFT', message: 'a worker left during training; press Start to train again' });
    }
    return { generation: this.bumpGeneration(), trainingAborted };
  }

  /** Throws unless a run could start now. */
  assertCanStart(): void {
    if (this.state === 'training') throw new WebringError('ERR_BAD_STATE', `room ${this.name} is already training`);
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
    for (const m of this.active) {
      m.step = this.step;
      m.weightsHash = resume?.weightsHash ?? null;
      m.examplesPerSec = 0;
    }
    return { run: this.run, generation: this.generation, config, startStep: this.step, resume };
  }

  /** Checks that a stop makes sense; the replicas agree on the step to stop after. */
  requestStop(): void {
    if (this.state !== 'training') throw new WebringError('ERR_BAD_STATE', `room ${this.name} is not training`);
  }

  recordProgress(memberId: string, report: ProgressReport): void {
    const m = this.requireMemberOfRun(memberId, report.run);
    m.step = report.step;
    m.examplesPerSec = report.examplesPerSec;
    m.weightsHash = report.weightsHash;
    // Every replica computes the same global loss; the chief's report is the room's.
    if (this.active[0] === m && report.step > this.step) {
      this.step = report.step;
      this.epoch = report.epoch;
      this.loss = report.loss;
      this.trainAccuracy = report.trainAccuracy;
      this.history.push({ step: report.step, loss: report.loss, trainAccuracy: report.trainAccuracy });
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
    const noChange = { generation: null, trainingAborted: false };
    if (this.state !== 'training') return noChange;
    if (report.reason !== 'failed' && this.active[0] !== m) return noChange;
    if (report.reason === 'failed') {
      this.endRun('idle', { code: 'ERR_PEER_FAILED', message: report.message ?? report.code ?? 'a worker failed' });
    } else {
      this.step = Math.max(this.step, report.step);
      this.endRun('done', null);
    }
    if (this.waiting.length === 0) return { generation: null, trainingAborted: false };
    this.active.push(...this.waiting);
    this.active.sort((a, b) => a.index - b.index);
    this.waiting = [];
    return { generation: this.bumpGeneration(), trainingAborted: false };
  }

  snapshot(): Generation {
    return { room: this.name, generation: this.generation, members: this.active.map((m, rank) => this.info(m, rank)) };
  }

  status(): RoomStatus {
    const n = this.active.length;
    const totalSteps =
      this.config && n > 0
        ? Math.min(
            this.config.epochs * stepsPerEpoch(MNIST_TRAIN_DIGITS, this.config.batchSizePerWorker * n),
            this.config.maxSteps ?? Number.POSITIVE_INFINITY,
          )
        : null;
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
    };
  }
}
