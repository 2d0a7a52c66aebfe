/**
 * The folder signaling-server/rooms/ owns the classroom as shared state: who is in it and in
 * which generation (membership.ts), the training run (run-state.ts), the ring:evict trust
 * rule (accusations.ts), the hub's role and its bar (hub-role.ts) and the teacher's say over
 * it (hub-access.ts), the seats one client address may hold (seats.ts), the checks on a
 * chief's drop (drop-check.ts) and on its checkpoints (checkpoint-guard.ts), how a room is
 * written down for Redis and room.json (room-codec.ts), where rooms live (room-store.ts,
 * redis-room-store.ts, and persisting-room-store.ts over room-persistence.ts), the rooms'
 * checkpoints on disk (checkpoint-store.ts), starting runs and admissions (runs.ts), telling
 * the sockets of a membership change (membership-broadcast.ts), dropping members who did not
 * come back (reconnect-sweep.ts), several nodes sharing rooms (cluster.ts), the clock and
 * timers rooms run on (wall-clock.ts, timers.ts), and what its socket-facing parts receive
 * (room-context.ts: the typed io server, the Logger, RoomContext). It is the server's lowest
 * layer and imports only shared/: edge/ (HTTP, the handshake and rate limits), handlers/
 * and the top-level wiring use rooms, never the other way round.
 *
 * This file: one classroom, the facade the handlers use. Pure state, no sockets and no
 * timers: the handlers translate events into these calls and broadcast what they return,
 * and the unit of truth stays easy to test. Time comes from the Clock it is given.
 */
import { WebringError } from '../../shared/protocol/errors';
import {
  DEFAULT_START_CONFIG,
  type DropRequest,
  type MemberDropped,
  type EvaluationReport,
  type OwnExamplesReport,
  type CollectSetting,
  type HubBar,
  type EvictRequest,
  type FinishReport,
  type Generation,
  type DeviceProbe,
  type MemberInfo,
  type MetricPoint,
  type Misbehaviour,
  type ProgressReport,
  type RoomEvent,
  type RoomEventKind,
  type RoomMetrics,
  type RoomStatus,
  type StartConfig,
  type TrainStart,
  type ResumePoint,
} from '../../shared/protocol';
import type { Clock } from '../../shared/util/clock';
import { HUB_RANK } from '../../shared/collectives/topology';
import { Membership, type Member, type MembershipState, type NewMember } from './membership';
import { RunState, type RunRecord } from './run-state';
import type { TrustChange } from './checkpoint-guard';
import type { CheckpointTrust } from '../../shared/checkpoints/checkpoint';
import { Accusations, type AccusationRecord } from './accusations';
import { HubRole } from './hub-role';
import { checkDrop } from './drop-check';
import { DEFAULT_SEATS_PER_LAN_ADDRESS } from './seats';
import { trainingSetBytes } from '../../shared/data/data-service';
import { REFORM_AFTER_MS } from '../../shared/training/generation-tracker';

export type { NewMember } from './membership';

/** The ring's event log keeps this many of the newest events. */
const MAX_ROOM_EVENTS = 200;
/** The room API shows this many of them. */
const ROOM_EVENTS_SHOWN = 50;
/**
 * A generation is re-formed on a member's request only once it is this old. Honest workers
 * ask only after trying the generation and then waiting REFORM_AFTER_MS (3 s) in it
 * (generation-tracker.ts), which the server sees later still; the second of slack is for
 * signaling nodes whose clocks differ. Without it, a member re-formed the ring 548 times in
 * 1.8 s, a write and a log line each.
 */
export const REFORM_MIN_GENERATION_AGE_MS = REFORM_AFTER_MS - 1_000;

/** A room's parts as plain data, but the loss history: what the codec stores and builds a Room from. */
export interface RoomParts {
  membership: MembershipState;
  run: RunRecord;
  accusations: AccusationRecord;
  events: RoomEvent[];
  /** The classes its students collect for; absent in records from before collecting. */
  collect?: CollectSetting | null;
}

