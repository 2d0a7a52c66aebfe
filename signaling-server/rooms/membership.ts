/**
 * Who is in a room: ring members ordered by index (rank is the position, rank 0 the chief),
 * members waiting to be admitted into a running ring, the hub (at most one member of kind
 * 'hub': outside the ring, no rank, never chief, trains nothing), the next index to hand
 * out, and the generation number that every membership change raises. Also the one disconnect mechanism:
 * a member whose connection is gone without a goodbye (its signaling node died, or the
 * server restarted) is stamped with the time, and is overdue once the reconnect grace has
 * passed; a rejoin clears the stamp.
 */
import { WebringError } from '../../shared/protocol/errors';
import { sameAddress, seatsPerAddress } from './seats';
import { MAX_ROOM_MEMBERS, type Backend, type DeviceProbe, type HubBar, type MemberInfo, type ProgressReport, type WorkerKind } from '../../shared/protocol';
import { randomInt } from 'node:crypto';

/** Mask-graph seeds are drawn below this: 32 bits, what the graph's permutation takes. */
const MASK_SEED_LIMIT = 2 ** 32;
/** How many departed members' tokens a room remembers for the lockout: a class, twice. */
const MAX_LEFT_TOKENS = 64;

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
  /** Its admission probe; absent in records written before probes existed. */
  probe?: DeviceProbe | null;
  /** Its own examples per class (counts only), as it last reported them; absent before any report. */
  ownExamples?: Record<string, number>;
  /** The signaling node holding the member's connection (several nodes share rooms over Redis); null on a single server. */
  node: string | null;
  /** The client address it joined (or last rejoined) from, for the seat limit (seats.ts); absent in older records. */
  address?: string;
}

/** What a member's progress reports say about it: the same fields the room API shows. */
type ReportedProgress = Pick<MemberInfo, 'examplesPerSec' | 'step' | 'weightsHash' | 'computeMs' | 'batchShare' | 'linkMBps' | 'learningRate' | 'speedVsMedian' | 'collective' | 'bytesSent'>;

export interface Member extends NewMember, ReportedProgress {
  index: number;
  /** Admitted into a running ring and not yet trained a step there (no state yet). */
  awaitingState: boolean;
  /** When its connection was found gone (ms on the room's clock), or null; it has a grace period to come back. */
  disconnectedAt: number | null;
  /** The run and generation of the last secure-aggregation key it published: one per ring, whatever its connection (issue 38). */
  publishedKey?: { run: number; generation: number };
  /** The generation of its last progress report: within one, its steps only go forward (run-reports.ts). */
  reportedGeneration?: number;
}

/** Membership as plain data: what the room codec stores. */
export interface MembershipState {
  nextIndex: number;
  generation: number;
  /** Ring members, ordered by index. */
  active: Member[];
  /** Joined while training ran; admitted together into the running ring. */
  waiting: Member[];
  /** The member of kind 'hub', which sums gradients for the hub collective; never in `active` or `waiting`. */
  hub: Member | null;
  /** Why hub joins are refused for now (the teacher removed the hub, or the server did); absent in older records. */
  hubBar?: HubBar | null;
  /** When the current generation was made (ms on the room's clock); absent in records from before, and read as long ago. */
  generationAt?: number;
  /** The teacher's cap on seats per client address (seats.ts); null or absent: the defaults by address. */
  seatsPerAddress?: number | null;
  /** The teacher vouched that members sharing an address are distinct devices (secure-count.ts); absent: not vouched. */
  sharedAddressVouched?: boolean;
  /**
   * The current generation's mask-graph seed (shared/secagg/mask-graph.ts), drawn at random
   * when the generation was made, so no classmate can compute a future generation's graph
   * (issue 38); absent in records from before (0).
   */
  maskSeed?: number;
  /**
   * The token hashes of the last members to leave (MAX_LEFT_TOKENS): their reconnects
   * still pass the wrong-code lockout (edge/socket-auth.ts), since the room drops a member
   * whose connection broke before it reconnects. Absent in records from before.
   */
  leftTokens?: string[];
  /** The ring of the current generation and of the one before, as made: who may relay to whom (relay-partners.ts); absent in records from before. */
  generationRing?: RingShape;
  previousRing?: RingShape | null;
  /** The relay signals members sent (relay-partners.ts); absent in records from before. */
  relayed?: RelayStatement[];
}

