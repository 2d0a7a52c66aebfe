/**
 * The folder signaling-server/rooms/ owns the classroom as shared state: membership and
 * generations (membership.ts), the run (run-state.ts) and the watch on its progress
 * (stall-watch.ts), the ring:evict trust rule (accusations.ts), the hub's role and bar
 * (hub-role.ts, hub-access.ts), seats per client address (seats.ts), the checks on a chief's
 * drop (drop-check.ts) and checkpoints (checkpoint-guard.ts), the codec for Redis and
 * room.json (room-codec.ts), where rooms live (room-store.ts, redis-room-store.ts,
 * persisting-room-store.ts over room-persistence.ts), checkpoints on disk
 * (checkpoint-store.ts), runs and admissions (runs.ts), membership broadcasts
 * (membership-broadcast.ts), the sweep of members who did not come back
 * (reconnect-sweep.ts), nodes sharing rooms (cluster.ts), clock and timers (wall-clock.ts,
 * timers.ts), and what socket-facing parts receive (room-context.ts). It is the server's
 * lowest layer and imports only shared/: edge/, handlers/ and the wiring use rooms, never
 * the other way round.
 *
 * This file: one classroom, the facade the handlers use. Pure state, no sockets and no
 * timers: the handlers translate events into these calls and broadcast what they return.
 * Time comes from the Clock it is given. The state and the steps every change shares are
 * room-core.ts's; removals, reports and the status have files of their own (removals.ts,
 * run-reports.ts, room-status.ts).
 */
import { DEFAULT_START_CONFIG } from '../../shared/tasks/start-config';
import { WebringError, type ErrorBody } from '../../shared/protocol/errors';
import { type DropRequest, type EvaluationReport, type OwnExamplesReport, type CollectSetting, type HubBar, type EvictRequest, type FinishReport, type Generation, type DeviceProbe, type MetricPoint, type ProgressReport, type RoomMetrics, type RoomStatus, type StartConfig, type TrainStart, type ResumePoint } from '../../shared/protocol';
import type { Clock } from '../../shared/util/clock';
import type { NewMember } from './membership';
import type { CheckpointTrust } from '../../shared/checkpoints/checkpoint';
import { checkRelayAllowed, recordRelayStatement, type RelayStatement } from './relay-partners';
import { NO_CHANGE, RoomCore, type MembershipChange, type RoomParts } from './room-core';
import * as removals from './removals';
import type { Eviction, HubRemoval } from './removals';
import * as reports from './run-reports';
import { evictKeyless, type KeylessEviction } from './keyless';
import { roomStatus } from './room-status';
import { endIfStalled, stallOf, type Stall } from './stall-watch';
import { requestReform, type Reform } from './reform-votes';
import { vouchForSharedAddresses } from './secure-count';

export type { NewMember } from './membership';

/** How old a generation must be before a member's request re-forms it (reform-votes.ts). */
export { REFORM_MIN_GENERATION_AGE_MS } from './reform-votes';

export interface Admission {
  generation: Generation;
  /** Ids of the members admitted into the running ring. */
  joiners: string[];
  /** What each joiner is told: the run in progress, to be joined with the chief's live state. */
  start: TrainStart;
}

export class Room {
  private readonly core: RoomCore;

  /** An empty room, or (from the codec) one rebuilt from its parts, which it then owns. */
  constructor(
    readonly name: string,
    clock: Clock,
    parts?: RoomParts,
    history: MetricPoint[] = [],
  ) {
    this.core = new RoomCore(name, clock, parts, history);
  }

  /** The room as plain data for the codec; the room's own objects, not copies. */
  get parts(): Readonly<RoomParts> {
    return { membership: this.core.members.state, run: this.core.runState.record, accusations: this.core.accusations.record, events: this.core.events, collect: this.core.collectSetting };
  }

  /**
   * The loss points this room holds. A room rebuilt from its record starts without history,
   * so after a change these are the points the change recorded, which a store appends to
   * the history it keeps apart.
   */
  historyPoints(): readonly MetricPoint[] {
    return this.core.runState.historyPoints;
  }

  get size(): number {
    return this.core.members.size;
  }

  get isEmpty(): boolean {
    return this.size === 0;
  }

  /** Nobody is in it, nothing trains, it collects for nothing, bars no hub and keeps no seat setting: the store may forget it. */
  get isDisposable(): boolean {
    const seats = this.core.members;
    return this.isEmpty && !this.isTraining && this.core.collectSetting === null && this.hubBarred() === null && seats.seatsPerAddress === null && !seats.sharedAddressVouched;
  }

  /** The teacher's cap on seats per client address, or null for the defaults by address (seats.ts). */
  get seatsPerAddress(): number | null {
    return this.core.members.seatsPerAddress;
  }