export interface MembershipChange {
  /** The new generation to broadcast, when membership changed. */
  generation: Generation | null;
  /** Set when a running training can no longer continue (every ring member left; never for the hub). */
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
  private readonly members: Membership;
  private readonly runState: RunState;
  private readonly accusations: Accusations;
  private readonly hubRole: HubRole;
  private readonly events: RoomEvent[];
  private collectSetting: CollectSetting | null;

  /** An empty room, or (from the codec) one rebuilt from its parts, which it then owns. */
  constructor(
    readonly name: string,
    private readonly clock: Clock,
    parts?: RoomParts,
    history: MetricPoint[] = [],
  ) {
    this.members = new Membership(name, parts?.membership);
    this.runState = new RunState(name, parts?.run, history);
    this.accusations = new Accusations(parts?.accusations);
    this.hubRole = new HubRole(this.members, this.runState, this.accusations);
    this.events = parts?.events ?? [];
    this.collectSetting = parts?.collect ?? null;
  }

  /** The room as plain data for the codec; the room's own objects, not copies. */
  get parts(): Readonly<RoomParts> {
    return { membership: this.members.state, run: this.runState.record, accusations: this.accusations.record, events: this.events, collect: this.collectSetting };
  }

  /**
   * The loss points this room holds. A room rebuilt from its record starts without history,
   * so after a change these are the points the change recorded, which a store appends to
   * the history it keeps apart.
   */
  historyPoints(): readonly MetricPoint[] {
    return this.runState.historyPoints;
  }

  get size(): number {
    return this.members.size;
  }

  get isEmpty(): boolean {
    return this.size === 0;
  }

  /** Nobody is in it, nothing trains, it collects for nothing, bars no hub and keeps no seat cap: the store may forget it. */
  get isDisposable(): boolean {
    return this.isEmpty && !this.isTraining && this.collectSetting === null && this.hubBarred() === null && this.members.seatsPerAddress === null;
  }

  /** The teacher's cap on seats per client address, or null for the defaults by address (seats.ts). */
  get seatsPerAddress(): number | null {
    return this.members.seatsPerAddress;
  }

  /** Sets (a number) or clears (null) the teacher's cap; members already in keep their seats. */
  setSeatsPerAddress(cap: number | null): void {
    this.members.seatsPerAddress = cap;
  }

  /** The classes the students collect examples for, or null. */
  get collect(): CollectSetting | null {
    return this.collectSetting;
  }

  /** Opens, changes (classes) or closes (null) collecting; the examples stay on the students' devices. */
  setCollect(setting: CollectSetting | null): void {
    this.collectSetting = setting === null ? null : { classes: [...setting.classes] };
  }

  /** Someone could train: the ring has a member (a hub alone trains nothing). */
  get hasWorkers(): boolean {
    return this.members.ring.length > 0;
  }

  get currentGeneration(): number {
    return this.members.generation;
  }

  /** A run is in progress (training, or paused by the teacher). */
  get isTraining(): boolean {
    return this.runState.isTraining;
  }

  /** Members wait to be admitted into the running ring. */
  get hasWaiting(): boolean {
    return this.members.waiting.length > 0;
  }

  get runConfig(): StartConfig | null {
    return this.runState.config;
  }

  /** The current run's number, or the last one's once it ended; 0 before the first Start. */
  get runNumber(): number {
    return this.runState.record.run;
  }

  /** What the data service's byte budgets follow (edge/data-budget.ts): the run, the epoch the chief last reported, the membership's generation and the ring's size. */
  get dataWindow(): { run: number; epoch: number; generation: number; ringSize: number } {
    const run = this.runState.record;
    return { run: run.run, epoch: run.epoch, generation: this.currentGeneration, ringSize: this.members.ring.length };
  }

  get maxToKeep(): number {
    return this.runState.config?.maxToKeep ?? DEFAULT_START_CONFIG.maxToKeep;
  }