/** One member said it relays its link `linkId` to `to` (relay-partners.ts). */
export interface RelayStatement {
  from: string;
  to: string;
  linkId: string;
}

/** A generation's ring by rank, and its hub: enough to work out which members link (shared/protocol/topology.ts). */
export interface RingShape {
  ring: string[];
  hub: string | null;
}

const emptyMembership = (): MembershipState => ({ nextIndex: 0, generation: 0, active: [], waiting: [], hub: null });

const byIndex = (a: Member, b: Member) => a.index - b.index;

export class Membership {
  constructor(
    private readonly room: string,
    private readonly s: MembershipState = emptyMembership(),
  ) {}

  /** The state the codec stores; owned by this membership, not a copy. */
  get state(): Readonly<MembershipState> {
    return this.s;
  }

  get generation(): number {
    return this.s.generation;
  }

  /** Everyone the room holds, the hub included (it takes a place of MAX_ROOM_MEMBERS, and keeps the room alive). */
  get size(): number {
    return this.s.active.length + this.s.waiting.length + (this.s.hub ? 1 : 0);
  }

  /** Ring members by rank. */
  get ring(): readonly Member[] {
    return this.s.active;
  }

  get waiting(): readonly Member[] {
    return this.s.waiting;
  }

  get chief(): Member | undefined {
    return this.s.active[0];
  }

  get hub(): Member | null {
    return this.s.hub;
  }

  /** The recorded removal of the hub, expired or not (hub-role.ts decides whether it still holds). */
  get hubBar(): HubBar | null {
    return this.s.hubBar ?? null;
  }

  set hubBar(bar: HubBar | null) {
    this.s.hubBar = bar;
  }

  /** Every member: in the ring, waiting, and the hub (liveness and reconnects concern it like anyone). */
  get all(): Member[] {
    return [...this.s.active, ...this.s.waiting, ...(this.s.hub ? [this.s.hub] : [])];
  }

  find(id: string): Member | undefined {
    return this.all.find((m) => m.id === id);
  }

  isHub(id: string): boolean {
    return this.s.hub?.id === id;
  }

  findInRing(id: string): Member | undefined {
    return this.s.active.find((m) => m.id === id);
  }

  rankOf(id: string): number {
    return this.s.active.findIndex((m) => m.id === id);
  }

  /** Membership changed at `now`: the ring forms anew under the next generation number. */
  bumpGeneration(now: number): number {
    this.s.generationAt = now;
    this.s.previousRing = this.s.generationRing ?? null;
    this.s.generationRing = this.ringShape();
    this.s.maskSeed = randomInt(MASK_SEED_LIMIT);
    return ++this.s.generation;
  }

  /** The ring as it is now, by rank, and the hub. */
  ringShape(): RingShape {
    return { ring: this.s.active.map((m) => m.id), hub: this.s.hub?.id ?? null };
  }

  /** The ring of the generation before the current one, when the room recorded it. */
  get previousRingShape(): RingShape | null {
    return this.s.previousRing ?? null;
  }

  /** The relay signals members sent (relay-partners.ts), oldest first. */
  get relayStatements(): readonly RelayStatement[] {
    return this.s.relayed ?? [];
  }

  set relayStatements(statements: readonly RelayStatement[]) {
    this.s.relayed = [...statements];
  }

  /** The current generation's mask-graph seed. */
  get maskSeed(): number {
    return this.s.maskSeed ?? 0;
  }

  /** How long ago (ms) the current generation was made, at `now`; a record from before the stamp reads as long ago. */
  generationAgeMs(now: number): number {
    return now - (this.s.generationAt ?? Number.NEGATIVE_INFINITY);
  }

  /** Adds a member with the next index, to the ring or (while a run trains) to the waiting list. */
  add(member: NewMember, waits: boolean): Member {
    const joined = this.admit(member);
    (waits ? this.s.waiting : this.s.active).push(joined);
    return joined;
  }

