/** What the server sends: the generation, run starts and stops, the room API's shapes (part of the one protocol; index.ts re-exports it). */
import type { ErrorBody, ErrorCode } from './errors';
import type { IceConfig } from './ice';
import type { CollectSetting, CollectiveReport, DeviceProbe, HubBar, Misbehaviour, NetworkReport } from './messages';
import type { StartConfig } from './start-config';
import type { Backend, RoomState, WorkerKind } from './vocabulary';
// ---------------------------------------------------------------------------
// Shapes the server sends
// ---------------------------------------------------------------------------
export interface MemberInfo {
  id: string;
  name: string;
  /** Monotonically increasing within a room; never reused. */
  index: number;
  /** Position in the generation's ring, or null while waiting to be admitted. */
  rank: number | null;
  backend: Backend;
  kind: WorkerKind;
  adapter: string | null;
  examplesPerSec: number;
  step: number;
  weightsHash: string | null;
  /** Last reported compute time of one step, in ms. */
  computeMs: number;
  /** Share of the last global batch this member trained on (0..1). */
  batchShare: number;
  /** Measured throughput of the link from this member to the next rank (MB/s), 0 before any step. */
  linkMBps: number;
  /** The learning rate of the member's last step; 0 before any. */
  learningRate: number;
  /** Its measured speed against the ring's median (share-balancer.ts); 0 before it is measured. */
  speedVsMedian: number;
  /** The algorithm, link model and time split of the member's last step; null before any. */
  collective: CollectiveReport | null;
  /** Bytes it sent in its last turn's all-reduce (a round's, in local-steps mode); 0 before any. */
  bytesSent: number;
  /** Its admission probe (DeviceProbe), or null when it sent none. */
  probe: DeviceProbe | null;
  /** Its own examples per class (counts only; the examples never leave its device); {} when it reported none. */
  ownExamples: Record<string, number>;
  /** False while the member's signaling connection is down (it may be reconnecting). */
  connected: boolean;
  /**
   * Admitted into the running ring and not in lock-step yet (no step reported since): its
   * links are opening or it waits for the chief's state. What a join storm's progress counts.
   */
  connecting: boolean;
  /** The signaling node holding its connection, when several share rooms over Redis; else null. */
  node: string | null;
}

/** One numbered membership: the ring is `members` in this order, rank 0 is the chief. */
export interface Generation {
  room: string;
  generation: number;
  members: MemberInfo[];
  /**
   * The room's hub member (kind 'hub', rank null), linked to every ring member for the hub
   * collective; absent or null when the room has none. Its joining or leaving is a new
   * generation.
   */
  hub?: MemberInfo | null;
  /**
   * Applied at once by every member, even one that extends its ring: an admission the ring
   * did not switch to by the server's deadline (signaling-server/rooms/formation.ts).
   */
  switchNow?: boolean;
  /**
   * How many distinct clients the members are (signaling-server/rooms/seats.ts: clientOf):
   * tabs of one device count once. Secure aggregation holds below MIN_SECURE_MEMBERS of
   * them, whatever the seats. Absent from older servers: count the members.
   */
  clients?: number;
  /**
   * The seed of this generation's mask graph (shared/secagg/mask-graph.ts), drawn by the
   * server when the generation was made: nobody can compute a later generation's graph in
   * advance. Absent from older servers: 0.
   */
  maskSeed?: number;
}

/** What a resumed run starts from; sent with train:start. */
export interface ResumePoint {
  checkpointId: string;
  step: number;
  dataCursor: { epoch: number; offset: number };
  weightsHash: string;
}

export interface TrainStart {
  /** Counts the room's runs; reports carry it back. */
  run: number;
  generation: number;
  config: StartConfig;
  startStep: number;
  /** The checkpoint every worker restores before the first step, or null for a fresh start. */
  resume: ResumePoint | null;
  /**
   * True for late joiners of a run in progress: they take the whole state (weights,
   * optimizer, cursor) from the live chief when the ring admits them, not from a checkpoint.
   */
  admitted: boolean;
}