  /** Sets (a number) or clears (null) the teacher's cap; members already in keep their seats. */
  setSeatsPerAddress(cap: number | null): void {
    this.core.members.seatsPerAddress = cap;
  }

  /** Whether the teacher vouched that members sharing an address are distinct devices (secure-count.ts). */
  get sharedAddressVouched(): boolean {
    return this.core.members.sharedAddressVouched;
  }

  /** The teacher vouches (or stops) that members sharing an address are distinct devices (secure-count.ts). */
  vouchForSharedAddresses(vouched: boolean): MembershipChange {
    return vouchForSharedAddresses(this.core, vouched);
  }

  /** What the students collect (a task's items, and its classes), or null. */
  get collect(): CollectSetting | null {
    return this.core.collectSetting;
  }

  /** Opens, changes (task, classes) or closes (null) collecting; the examples stay on the students' devices. */
  setCollect(setting: CollectSetting | null): void {
    this.core.collectSetting = setting === null ? null : { ...setting, ...(setting.classes ? { classes: [...setting.classes] } : {}) };
  }

  /** Someone could train: the ring has a member (a hub alone trains nothing). */
  get hasWorkers(): boolean {
    return this.core.members.ring.length > 0;
  }

  get currentGeneration(): number {
    return this.core.currentGeneration;
  }

  /** A run is in progress (training, or paused by the teacher). */
  get isTraining(): boolean {
    return this.core.isTraining;
  }

  /** Members wait to be admitted into the running ring. */
  get hasWaiting(): boolean {
    return this.core.members.waiting.length > 0;
  }

  get runConfig(): StartConfig | null {
    return this.core.runState.config;
  }

  /** The current run's number, or the last one's once it ended; 0 before the first Start. */
  get runNumber(): number {
    return this.core.runState.record.run;
  }

  /**
   * What the data service's byte budgets follow (edge/data-budget.ts): the run, the epoch the
   * class is in (the chief reports its data cursor's after every turn), the generation and the ring's size.
   */
  get dataWindow(): { run: number; epoch: number; generation: number; ringSize: number } {
    const run = this.core.runState.record;
    return { run: run.run, epoch: run.epoch, generation: this.currentGeneration, ringSize: this.core.members.ring.length };
  }

  get maxToKeep(): number {
    return this.core.runState.config?.maxToKeep ?? DEFAULT_START_CONFIG.maxToKeep;
  }

  /** The signaling nodes holding this room's connections. */
  get nodes(): Set<string> {
    return this.core.members.nodes;
  }

  /**
   * A known member comes back on a new connection (after a server restart or a network
   * blip): same id, index and rank, and no new generation, so a live ring is not disturbed.
   */
  rejoin(memberId: string, tokenHash: string, socketId: string, node: string | null = null, probe: DeviceProbe | null = null, address?: string): { index: number } | null {
    return this.core.members.rejoin(memberId, tokenHash, socketId, node, probe, address);
  }

  /**
   * Members whose signaling node is gone (it crashed or was killed, so their connections
   * closed without a word) count as disconnected from now; they have a grace period to
   * reconnect to another node (overdue). Returns whether anything changed.
   */
  markNodesGone(isAlive: (node: string) => boolean): boolean {
    return this.core.members.markNodesGone(isAlive, this.core.clock.now());
  }

  /** Members disconnected for `graceMs` or longer, to be dropped like a closed tab. */
  overdue(graceMs: number): string[] {
    return this.core.members.overdue(this.core.clock.now(), graceMs);
  }

  /** The member holding the token with this digest, and whether it is the current chief. */
  memberByTokenHash(tokenHash: string): { id: string; chief: boolean } | null {
    return this.core.members.memberByTokenHash(tokenHash);
  }

  /** Whether a member holds or held `tokenHash` here lately: it passes the wrong-code lockout (edge/socket-auth.ts). */
  knowsToken = (tokenHash: string): boolean => this.core.members.knowsToken(tokenHash);

  /**
   * Notes that member `id` published its key for `run` and `generation`; ERR_BAD_REQUEST if
   * it already did for this ring or a later one. Kept on the member, not its connection: a
   * reconnect must not publish a second key for the same ring.
   */
  notePublishedKey(id: string, run: number, generation: number): void {
    const m = this.core.members.find(id);
    if (!m) throw new WebringError('ERR_NOT_IN_ROOM', `member ${id} is not in room ${this.name}`);
    const last = m.publishedKey;
    if (last && last.run === run && last.generation >= generation) {
      throw new WebringError('ERR_BAD_REQUEST', `one key per ring: this member already published one for run ${last.run}, generation ${last.generation}`);
    }
    m.publishedKey = { run, generation };
  }