  /** Makes a member of kind 'hub' the room's hub, with the next index; refused while the room has one. */
  addHub(member: NewMember): Member {
    if (this.s.hub) throw new WebringError('ERR_HUB_TAKEN', `room ${this.room} already has a hub (${this.s.hub.name})`);
    const joined = this.admit(member);
    this.s.hub = joined;
    return joined;
  }

  /** Removes the hub when it is `id`; the hub removed, or null. */
  removeHub(id: string): Member | null {
    const hub = this.s.hub;
    if (hub?.id !== id) return null;
    this.s.hub = null;
    return hub;
  }

  /** The teacher's cap on seats per client address, or null for the defaults (seats.ts). */
  get seatsPerAddress(): number | null {
    return this.s.seatsPerAddress ?? null;
  }

  set seatsPerAddress(cap: number | null) {
    this.s.seatsPerAddress = cap;
  }

  /** Whether the teacher vouched that members sharing an address are distinct devices (secure-count.ts). */
  get sharedAddressVouched(): boolean {
    return this.s.sharedAddressVouched ?? false;
  }

  set sharedAddressVouched(vouched: boolean) {
    this.s.sharedAddressVouched = vouched;
  }

  private admit(member: NewMember): Member {
    if (this.size >= MAX_ROOM_MEMBERS) {
      throw new WebringError('ERR_ROOM_FULL', `room ${this.room} already has ${MAX_ROOM_MEMBERS} members`);
    }
    // The hub holds the teacher's hub key; its seat is never the one a student lacks.
    if (member.address !== undefined && member.kind !== 'hub') this.checkSeatAt(member.address);
    return { ...member, index: this.s.nextIndex++, examplesPerSec: 0, step: 0, weightsHash: null, computeMs: 0, batchShare: 0, linkMBps: 0, learningRate: 0, speedVsMedian: 0, collective: null, bytesSent: 0, awaitingState: false, disconnectedAt: null };
  }

  /** Throws ERR_SEAT_LIMIT when `address` holds its cap of seats already (`moving`, a member coming from elsewhere, not counted). */
  private checkSeatAt(address: string, moving: Member | null = null): void {
    const cap = seatsPerAddress(address, this.seatsPerAddress);
    const held = this.all.filter((m) => m !== moving && m.address !== undefined && sameAddress(m.address, address)).length;
    if (held >= cap) {
      throw new WebringError('ERR_SEAT_LIMIT', `this network address already holds ${held} of room ${this.room}'s seats, as many as one address may; the teacher can allow more`);
    }
  }

  /**
   * Moves every waiting member into the ring, after the current members (their indexes are
   * higher), so the ring only grows at its end and the survivors keep their ranks and chief.
   * With `atStep`, they join a running ring at that step and have no state yet.
   */
  admitWaiting(atStep: number | null): Member[] {
    const joiners = this.s.waiting;
    this.s.waiting = [];
    if (atStep !== null) {
      for (const m of joiners) {
        m.step = atStep;
        m.awaitingState = true;
      }
    }
    this.s.active.push(...joiners);
    this.s.active.sort(byIndex);
    return joiners;
  }

  /** Removes a member from the ring; its former rank, or null when it was not in the ring. */
  removeFromRing(id: string): { member: Member; rank: number } | null {
    const rank = this.rankOf(id);
    if (rank < 0) return null;
    const [member] = this.s.active.splice(rank, 1);
    this.rememberToken(member!);
    return { member: member!, rank };
  }

  /** Removes a waiting member; whether it was waiting. */
  removeWaiting(id: string): boolean {
    const at = this.s.waiting.findIndex((m) => m.id === id);
    if (at < 0) return false;
    this.rememberToken(this.s.waiting.splice(at, 1)[0]!);
    return true;
  }

  private rememberToken(m: Member): void {
    const left = (this.s.leftTokens ??= []);
    left.push(m.tokenHash);
    if (left.length > MAX_LEFT_TOKENS) left.splice(0, left.length - MAX_LEFT_TOKENS);
  }