/**
 * Why a member was evicted: what it sent (a Misbehaviour its receiver saw), 'accusations'
 * for a reporter over its allowance (signaling-server/rooms/accusations.ts), or 'no-key'
 * for a member of a secure run that published no key for its generation by the server's
 * deadline (signaling-server/rooms/keyless.ts), or 'reforms' for a member that went on asking
 * for re-forms past its cap for the run (signaling-server/rooms/reform-votes.ts).
 */
export type EvictionCause = Misbehaviour | 'accusations' | 'no-key' | 'reforms';

/**
 * Sent to a member taken out of the ring: 'straggler', dropped by the chief for missing the
 * step deadline; 'evicted', for sending data no honest peer sends (or, as a reporter, for a
 * second accusation in one run: signaling-server/rooms/accusations.ts); 'unreachable', shed
 * because its ring links would not open (signaling-server/rooms/formation.ts); 'failed', its
 * own run failed (`detail` has the code), and the class trains on without it. Unreachable
 * and failed members join again by themselves; stragglers and evicted ones do not (a device
 * still too slow would be dropped again and again).
 */
export type MemberDropped =
  | { reason: 'straggler'; step: number; computeMs: number; deadlineMs: number }
  | { reason: 'unreachable'; step: number; detail: string }
  | { reason: 'failed'; step: number; detail: string }
  | { reason: 'evicted'; step: number; misbehaviour: EvictionCause; detail: string }
  /** To the hub only: the teacher removed it (DELETE /api/rooms/:room/hub). */
  | { reason: 'removed'; step: number; detail: string };

/**
 * 'hub-accused': a ring member named the hub (recorded; the hub stays unless the accusers
 * are a majority, see accusations.ts); 'hub-removed': the teacher or the server removed it
 * and refuses hub joins for now; 'hub-allowed': the teacher lets a hub in again.
 */
export const ROOM_EVENT_KINDS = ['joined', 'left', 'admitted', 'dropped', 'evicted', 'resynced', 'reformed', 'hub-joined', 'hub-left', 'hub-accused', 'hub-removed', 'hub-allowed', 'stalled'] as const;
export type RoomEventKind = (typeof ROOM_EVENT_KINDS)[number];

/** What happened to a room's ring, newest last: the teacher page's log and the recovery timings. */
export interface RoomEvent {
  /** Server time, ms since the epoch. */
  at: number;
  kind: RoomEventKind;
  generation: number;
  step: number;
  /** Member names concerned, if any. */
  members: string[];
  detail: string;
}

/** Why a member left the ring against its will (DroppedMember.reason). */
export type DroppedReason = 'straggler' | 'evicted' | 'unreachable' | 'failed';

export interface DroppedMember {
  id: string;
  name: string;
  index: number;
  /**
   * 'straggler': too slow (computeMs, deadlineMs); 'evicted': sent bad ring data
   * (misbehaviour, reportedBy); 'unreachable': its ring links would not open (detail names
   * who could not reach it); 'failed': its own run failed (detail has the code).
   */
  reason: DroppedReason;
  step: number;
  /** Stragglers: the member's compute time and the ring's deadline, ms; 0 for evictions. */
  computeMs: number;
  deadlineMs: number;
  /** Evictions: what the member sent, or 'accusations' for a reporter over its allowance, 'no-key' or 'reforms' (EvictionCause); null for stragglers. */
  misbehaviour: EvictionCause | null;
  /** Evictions: the name of the member whose ring rejected the data; null otherwise. */
  reportedBy: string | null;
  detail: string;
  at: number;
}

export interface TrainStop {
  /**
   * 'failure': the ring could not heal itself; the room goes back to the latest checkpoint.
   * 'ended': to joiners still waiting for the state when the run finished.
   * 'stalled': the class made no progress for too long; the server ended the run with
   * ERR_RUN_STALLED (RoomStatus.lastError says why), and the teacher's Start resumes it.
   */
  reason: 'teacher' | 'failure' | 'ended' | 'stalled';
}

/**
 * The members that could open no WebRTC link to a partner (client isolation, blocked UDP,
 * WebRTC off) and reach it through the server: each with what it relayed so far. Filled in
 * by the server that answers (each node of a cluster knows its own connections).
 */