  /** The signaling nodes holding this room's connections. */
  get nodes(): Set<string> {
    return this.members.nodes;
  }

  /**
   * A known member comes back on a new connection (after a server restart or a network
   * blip): same id, index and rank, and no new generation, so a live ring is not disturbed.
   */
  rejoin(memberId: string, tokenHash: string, socketId: string, node: string | null = null, probe: DeviceProbe | null = null, address?: string): { index: number } | null {
    return this.members.rejoin(memberId, tokenHash, socketId, node, probe, address);
  }

  /**
   * Members whose signaling node is gone (it crashed or was killed, so their connections
   * closed without a word) count as disconnected from now; they have a grace period to
   * reconnect to another node (overdue). Returns whether anything changed.
   */
  markNodesGone(isAlive: (node: string) => boolean): boolean {
    return this.members.markNodesGone(isAlive, this.clock.now());
  }

  /** Members disconnected for `graceMs` or longer, to be dropped like a closed tab. */
  overdue(graceMs: number): string[] {
    return this.members.overdue(this.clock.now(), graceMs);
  }

  /** The member holding the token with this digest, and whether it is the current chief. */
  memberByTokenHash(tokenHash: string): { id: string; chief: boolean } | null {
    return this.members.memberByTokenHash(tokenHash);
  }

  socketIdOf(id: string): string | null {
    return this.members.find(id)?.socketId ?? null;
  }

  /**
   * Adds a member. While a run trains, it waits to be admitted (admitWaiting) together with
   * everyone else who arrives meanwhile; otherwise it is in the ring at once. A member of
   * kind 'hub' becomes the room's hub (ERR_HUB_TAKEN when it has one; ERR_HUB_REMOVED while
   * the teacher or the server has removed the hub, see hubBarred), in any state: a new
   * generation with the same ring, whose members add their links to the hub. Its key was
   * checked by the handler.
   */
  join(member: NewMember): { index: number; change: MembershipChange; awaitingAdmission: boolean } {
    if (member.kind === 'hub') {
      this.hubRole.refuseWhileBarred(this.name);
      const hub = this.members.addHub(member);
      this.hubRole.hubJoined();
      const change = { generation: this.bumpGeneration(), trainingAborted: false };
      this.log('hub-joined', [hub.name], '');
      return { index: hub.index, change, awaitingAdmission: false };
    }
    const waits = this.isTraining;
    const joined = this.members.add(member, waits);
    if (waits) return { index: joined.index, change: NO_CHANGE, awaitingAdmission: true };
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
    const config = this.runState.config;
    if (!this.isTraining || !this.hasWaiting || !config) return null;
    const joiners = this.members.admitWaiting(this.runState.step);
    const generation = this.bumpGeneration();
    this.log('admitted', joiners.map((m) => m.name), `${joiners.length} joiner(s) take the chief's live state`);
    this.runState.recordAdmission(this.currentGeneration, joiners.map((m) => m.name));
    const start: TrainStart = { run: this.runState.run, generation: this.currentGeneration, config, startStep: this.runState.step, resume: null, admitted: true };
    return { generation, joiners: joiners.map((m) => m.id), start };
  }

  /**
   * A member is gone. During a run the survivors re-form at once and go on from the new
   * chief's state; only when nobody is left does the run end. The hub leaving never ends a
   * run: the ring goes on with the other algorithms, in a new generation without the hub.
   */
  leave(id: string): MembershipChange {
    if (this.members.isHub(id)) return this.removeHub(id, '');
    if (this.members.removeWaiting(id)) return NO_CHANGE;
    const gone = this.members.removeFromRing(id);
    if (!gone) return NO_CHANGE;
    const chief = this.members.chief;
    this.log('left', [gone.member.name], gone.rank === 0 && chief ? `chief now ${chief.name}` : '');
    return this.afterRemoval();
  }