  /** Whether `tokenHash` is a member's of this room, or one of the last to leave it. */
  knowsToken(tokenHash: string): boolean {
    return this.all.some((m) => m.tokenHash === tokenHash) || (this.s.leftTokens ?? []).includes(tokenHash);
  }

  /**
   * A known member comes back on a new connection: same id, index and rank, and no new
   * generation, so a live ring is not disturbed. Null when the id or token is unknown.
   */
  rejoin(memberId: string, tokenHash: string, socketId: string, node: string | null, probe: DeviceProbe | null = null, address?: string): { index: number } | null {
    const m = this.find(memberId);
    if (!m || m.tokenHash !== tokenHash) return null;
    // Its seat is its own already: a member back from another address keeps it, and counts
    // there from now, within that address's cap (issue 38: rejoins moved 12 seats onto two
    // addresses of the class network).
    if (address !== undefined && m.kind !== 'hub' && !(m.address !== undefined && sameAddress(m.address, address))) this.checkSeatAt(address, m);
    m.socketId = socketId;
    m.node = node;
    if (address !== undefined) m.address = address;
    // room.json does not keep probes: a member back after a restart brings its own again.
    if (probe) m.probe = probe;
    m.disconnectedAt = null;
    return { index: m.index };
  }

  /**
   * Members whose signaling node is gone (their connections closed without a word) count as
   * disconnected from `now`. Returns whether anything changed.
   */
  markNodesGone(isAlive: (node: string) => boolean, now: number): boolean {
    let changed = false;
    for (const m of this.all) {
      if (m.socketId !== null && m.node !== null && !isAlive(m.node)) {
        m.socketId = null;
        m.disconnectedAt = now;
        changed = true;
      }
    }
    return changed;
  }

  /** Members disconnected for `graceMs` or longer at `now`, to be dropped like a closed tab. */
  overdue(now: number, graceMs: number): string[] {
    return this.all.filter((m) => m.disconnectedAt !== null && now - m.disconnectedAt >= graceMs).map((m) => m.id);
  }

  /** The signaling nodes holding this room's connections. */
  get nodes(): Set<string> {
    return new Set(this.all.flatMap((m) => (m.node === null || m.socketId === null ? [] : [m.node])));
  }

  /** The member holding the token with this digest (the hub included), and whether it is the current chief. */
  memberByTokenHash(tokenHash: string): { id: string; chief: boolean } | null {
    const m = this.all.find((x) => x.tokenHash === tokenHash);
    return m ? { id: m.id, chief: m === this.chief } : null;
  }

  /** A run starts: every ring member is at its first step, with the resumed weights. */
  resetForRun(step: number, weightsHash: string | null): void {
    for (const m of this.s.active) {
      m.step = step;
      m.weightsHash = weightsHash;
      m.examplesPerSec = 0;
    }
  }

  /** What a member's latest progress report says about it. */
  noteProgress(m: Member, report: ProgressReport): void {
    m.step = report.step;
    m.reportedGeneration = report.generation;
    m.examplesPerSec = report.examplesPerSec;
    m.weightsHash = report.weightsHash;
    m.computeMs = report.computeMs;
    m.batchShare = report.batchShare;
    m.linkMBps = report.linkMBps;
    m.learningRate = report.learningRate;
    m.speedVsMedian = report.speedVsMedian;
    m.collective = report.collective;
    m.bytesSent = report.bytesSent ?? 0;
    m.awaitingState = false;
  }

  /** Joiners still without the ring's state; from now on nobody waits for it. */
  takeAwaitingState(): string[] {
    const ids = this.s.active.filter((m) => m.awaitingState).map((m) => m.id);
    for (const m of this.s.active) m.awaitingState = false;
    return ids;
  }

  /** A member as the API and the generation broadcast show it; `rank` null while waiting, and for the hub. */
  info(m: Member, rank: number | null): MemberInfo {
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
      learningRate: m.learningRate,
      speedVsMedian: m.speedVsMedian,
      collective: m.collective,
      bytesSent: m.bytesSent,
      probe: m.probe ?? null,
      ownExamples: m.ownExamples ?? {},
      connected: m.socketId !== null,
      connecting: m.awaitingState,
      node: m.node,
    };
  }
}