export interface RelayStatus {
  /** Each relaying member: the bytes it relayed so far, and the partners it relayed to lately (a student whose every link is relayed, or one partner of such a student). */
  members: Array<{ id: string; bytesSent: number; peers: string[] }>;
  /**
   * Members whose relayed messages the server refused lately (signaling-server/handlers/link-relay.ts):
   * ERR_RELAY_REFUSED for a member that is not the sender's ring partner or has not agreed to
   * relay, ERR_RELAY_BACKLOG for a sender that kept sending while its partner's connection was
   * full. An honest device meets neither; `at` is server time, ms since the epoch.
   */
  refused: Array<{ id: string; code: ErrorCode; count: number; at: number }>;
}

/** The room's latest network check (POST /api/rooms/:room/network-check) and what each device answered. */
export interface NetworkCheckStatus {
  check: number;
  /** Server time it started, ms since the epoch. */
  startedAt: number;
  reports: Array<NetworkReport & { member: string }>;
}

export interface RoomStatus {
  room: string;
  state: RoomState;
  /** The current or last run, 0 before the first Start. */
  run: number;
  generation: number;
  step: number;
  /** Outer steps of the run so far: one per step, or one per round of local steps (config.sync). */
  round: number;
  /**
   * What the ring's members sent in the last turn's all-reduce, together (their last
   * reports), and that over the examples the class trained in it: once per round in
   * local-steps mode. Null before the first report.
   */
  bytesSentPerRound: number | null;
  bytesSentPerExample: number | null;
  epoch: number;
  /** How many distinct clients the ring's members are (Generation.clients): a secure run holds below MIN_SECURE_MEMBERS of them. */
  clients: number;
  chief: string | null;
  members: MemberInfo[];
  /** The room's hub member (see Generation.hub), or null. It sees every student's gradient when the hub collective runs. */
  hub: MemberInfo | null;
  /** Students who joined while training ran; they enter at the next generation. */
  waiting: MemberInfo[];
  config: StartConfig | null;
  totalSteps: number | null;
  /** Members dropped as stragglers or evicted for bad ring data during this run; they may join again. */
  dropped: DroppedMember[];
  /** Weight-hash comparisons around the ring, and how many found drift (then resynced from the chief). */
  consistency: { checks: number; mismatches: number; lastMismatchStep: number | null };
  /** The ring's recent history: joins, leaves, admissions, drops, resyncs. */
  events: RoomEvent[];
  /**
   * loss and trainAccuracy: global, from the last step; testLoss: the held-out loss after
   * the last epoch (nats per example: cross-entropy per example for classes, per symbol for
   * text); accuracy: the held-out accuracy, for a task that tells classes apart only (null otherwise).
   */
  metrics: { loss: number | null; accuracy: number | null; trainAccuracy: number | null; testLoss: number | null };
  lastError: ErrorBody | null;
  /**
   * The data service: the run's training set on the wire (examples × exampleBytes, an
   * example's target and features), and what this server has sent of it, and of the test
   * set, since the current run started. Near one training set per epoch means each example
   * travelled once, to the worker that trained it.
   */
  /**
   * `trainBytesServed`: of `bytesServed`, the training split's (the rest is the held-out set,
   * read once per epoch's score). `refused`: the readers the data service turned away in this
   * run and has not served since, newest last; an honest class has none.
   */
  data: { dataset: string | null; datasetBytes: number; bytesServed: number; trainBytesServed: number; exampleBytes: number; refused: DataRefusal[] };
  /** The members whose links go through this server (shared/network/relay-link.ts), as it saw them lately. */
  relay: RelayStatus;
  /** The latest network check, or null before the teacher ran one (filled in by the server that answers). */
  network: NetworkCheckStatus | null;
  /** What the run's recent admissions cost (newest last, at most MAX_JOIN_COSTS). */
  joins: JoinCost[];
  /** The classes the students collect examples for (PUT /api/rooms/:room/collect), or null. */
  collect: CollectSetting | null;
  /**
   * Who may be the hub: `barred` while the teacher (or the server) has removed it; the
   * distinct ring members who accused the current hub in this run, and how many it takes
   * (a majority of the ring) before the server removes it.
   */
  hubAccess: { barred: HubBar | null; accusers: string[]; accusersNeeded: number };
  /**
   * How many of the room's seats one client address may hold (signaling-server/rooms/seats.ts):
   * `perAddress`, the teacher's cap (PUT /api/rooms/:room/seats), or null for the defaults by
   * address, of which a class-network address's is `defaultPerLanAddress`. The server's own
   * machine is never capped. `vouched`: the teacher vouched that members sharing an address
   * are distinct devices, each its own client for secure aggregation (rooms/secure-count.ts).
   */
  seats: { perAddress: number | null; defaultPerLanAddress: number; vouched: boolean };
  /** Why a secure run holds (fewer than MIN_SECURE_MEMBERS distinct clients, and the cause), or null when it does not. */
  secureHold: string | null;
}