  /**
   * The chief drops a straggler; it may join again. Refused from anyone but the chief, and
   * where the members' own reports contradict it (drop-check.ts).
   */
  drop(reporterId: string, request: DropRequest): MembershipChange {
    const reporter = this.requireMemberOfRun(reporterId, request.run);
    if (this.members.chief !== reporter) throw new WebringError('ERR_NOT_CHIEF', 'only the chief drops stragglers');
    this.requireCurrentGeneration('drop', request.generation);
    const accused = this.members.findInRing(request.member);
    if (!accused) throw new WebringError('ERR_NOT_IN_ROOM', `member ${request.member} is not in the ring`);
    checkDrop(reporter, accused, this.members.ring, this.runState.record.dropped, request);
    const gone = this.members.removeFromRing(request.member)!;
    const m = gone.member;
    this.runState.recordDropped({
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
      at: this.clock.now(),
    });
    this.log('dropped', [m.name], `straggler: ${Math.round(request.computeMs)} ms per step against a ${Math.round(request.deadlineMs)} ms deadline`);
    return this.afterRemoval();
  }

  /**
   * A ring member names a sender whose message its ring rejected; accusations.ts has the
   * rule. A report of an older generation is refused with ERR_STALE_GENERATION and held
   * against nobody: the ring has already moved on, maybe by evicting the same sender on
   * another's word. Evicted members may join again as fresh members (a new id and token),
   * like stragglers.
   */
  evict(reporterId: string, request: EvictRequest): Eviction {
    const reporter = this.requireMemberOfRun(reporterId, request.run, { hub: true });
    this.requireCurrentGeneration('eviction', request.generation);
    const verdict = this.accusations.judge(reporterId, this.positionOf(reporterId)!, this.positionOf(request.member), this.members.ring.length, this.members.hub !== null);
    if (verdict === 'muted') {
      throw new WebringError('ERR_BAD_ACCUSATION', `${reporter.name} named a member that does not send to it earlier in this run; its accusations are refused`);
    }
    if (verdict === 'not-a-sender') {
      const refused = new WebringError('ERR_BAD_ACCUSATION', `member ${request.member} does not send ring data to ${reporter.name} in generation ${this.currentGeneration}`);
      return { change: NO_CHANGE, evicted: [], refused };
    }
    if (verdict === 'hub-accused') return this.accuseHub(reporter, request);
    const accused = this.members.find(request.member)!;
    const second = verdict === 'evict-reporter';
    const gone = second ? reporter : accused;
    const misbehaviour = second ? 'accusations' : request.reason;
    const detail = second
      ? `its second accusation in this run (of ${accused.name}: ${request.reason}); the server cannot tell which of the two lies`
      : `${accused.name} sent ${request.reason} ring data to ${reporter.name} at step ${request.step}`;
    if (this.members.isHub(gone.id)) return this.evictHub(gone, request.step, misbehaviour, null, detail);
    this.recordEvicted(gone, request.step, misbehaviour, second ? null : reporter.name, detail);
    this.members.removeFromRing(gone.id);
    this.log('evicted', [gone.name], detail);
    const change = this.afterRemoval();
    const notice: Extract<MemberDropped, { reason: 'evicted' }> = { reason: 'evicted', step: request.step, misbehaviour, detail };
    return { change, evicted: [{ id: gone.id, socketId: gone.socketId, notice }], refused: null };
  }

  private recordEvicted(gone: Member, step: number, misbehaviour: Misbehaviour | 'accusations', reportedBy: string | null, detail: string): void {
    this.runState.recordDropped({ id: gone.id, name: gone.name, index: gone.index, reason: 'evicted', step, computeMs: 0, deadlineMs: 0, misbehaviour, reportedBy, detail, at: this.clock.now() });
  }