  socketIdOf(id: string): string | null {
    return this.core.members.find(id)?.socketId ?? null;
  }

  /** Records a member's relay signal; checkRelay throws ERR_RELAY_REFUSED unless `from` may relay to `to` on `linkId` (relay-partners.ts). */
  saidRelay(statement: RelayStatement): void {
    recordRelayStatement(this.core.members, statement);
  }
  checkRelay(from: string, to: string, linkId: string): void {
    checkRelayAllowed(this.core.members, from, to, linkId);
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
      this.core.hubRole.refuseWhileBarred(this.name);
      const hub = this.core.members.addHub(member);
      this.core.hubRole.hubJoined();
      const change = { generation: this.core.bumpGeneration(), trainingAborted: false };
      this.core.log('hub-joined', [hub.name], '');
      return { index: hub.index, change, awaitingAdmission: false };
    }
    const waits = this.isTraining;
    const joined = this.core.members.add(member, waits);
    if (waits) return { index: joined.index, change: NO_CHANGE, awaitingAdmission: true };
    const change = { generation: this.core.bumpGeneration(), trainingAborted: false };
    this.core.log('joined', [joined.name], '');
    return { index: joined.index, change, awaitingAdmission: false };
  }

  /**
   * Admits every waiting member into the running ring in one generation. They come after
   * the current members (their indexes are higher), so the ring only grows at its end
   * and the survivors keep their ranks and chief.
   */
  admitWaiting(): Admission | null {
    const config = this.core.runState.config;
    if (!this.isTraining || !this.hasWaiting || !config) return null;
    // One admission at a time (formation.ts): the next waits until the ring switched to this one.
    if (this.core.runState.formation.admissionForming) return null;
    const classStep = this.core.trainedStep;
    const joiners = this.core.members.admitWaiting(this.core.runState.step);
    const generation = this.core.bumpGeneration();
    this.core.log('admitted', joiners.map((m) => m.name), `${joiners.length} joiner(s) take the chief's live state`);
    this.core.runState.recordAdmission(this.currentGeneration, joiners.map((m) => m.name), classStep);
    const start: TrainStart = { run: this.core.runState.run, generation: this.currentGeneration, config, startStep: this.core.runState.step, resume: null, admitted: true };
    return { generation, joiners: joiners.map((m) => m.id), start };
  }

  /**
   * Admission `generation`'s deadline passed (runs.ts): still forming after its turns
   * (formation.ts), it applies at once (switchNow), without the vote one member could
   * withhold forever. `again`: the class has not trained those turns yet; look later.
   */
  admissionOverdue(generation: number): { change: MembershipChange; again: boolean } {
    const formation = this.core.runState.formation;
    if (!this.isTraining || !formation.forming(generation)) return { change: NO_CHANGE, again: false };
    if (!formation.admissionOverdue(generation, this.core.trainedStep, this.core.runState.stepsPerTurn)) return { change: NO_CHANGE, again: true };
    this.core.log('reformed', [], `admission of generation ${generation} overdue: applied without the ring's vote`);
    return { change: { generation: { ...this.core.bumpGeneration(), switchNow: true }, trainingAborted: false }, again: false };
  }

  /**
   * A member is gone. During a run the survivors re-form at once and go on from the new
   * chief's state; only when nobody is left does the run end. The hub leaving never ends a
   * run: the ring goes on with the other algorithms, in a new generation without the hub.
   */
  leave(id: string): MembershipChange {
    if (this.core.members.isHub(id)) return this.core.removeHub(id, '');
    if (this.core.members.removeWaiting(id)) return NO_CHANGE;
    const gone = this.core.members.removeFromRing(id);
    if (!gone) return NO_CHANGE;
    const chief = this.core.members.chief;
    this.core.log('left', [gone.member.name], gone.rank === 0 && chief ? `chief now ${chief.name}` : '');
    return this.core.afterRemoval();
  }

  /** The chief drops a straggler (removals.ts); it may join again. */
  drop(reporterId: string, request: DropRequest): MembershipChange {
    return removals.dropStraggler(this.core, reporterId, request);
  }

  /** A ring member names a sender whose message its ring rejected (removals.ts, accusations.ts). */
  evict(reporterId: string, request: EvictRequest): Eviction {
    return removals.evict(this.core, reporterId, request);
  }

  /** The key deadline of a secure run's `generation` passed: whoever published no key goes (key-deadline.ts). */
  evictKeyless(generation: number): KeylessEviction {
    return evictKeyless(this.core, generation);
  }

  /**
   * Why hub joins are refused now, or null (hub-role.ts). The teacher's removal holds until
   * the teacher allows a hub again (allowHub); the server's, until the run it was made in ends.
   */
  hubBarred(): HubBar | null {
    return this.core.hubRole.barred();
  }

  /** The teacher removes the hub (removals.ts); hub joins are refused until the teacher allows one again. */
  removeHubAsTeacher(): HubRemoval {
    return removals.removeHubAsTeacher(this.core);
  }

  /** The teacher lets a hub join again (POST /api/rooms/:room/hub/allow); whether hub joins were refused. */
  allowHub(): boolean {
    const barred = this.core.hubRole.allow();
    if (barred) this.core.log('hub-allowed', [], 'the teacher lets a hub join again');
    return barred;
  }

  /**
   * A ring member asks for generation `generation` to be re-formed: a vote, or with
   * `unreachable` a report of the neighbours it cannot reach (reform-votes.ts).
   */
  reform(memberId: string, generation: number, reason: string, unreachable: readonly string[] = []): Reform {
    return requestReform(this.core, memberId, generation, reason, unreachable);
  }

  /** Sheds the members of `generation` that the reports say cannot be reached (removals.ts). */
  shedUnreachable(generation: number): removals.Shedding {
    return removals.shedUnreachable(this.core, generation);
  }

  /** Throws unless a run could start now. */
  assertCanStart(): void {
    if (this.isTraining) throw new WebringError('ERR_BAD_STATE', `room ${this.name} is already training`);
    if (this.core.members.ring.length === 0) throw new WebringError('ERR_NO_WORKERS', `no workers have joined room ${this.name}`);
  }

  start(config: StartConfig, resume: ResumePoint | null): TrainStart {
    this.assertCanStart();
    const run = this.core.runState.start(config, resume, this.core.clock.now());
    this.core.accusations.reset();
    this.core.members.resetForRun(this.core.runState.step, resume?.weightsHash ?? null);
    return { run, generation: this.currentGeneration, config, startStep: this.core.runState.step, resume, admitted: false };
  }

  /** Checks that a stop makes sense; the replicas agree on the step to stop after. */
  requestStop(): void {
    if (!this.isTraining) throw new WebringError('ERR_BAD_STATE', `room ${this.name} is not training`);
  }

  /** The teacher pauses; the replicas agree on the step to pause after. */
  pause(): void {
    this.core.runState.pause();
  }

  resume(): void {
    this.core.runState.resume(this.core.clock.now());
  }

  /** Why the run counts as stalled now (its class made no progress for longer than its pace allows: stall-watch.ts), or null. */
  stalled(floorMs?: number): ErrorBody | null {
    return stallOf(this.core, this.core.clock.now(), floorMs);
  }

  /** Ends the run if it is stalled now (stall-watch.ts). */
  endIfStalled(floorMs?: number): Stall | null {
    return endIfStalled(this.core, this.core.clock.now(), floorMs);
  }

  /** A ring member's report of a step (run-reports.ts): the checkpoints whose trust it changed, for the store to write down. */
  recordProgress(memberId: string, report: ProgressReport): reports.ProgressOutcome {
    return reports.recordProgress(this.core, memberId, report);
  }

  /** Throws unless member `writerId` may store a checkpoint of `run` at `step` now (run-reports.ts); returns the writer's name. */
  admitCheckpoint(writerId: string, run: number, step: number): string {
    return reports.admitCheckpoint(this.core, writerId, run, step);
  }

  /** Checkpoint `id` is about to be stored: whether another rank already vouched for its hash (run-reports.ts). */
  noteCheckpoint(id: string, writerId: string, step: number, weightsHash: string): CheckpointTrust {
    return reports.noteCheckpoint(this.core, id, writerId, step, weightsHash);
  }

  /** A member's own examples per class, counts only, for the classes the room collects for (run-reports.ts). */
  recordOwnExamples(memberId: string, report: OwnExamplesReport): void {
    reports.recordOwnExamples(this.core, memberId, report);
  }

  /** A ring member's evaluation; the chief's is the room's. */
  recordEvaluation(memberId: string, report: EvaluationReport): void {
    reports.recordEvaluation(this.core, memberId, report);
  }

  /** A ring member's report of the run's end (run-reports.ts): the chief's ends the run, and so does anyone's failure. */
  recordFinished(memberId: string, report: FinishReport): reports.FinishOutcome {
    return reports.recordFinished(this.core, memberId, report);
  }

  /** Joiners admitted too late to take part: the run ended before the ring handed them the state. */
  takeAdmittedWithoutState(): string[] {
    return this.core.members.takeAwaitingState();
  }

  snapshot(): Generation {
    return this.core.snapshot();
  }

  /** What the room API and the teacher's page show of the room (room-status.ts). */
  status(): RoomStatus {
    return roomStatus(this.core);
  }

  metrics(): RoomMetrics {
    return this.core.runState.metrics();
  }
}