/**
 * A reader the data service refused examples (signaling-server/edge/data-budget.ts), until it
 * is served again: it asks again by itself after `retryAfterS`, and waits meanwhile.
 */
export interface DataRefusal {
  /** The member's name, or 'a join-code reader at ADDRESS'. */
  reader: string;
  /** The member's id; null for a reader by join code. */
  memberId: string | null;
  /** Server time of the latest refusal, ms since the epoch. */
  at: number;
  error: ErrorBody;
  retryAfterS: number;
}

/** Admissions a room remembers the cost of. */
export const MAX_JOIN_COSTS = 50;

/** One admission of joiners into a running ring, and what it cost. */
export interface JoinCost {
  generation: number;
  /** The joiners' names. */
  joiners: string[];
  /** The chief's step when they were admitted. */
  atStep: number;
  /** The class's pause for the switch (the chief's ProgressReport.switchPauseMs); null until reported. */
  pauseMs: number | null;
  /** The slowest joiner's time from admission to its first step in lock-step; null until reported. */
  lockStepMs: number | null;
}

export interface MetricPoint {
  /** Server time of the report, ms since the epoch (for rates and the ETA). */
  at: number;
  step: number;
  loss: number;
  trainAccuracy: number;
}

export interface RoomMetrics {
  room: string;
  history: MetricPoint[];
  /** One per epoch: accuracy is null for a task that does not tell classes apart (text). */
  evaluations: Array<{ epoch: number; step: number; accuracy: number | null; testLoss: number }>;
}

/**
 * GET /api/info: how students reach this server, so a page loaded over plain http from a
 * LAN address (not a secure context: no WebGPU) can offer its https twin.
 */
/** Bytes of the certificate's fingerprint a student compares: 8 bytes, 2^64 work to match by chance or force. */
export const CERTIFICATE_FINGERPRINT_BYTES = 8;

export interface ServerInfo {
  /** The room printed at start-up: ROOM, or the generated join code ("K7M-Q2P"). */
  defaultRoom: string;
  /** The task the teacher's form opens with (TASK= at npm start). */
  defaultTask: string;
  httpPort: number;
  /** null when the server runs without HTTPS. */
  httpsPort: number | null;
  /**
   * The start of the HTTPS certificate's SHA-256 fingerprint, as a browser's certificate
   * viewer shows it ("AB:CD:…", CERTIFICATE_FINGERPRINT_BYTES bytes); null without HTTPS.
   * The teacher's screen shows it, and students compare it before they click through the
   * browser's warning: an on-path classmate's certificate would not match.
   */
  certificateFingerprint: string | null;
  /** Student URLs of the default room: https on each LAN address first, then plain http. */
  studentUrls: string[];
  /** The student URL on this machine itself (http://localhost is a secure context). */
  localUrl: string;
}

export type AckResult<T> = ({ ok: true } & T) | { ok: false; error: ErrorBody };
export type Ack<T> = (result: AckResult<T>) => void;

export interface JoinAccepted {
  memberId: string;
  index: number;
  room: string;
  /** Secret of this membership: the chief's checkpoint uploads carry it (Authorization: Bearer). */
  memberToken: string;
  /** ICE servers and fresh TURN credentials for this member's peer connections. */
  ice: IceConfig;
  /** The classes the room collects examples for, or null (then `room:collect` tells of a change). */
  collect: CollectSetting | null;
}