  /**
   * A ring member names the hub. The hub is the teacher's, so one student's word does not
   * remove it: the accusation is logged and shown, the reporter is answered, and nobody
   * goes, until a majority of the ring has accused this hub in this run (hub-role.ts).
   */
  private accuseHub(reporter: Member, request: EvictRequest): Eviction {
    const hub = this.members.hub!;
    const ring = this.members.ring;
    const { accusers, needed, majority } = this.hubRole.accusationsOf(ring, hub);
    const said = `${reporter.name} says the hub sent ${request.reason} ring data at step ${request.step}`;
    this.log('hub-accused', [reporter.name], `${said}; ${accusers.length} of the ${needed} ring members it takes to remove the hub have accused it in this run`);
    if (!majority) return { change: NO_CHANGE, evicted: [], refused: null };
    return this.evictHub(hub, request.step, request.reason, accusers.join(', '), `${accusers.length} of ${ring.length} ring members accused the hub in this run, a majority`);
  }

  /**
   * The server removes the hub on evidence it checked (a majority's accusations, or the
   * hub's own second accusation): it is told, and hub joins are refused until the run ends,
   * so a broken hub does not come straight back to the same run.
   */
  private evictHub(hub: Member, step: number, misbehaviour: Misbehaviour | 'accusations', reportedBy: string | null, detail: string): Eviction {
    this.recordEvicted(hub, step, misbehaviour, reportedBy, detail);
    this.hubRole.barByServer(this.clock.now(), detail);
    const change = this.removeHub(hub.id, `evicted: ${detail}`, 'hub-removed');
    const notice: Extract<MemberDropped, { reason: 'evicted' }> = { reason: 'evicted', step, misbehaviour, detail };
    return { change, evicted: [{ id: hub.id, socketId: hub.socketId, notice }], refused: null };
  }

  /**
   * Why hub joins are refused now, or null (hub-role.ts). The teacher's removal holds until
   * the teacher allows a hub again (allowHub); the server's, until the run it was made in ends.
   */
  hubBarred(): HubBar | null {
    return this.hubRole.barred();
  }

  /**
   * The teacher removes the hub (DELETE /api/rooms/:room/hub): it goes, if the room has one,
   * and hub joins are refused with ERR_HUB_REMOVED until the teacher allows one again; a run
   * goes on with the ring.
   */
  removeHubAsTeacher(): { change: MembershipChange; removed: { id: string; socketId: string | null; notice: Extract<MemberDropped, { reason: 'removed' }> } | null } {
    const detail = 'removed by the teacher; the class trains without a hub until the teacher lets one in again';
    this.hubRole.barByTeacher(this.clock.now());
    const hub = this.members.hub;
    if (!hub) {
      this.log('hub-removed', [], detail);
      return { change: NO_CHANGE, removed: null };
    }
    const change = this.removeHub(hub.id, detail, 'hub-removed');
    return { change, removed: { id: hub.id, socketId: hub.socketId, notice: { reason: 'removed', step: this.runState.step, detail } } };
  }

  /** The teacher lets a hub join again (POST /api/rooms/:room/hub/allow); whether hub joins were refused. */
  allowHub(): boolean {
    const barred = this.hubRole.allow();
    if (barred) this.log('hub-allowed', [], 'the teacher lets a hub join again');
    return barred;
  }

  /** A ring member's rank, HUB_RANK for the hub, or null for anyone else. */
  private positionOf(id: string): number | null {
    if (this.members.isHub(id)) return HUB_RANK;
    const rank = this.members.rankOf(id);
    return rank >= 0 ? rank : null;
  }

  /** The hub is gone (it left, did not come back, or was removed): a new generation without it; a run goes on. */
  private removeHub(id: string, detail: string, kind: 'hub-left' | 'hub-removed' = 'hub-left'): MembershipChange {
    const hub = this.members.removeHub(id)!;
    this.log(kind, [hub.name], detail);
    return { generation: this.bumpGeneration(), trainingAborted: false };
  }

  /**
   * A member's link broke while everyone is still here: the same members, a fresh generation.
   * Refused with ERR_RATE_LIMITED, changing nothing, while the generation is younger than
   * REFORM_MIN_GENERATION_AGE_MS: so one re-form per generation, and at most one every 2 s
   * per room, however many members ask and however fast.
   */
  reform(memberId: string, generation: number, reason: string): MembershipChange {
    const m = this.members.findInRing(memberId);
    if (!m) throw new WebringError('ERR_NOT_IN_ROOM', `${this.members.isHub(memberId) ? 'the hub is no ring member; ' : ''}only ring members ask for a re-form`);
    // Every member of a broken ring may ask; the first request for a generation is enough.
    if (generation !== this.currentGeneration) return NO_CHANGE;
    const ageMs = this.members.generationAgeMs(this.clock.now());
    if (ageMs < REFORM_MIN_GENERATION_AGE_MS) {
      throw new WebringError('ERR_RATE_LIMITED', `generation ${generation} is ${Math.round(ageMs)} ms old; a ring is re-formed only once its generation is ${REFORM_MIN_GENERATION_AGE_MS} ms old`);
    }
    const change = { generation: this.bumpGeneration(), trainingAborted: false };
    this.log('reformed', [m.name], reason);
    return change;
  }

  private afterRemoval(): MembershipChange {
    if (this.isTraining && this.members.ring.length === 0) {
      // Nobody holds the live state any more: the run ends, and whoever waits resumes from
      // the latest checkpoint (BackupAndRestore).
      this.runState.end('idle', { code: 'ERR_MEMBER_LEFT', message: 'every ring member left; the run goes on from the latest checkpoint' });
      this.members.admitWaiting(null);
      return { generation: this.bumpGeneration(), trainingAborted: true };
    }
    return { generation: this.bumpGeneration(), trainingAborted: false };
  }

  /** Throws unless a run could start now. */
  assertCanStart(): void {
    if (this.isTraining) throw new WebringError('ERR_BAD_STATE', `room ${this.name} is already training`);
    if (this.members.ring.length === 0) throw new WebringError('ERR_NO_WORKERS', `no workers have joined room ${this.name}`);
  }

  start(config: StartConfig, resume: ResumePoint | null): TrainStart {
    this.assertCanStart();
    const run = this.runState.start(config, resume);
    this.accusations.reset();
    this.members.resetForRun(this.runState.step, resume?.weightsHash ?? null);
    return { run, generation: this.currentGeneration, config, startStep: this.runState.step, resume, admitted: false };
  }

  /** Checks that a stop makes sense; the replicas agree on the step to stop after. */
  requestStop(): void {
    if (!this.isTraining) throw new WebringError('ERR_BAD_STATE', `room ${this.name} is not training`);
  }

  /** The teacher pauses; the replicas agree on the step to pause after. */
  pause(): void {
    this.runState.pause();
  }

  resume(): void {
    this.runState.resume();
  }

  /**
   * A ring member's report of a step. The chief's is the room's progress; any other
   * member's weights hash may vouch for a checkpoint of that step (checkpoint-guard.ts):
   * the checkpoints whose trust it changed are returned, for the store to write down.
   */
  recordProgress(memberId: string, report: ProgressReport): TrustChange[] {
    const m = this.requireMemberOfRun(memberId, report.run);
    this.members.noteProgress(m, report);
    this.runState.recordJoinCost(report, this.members.chief === m);
    if (this.members.chief !== m) {
      return this.runState.checkpointGuard.noteReport(m.id, report.step, report.weightsHash, this.runState.step, this.runState.saveEverySteps);
    }
    const { resynced } = this.runState.recordChiefProgress(report, this.clock.now());
    if (resynced) this.log('resynced', [], `weights differed at step ${report.step}; every replica reloaded the chief's state`);
    return [];
  }

  /**
   * Throws unless member `writerId` may store a checkpoint of `run` at `step` now: it is the
   * current chief (ERR_NOT_CHIEF), a run is in progress (ERR_BAD_STATE), the checkpoint is
   * this run's (ERR_STALE_RUN), and its step lies between the run's start and the class's
   * reported step plus a margin (ERR_STEP_OUT_OF_RANGE). Returns the writer's name.
   */
  admitCheckpoint(writerId: string, run: number, step: number): string {
    const chief = this.members.chief;
    if (!chief || chief.id !== writerId) throw new WebringError('ERR_NOT_CHIEF', 'only the current chief writes checkpoints');
    if (!this.isTraining) throw new WebringError('ERR_BAD_STATE', `room ${this.name} has no run in progress: checkpoints are stored only during a run`);
    if (run !== this.runState.run) throw new WebringError('ERR_STALE_RUN', `a checkpoint of run ${run}; the room's run is ${this.runState.run}`, 'run');
    this.runState.checkpointGuard.admitStep(step, this.runState.step);
    return chief.name;
  }

  /**
   * Checkpoint `id` passed admitCheckpoint and is about to be stored: whether another rank
   * already vouched for its hash (a chief alone in the ring vouches for itself); otherwise it
   * waits for a report of its step.
   */
  noteCheckpoint(id: string, writerId: string, step: number, weightsHash: string): CheckpointTrust {
    const ring = this.members.ring;
    const alone = ring.length === 1 && ring[0]!.id === writerId;
    return this.runState.checkpointGuard.noteCheckpoint(id, step, weightsHash, writerId, alone);
  }

  /**
   * A member's own examples per class (counts only): the teacher's page shows them live.
   * Only for the classes the room collects for, or else those of its run on own data (the
   * running one, or the last); ERR_BAD_STATE while it has neither, ERR_BAD_REQUEST for any
   * other label, and nothing changes: a student cannot fill the teacher's page with labels of
   * its own.
   */
  recordOwnExamples(memberId: string, report: OwnExamplesReport): void {
    const m = this.members.find(memberId);
    if (!m || this.members.isHub(memberId)) throw new WebringError('ERR_NOT_IN_ROOM', 'only students and Node workers hold examples');
    const config = this.runState.config;
    const classes = this.collectSetting?.classes ?? (config && config.data !== 'mnist' ? config.classes : null);
    if (!classes) throw new WebringError('ERR_BAD_STATE', `room ${this.name} collects no examples and has no run on own data`);
    const stranger = Object.keys(report.counts).find((label) => !classes.includes(label));
    if (stranger !== undefined) throw new WebringError('ERR_BAD_REQUEST', `room ${this.name} collects ${classes.join(', ')}; not ${JSON.stringify(stranger)}`, 'counts');
    m.ownExamples = { ...report.counts };
  }

  recordEvaluation(memberId: string, report: EvaluationReport): void {
    const m = this.requireMemberOfRun(memberId, report.run);
    if (this.members.chief === m) this.runState.recordEvaluation(report);
  }

  /**
   * Every replica ends at the same step; the chief's report ends the run, because the chief
   * reports only after its final checkpoint is stored. A failure report from anyone ends it.
   */
  recordFinished(memberId: string, report: FinishReport): MembershipChange {
    const m = this.requireMemberOfRun(memberId, report.run);
    if (!this.isTraining) return NO_CHANGE;
    if (report.reason !== 'failed' && this.members.chief !== m) return NO_CHANGE;
    const admitted = this.members.admitWaiting(null).length > 0;
    if (report.reason === 'failed') {
      // The ring could not heal itself: everyone stops, and the room goes back to the
      // latest checkpoint in a fresh generation (a fresh ring).
      this.runState.end('idle', { code: 'ERR_PEER_FAILED', message: report.message ?? report.code ?? 'a worker failed' });
      return { generation: this.bumpGeneration(), trainingAborted: true };
    }
    this.runState.finishAt(report.step);
    this.runState.end('done', null);
    return admitted ? { generation: this.bumpGeneration(), trainingAborted: false } : NO_CHANGE;
  }

  /** Joiners admitted too late to take part: the run ended before the ring handed them the state. */
  takeAdmittedWithoutState(): string[] {
    return this.members.takeAwaitingState();
  }

  snapshot(): Generation {
    return { room: this.name, generation: this.currentGeneration, members: this.members.ring.map((m, rank) => this.members.info(m, rank)), hub: this.hubInfo() };
  }

  status(): RoomStatus {
    const run = this.runState.record;
    const ring = this.members.ring;
    return {
      room: this.name,
      state: run.state,
      run: run.run,
      generation: this.currentGeneration,
      step: run.step,
      epoch: run.epoch,
      chief: ring[0]?.id ?? null,
      members: ring.map((m, rank) => this.members.info(m, rank)),
      hub: this.hubInfo(),
      waiting: this.members.waiting.map((m) => this.members.info(m, null)),
      config: run.config,
      totalSteps: this.runState.totalSteps(ring.length),
      metrics: { loss: run.loss, accuracy: run.accuracy, trainAccuracy: run.trainAccuracy },
      lastError: run.lastError,
      dropped: [...run.dropped],
      consistency: { ...run.consistency },
      events: this.events.slice(-ROOM_EVENTS_SHOWN),
      // What was served is counted where it is served (edge/data-api.ts), which fills it in.
      data: { dataset: run.config?.dataset ?? null, datasetBytes: run.config ? trainingSetBytes(run.config.dataset) : 0, bytesServed: 0 },
      joins: run.joins ?? [],
      collect: this.collectSetting,
      hubAccess: this.hubAccess(),
      seats: { perAddress: this.seatsPerAddress, defaultPerLanAddress: DEFAULT_SEATS_PER_LAN_ADDRESS },
    };
  }

  private hubAccess(): RoomStatus['hubAccess'] {
    const { accusers, needed } = this.hubRole.accusationsOf(this.members.ring, this.members.hub);
    return { barred: this.hubBarred(), accusers, accusersNeeded: needed };
  }

  metrics(): RoomMetrics {
    return this.runState.metrics();
  }

  private hubInfo(): MemberInfo | null {
    const hub = this.members.hub;
    return hub ? this.members.info(hub, null) : null;
  }

  /**
   * The reporting member, when the report belongs to the running run or to the run that just
   * ended (replicas send their last reports a moment after the first one finished the run).
   * Ring members only, but the hub where `hub` allows it (an accusation): it trains nothing,
   * so its reports of progress, evaluations, drops or the end are refused like a waiting
   * member's, with ERR_NOT_IN_ROOM, and change nothing.
   */
  private requireMemberOfRun(memberId: string, run: number, allow: { hub: boolean } = { hub: false }): Member {
    const hub = allow.hub && this.members.isHub(memberId) ? this.members.hub : null;
    const m = hub ?? this.members.findInRing(memberId);
    if (!m) {
      const why = this.members.isHub(memberId) ? 'the hub trains nothing; ' : '';
      throw new WebringError('ERR_NOT_IN_ROOM', `${why}only ring members report training progress`);
    }
    if (run !== this.runState.run) throw new WebringError('ERR_STALE_RUN', `report for run ${run}; the room's run is ${this.runState.run}`);
    return m;
  }

  private requireCurrentGeneration(what: string, generation: number): void {
    if (generation !== this.currentGeneration) {
      throw new WebringError('ERR_STALE_GENERATION', `${what} for generation ${generation}; the room is at ${this.currentGeneration}`);
    }
  }

  private log(kind: RoomEventKind, members: string[], detail: string): void {
    this.events.push({ at: this.clock.now(), kind, generation: this.currentGeneration, step: this.runState.step, members, detail });
    if (this.events.length > MAX_ROOM_EVENTS) this.events.splice(0, this.events.length - MAX_ROOM_EVENTS);
  }

  private bumpGeneration(): Generation {
    this.members.bumpGeneration(this.clock.now());
    return this.snapshot();
  }
}
