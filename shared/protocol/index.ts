/**
 * The one wire protocol of webring: socket.io event maps, HTTP bodies and their schemas.
 * Both the server (`new Server<...>()`) and every worker (`io()`) import this file, so
 * there is never a second copy of a message shape. Types describe; the zod schemas
 * below validate, at every entry point, because types are not validation.
 *
 * The folder shared/protocol/ owns what crosses between server and workers: these
 * events and schemas, the error codes (errors.ts) and the join-code format
 * (join-code.ts). It imports nothing from the rest of the project, so every other
 * part may import it.
 */
import { z } from 'zod';
import { joinCodeSchema } from './join-code';
import { WebringError, type ErrorBody } from './errors';

// ---------------------------------------------------------------------------
// Limits (units in the names)
// ---------------------------------------------------------------------------
export const ROOM_NAME_MAX_CHARS = 64;
export const MEMBER_NAME_MAX_CHARS = 40;
export const MAX_ROOM_MEMBERS = 32;
/** SDP offers with many candidates stay well under this; anything larger is abuse. */
export const MAX_SIGNAL_BYTES = 32 * 1024;
/** socket.io closes a connection whose single packet exceeds this. */
export const MAX_SOCKET_PACKET_BYTES = 128 * 1024;
export const MAX_HTTP_JSON_BYTES = 16 * 1024;

export const ROOM_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

// ---------------------------------------------------------------------------
// Vocabulary
// ---------------------------------------------------------------------------
export const BACKENDS = ['webgpu', 'webgl', 'cpu'] as const;
export type Backend = (typeof BACKENDS)[number];

/**
 * 'hub': a non-training member that sums the class's gradients for the hub collective
 * (node-worker/hub.ts, started beside the server with --hub). It is never in the ring's
 * members, never chief, and trains nothing; a generation names it apart (Generation.hub).
 */
export const WORKER_KINDS = ['browser', 'node', 'hub'] as const;
export type WorkerKind = (typeof WORKER_KINDS)[number];

/**
 * What kind of device a worker runs on, for the teacher ("3 laptops, 1 slow tablet"): a
 * browser's from its user agent (client/device-class.ts; a desktop counts as a laptop), a
 * Node worker's from its --device flag ('node' by default).
 */
export const DEVICE_CLASSES = ['laptop', 'tablet', 'phone', 'node'] as const;
export type DeviceClass = (typeof DEVICE_CLASSES)[number];

export const ROOM_STATES = ['idle', 'training', 'paused', 'done'] as const;
export type RoomState = (typeof ROOM_STATES)[number];

export const MODEL_KINDS = ['mlp', 'cnn'] as const;
export type ModelKind = (typeof MODEL_KINDS)[number];

/** Number format of the gradients on the ring's data channels: fp16 halves the bytes. */
export const WIRE_FORMATS = ['fp32', 'fp16'] as const;
export type WireFormat = (typeof WIRE_FORMATS)[number];
/**
 * The all-reduce algorithms: the bandwidth-optimal pipelined ring; recursive
 * halving-doubling (shared/collectives/halving-doubling.ts), latency-optimal for small
 * buffers on many peers; and the hub (shared/collectives/hub-reducer.ts), where every rank
 * sends its buffer to the room's hub member and gets the sum back, which wins on one shared
 * medium (Wi-Fi: a peer-to-peer frame crosses the air twice). 'auto' picks per step from
 * the measured link latency and bandwidth.
 */
export const ALGORITHMS = ['ring', 'halving-doubling', 'hub'] as const;
export type Algorithm = (typeof ALGORITHMS)[number];
export const ALLREDUCE_CHOICES = ['auto', ...ALGORITHMS] as const;
export type AllReduceChoice = (typeof ALLREDUCE_CHOICES)[number];

/**
 * What a run trains on (shared/data/data-service.ts): 'mnist-60k' is the official MNIST
 * split, 60,000 training and 10,000 test digits; 'mnist-10k' a 10,000-digit subset
 * (8,000/2,000), for a lesson that must finish in minutes.
 */
export const DATASET_KINDS = ['mnist-60k', 'mnist-10k'] as const;
export type DatasetKind = (typeof DATASET_KINDS)[number];

/**
 * Whose examples a run trains on: 'mnist' the server's digits (`dataset`), streamed to every
 * worker; 'own' the examples each student collected on their own device, which never leave
 * it (shared/training/own-data.ts); 'mnist+own' both, in one epoch.
 */
export const DATA_KINDS = ['mnist', 'own', 'mnist+own'] as const;
export type DataKind = (typeof DATA_KINDS)[number];

/** The classes of a digits run, in output order: MNIST's labels. */
export const DIGIT_CLASSES = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'] as const;
export const MIN_CLASSES = 2;
export const MAX_CLASSES = 20;
export const CLASS_LABEL_MAX_CHARS = 24;
/** One device holds at most this many own examples: counts and positions travel as exact float32 integers. */
export const MAX_OWN_EXAMPLES_PER_DEVICE = 2 ** 24;
/** Sequence numbers and store counts travel as float32 integers: exact below 2^24. */
export const MAX_OWN_SEQ = MAX_OWN_EXAMPLES_PER_DEVICE - 1;

export const OPTIMIZER_KINDS = ['sgd', 'adam'] as const;
export type OptimizerKind = (typeof OPTIMIZER_KINDS)[number];

// ---------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------
export const roomNameSchema = z
  .string()
  .min(1)
  .max(ROOM_NAME_MAX_CHARS)
  .regex(ROOM_NAME_PATTERN, 'letters, digits, "-" and "_" only');

/** One class of a run: a short label a student picks when collecting ("cat", "7"). */
export const classLabelSchema = z
  .string()
  .trim()
  .min(1)
  .max(CLASS_LABEL_MAX_CHARS)
  .regex(/^[^\p{Cc}]+$/u, 'no control characters');

/** A run's classes in output order: 2 to 20 distinct labels. */
export const classesSchema = z
  .array(classLabelSchema)
  .min(MIN_CLASSES)
  .max(MAX_CLASSES)
  .refine((labels) => new Set(labels).size === labels.length, 'each class once')
  .readonly();

/**
 * What a room's students collect examples for, before the teacher starts a run on the
 * class's own data (own-data.md): the classes, in output order. A room that collects stays
 * while it is empty, so students can reload and come back to it.
 */
export const collectSettingSchema = z.strictObject({ classes: classesSchema });
export type CollectSetting = z.output<typeof collectSettingSchema>;
/** PUT /api/rooms/:room/collect: the classes to collect for, or null to stop collecting. */
export const collectRequestSchema = z.strictObject({ classes: classesSchema.nullable() });
/**
 * PUT /api/rooms/:room/seats: how many seats of the room one client address may hold, or
 * null for the defaults by address (signaling-server/rooms/seats.ts). MAX_ROOM_MEMBERS lets
 * a whole class in from behind one NAT address.
 */
export const seatsRequestSchema = z.strictObject({ perAddress: z.number().int().min(1).max(MAX_ROOM_MEMBERS).nullable() });

/** True when two class lists name the same classes in the same order (the same model outputs). */
export function sameClasses(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((c, i) => c === b[i]);
}

/** True when `classes` are the digits 0–9 in order: the model's outputs are MNIST's labels. */
export function areDigitClasses(classes: readonly string[]): boolean {
  return sameClasses(classes, DIGIT_CLASSES);
}

export const memberNameSchema = z
  .string()
  .trim()
  .min(1)
  .max(MEMBER_NAME_MAX_CHARS);

export const memberIdSchema = z.string().regex(/^[a-z0-9]{8,32}$/);
/** A room's hub key: HMAC-SHA256 of the room name under the server's join secret, hex. */
export const hubKeySchema = z.string().regex(/^[0-9a-f]{64}$/);

/**
 * The recipe a teacher gets without touching the form (docs/recipe.md): Adam at 0.003 after
 * a 50-step warm-up, 32 examples per worker. The MLP visibly learns within a few dozen
 * steps; one epoch of the small CNN on the official MNIST scores above 98 %.
 */
export const DEFAULT_START_CONFIG = {
  model: 'mlp',
  optimizer: 'adam',
  learningRate: 0.003,
  warmupSteps: 50,
  scaleLearningRate: false,
  referenceBatch: 32,
  // On: the lab's mixed class trains 3.4× faster with it, and four equal laptops stay
  // near equal shares (the 15% hysteresis; docs/lab.md).
  balanceShares: true,
  batchSizePerWorker: 32,
  epochs: 2,
  seed: 1234,
  saveEverySteps: 50,
  maxToKeep: 3,
  resumeFrom: 'latest',
  wire: 'fp32',
  allreduce: 'auto',
  dataset: 'mnist-60k',
  data: 'mnist',
  classes: DIGIT_CLASSES,
} as const;

export const startConfigSchema = z.strictObject({
  model: z.enum(MODEL_KINDS).default(DEFAULT_START_CONFIG.model),
  optimizer: z.enum(OPTIMIZER_KINDS).default(DEFAULT_START_CONFIG.optimizer),
  learningRate: z.number().positive().max(10).default(DEFAULT_START_CONFIG.learningRate),
  /**
   * The learning rate climbs linearly from learningRate/warmupSteps to learningRate over
   * the first warmupSteps steps (Goyal et al. 2017), so a fresh model's first large
   * gradients do not throw it off; 0 starts at full rate.
   */
  warmupSteps: z.number().int().min(0).max(1_000_000).default(DEFAULT_START_CONFIG.warmupSteps),
  /**
   * Linear scaling (Goyal et al. 2017): the rate is learningRate × globalBatch / referenceBatch,
   * so a class that grows takes larger steps on its larger batches; after a join or a leave
   * the rate moves to its new value over 20 steps (shared/training/lr-schedule.ts).
   */
  scaleLearningRate: z.boolean().default(DEFAULT_START_CONFIG.scaleLearningRate),
  /** The global batch at which learningRate applies when scaleLearningRate is on. */
  referenceBatch: z.number().int().min(1).max(65_536).default(DEFAULT_START_CONFIG.referenceBatch),
  batchSizePerWorker: z.number().int().min(1).max(1024).default(DEFAULT_START_CONFIG.batchSizePerWorker),
  /**
   * Each worker's share of the global batch (still batchSizePerWorker × N) follows its
   * measured speed, re-balanced every 5 steps with hysteresis (shared/training/share-balancer.ts),
   * so a slow device takes fewer examples instead of holding the class back.
   */
  balanceShares: z.boolean().default(DEFAULT_START_CONFIG.balanceShares),
  epochs: z.number().int().min(1).max(1000).default(DEFAULT_START_CONFIG.epochs),
  /** Optional cap on global steps, for short lessons, demos and tests. */
  maxSteps: z.number().int().min(1).max(10_000_000).optional(),
  /** Seeds weight initialisation and every epoch's data permutation. */
  seed: z.number().int().min(0).max(2 ** 31 - 1).default(DEFAULT_START_CONFIG.seed),
  /** The chief checkpoints every this many steps, at every epoch end and when the run ends. */
  saveEverySteps: z.number().int().min(1).max(1_000_000).default(DEFAULT_START_CONFIG.saveEverySteps),
  /** Checkpoints kept on the server and in the chief's IndexedDB; older ones are deleted. */
  maxToKeep: z.number().int().min(1).max(100).default(DEFAULT_START_CONFIG.maxToKeep),
  /** 'latest' resumes from the newest checkpoint of the same model, 'none' starts fresh, or a checkpoint id. */
  resumeFrom: z
    .union([z.literal('latest'), z.literal('none'), z.string().regex(/^ckpt-[0-9]{10}-[a-z0-9]{6}$/)])
    .default(DEFAULT_START_CONFIG.resumeFrom),
  /**
   * How the step's gradients travel around the ring. 'fp16' halves the bytes; every replica
   * still ends bit-identical, but each summed gradient is off by at most
   * N·(2^-10·Σ|g| + 2^-24) from the float32 sum (see shared/ring-allreduce.ts), and a sum
   * beyond ±65504 fails the step. The state hand-over and evaluations always use fp32.
   */
  wire: z.enum(WIRE_FORMATS).default(DEFAULT_START_CONFIG.wire),
  /**
   * The gradient all-reduce's algorithm. 'auto' takes, each step, whichever of the ring and
   * halving-doubling the measured α (per-hop latency) and β (link bandwidth) predict faster
   * for this buffer and N, as NCCL chooses between ring and tree (shared/collective-choice.ts).
   */
  allreduce: z.enum(ALLREDUCE_CHOICES).default(DEFAULT_START_CONFIG.allreduce),
  /** The digits the run trains and tests on; every worker streams its share from the server's data service. */
  dataset: z.enum(DATASET_KINDS).default(DEFAULT_START_CONFIG.dataset),
  /** Whose examples: the server's digits, or the class's own (each student's stay on their device). */
  data: z.enum(DATA_KINDS).default(DEFAULT_START_CONFIG.data),
  /**
   * The classes the model tells apart, in output order; part of every checkpoint's config.
   * A digits run ('mnist') has the digits 0–9; the class's own data may name any.
   */
  classes: classesSchema.default([...DEFAULT_START_CONFIG.classes]),
}).refine((c) => c.data === 'own' || areDigitClasses(c.classes), { path: ['classes'], message: "the server's digits have the classes 0-9: name other classes with data 'own'" });
export type StartConfig = z.output<typeof startConfigSchema>;

/**
 * The admission probe (shared/training/device-probe.ts): before it joins, a worker times a
 * few forward and backward passes of the default model on a small batch, on its own
 * backend. Its first share of the global batch follows from it (with balanceShares), and
 * the teacher sees the class's devices before pressing Start.
 */
export const deviceProbeSchema = z.strictObject({
  device: z.enum(DEVICE_CLASSES),
  model: z.enum(MODEL_KINDS),
  /** Forward, backward and read-back per example, after a warm-up pass (ms). */
  msPerExample: z.number().finite().positive().max(60_000),
});
export type DeviceProbe = z.output<typeof deviceProbeSchema>;

export const joinRequestSchema = z.strictObject({
  room: roomNameSchema,
  name: memberNameSchema,
  kind: z.enum(WORKER_KINDS),
  backend: z.enum(BACKENDS),
  /** GPU adapter description, when the backend exposes one. */
  adapter: z.string().max(200).optional(),
  /** This device's admission probe; absent from the hub and from workers that could not run it. */
  probe: deviceProbeSchema.optional(),
  /** Coming back on a new connection (server restart, network blip): keep the membership. */
  rejoin: z.strictObject({ memberId: z.string().regex(/^[a-z0-9]{8,32}$/), memberToken: z.string().regex(/^[0-9a-f]{48}$/) }).optional(),
  /**
   * The room's hub key, required with `kind: 'hub'` (a rejoin's member token suffices): only
   * the teacher's server hands it out (to the hub it supervises, or GET /api/rooms/:room/hub-key).
   */
  hubKey: hubKeySchema.optional(),
});
export type JoinRequest = z.input<typeof joinRequestSchema>;

/** GET /api/rooms/:room/hub-key (teacher): what a hub run on another computer joins with (HUB_KEY). */
export interface HubKeyInfo {
  room: string;
  hubKey: string;
}

/**
 * Why a room refuses hub joins for now: the teacher removed its hub (until the teacher lets
 * one in again), or the server did, on evidence it could check (until the run ends).
 */
export interface HubBar {
  by: 'teacher' | 'server';
  /** The run it was removed in (0 before the first); a server bar ends with that run. */
  run: number;
  /** Server time, ms since the epoch. */
  at: number;
  detail: string;
}

/**
 * socket.io's handshake `auth`: the room this connection is for and its join code. The
 * server's auth middleware turns a connection without the right code away (ERR_BAD_JOIN_CODE
 * in the connect_error's `data`), so nothing else a stranger sends is ever handled.
 */
export const socketAuthSchema = z.object({
  room: roomNameSchema,
  code: joinCodeSchema,
});
export type SocketAuth = z.input<typeof socketAuthSchema>;

/** GET /api/rooms/:room/join (teacher): what to put on the projector. */
export interface RoomJoinInfo {
  room: string;
  code: string;
  /** The class link with room and code: https on each LAN address first, then plain http. */
  studentUrls: string[];
  /** The same on this machine itself. */
  localUrl: string;
}

export const signalRelaySchema = z.strictObject({
  to: memberIdSchema,
  /** Identifies one peer connection, so that signals of a replaced connection are ignored. */
  linkId: z.string().regex(/^[a-z0-9-]{1,64}$/),
  data: z.record(z.string(), z.unknown()),
});
export type SignalRelay = z.output<typeof signalRelaySchema>;

// ---------------------------------------------------------------------------
// ICE configuration: STUN and TURN servers, with short-lived TURN credentials
// ---------------------------------------------------------------------------
/** 'relay' makes every link go through TURN (RTCConfiguration.iceTransportPolicy). */
export const ICE_TRANSPORT_POLICIES = ['all', 'relay'] as const;
export type IceTransportPolicy = (typeof ICE_TRANSPORT_POLICIES)[number];
/** stun:, turn: and turns: URIs (RFC 7064, RFC 7065), one per entry, as RTCIceServer.urls takes them. */
export const ICE_URL_PATTERN = /^(stun|turns?):[^\s,]+$/;
export const MAX_ICE_SERVERS = 4;
export const MAX_ICE_URLS_PER_SERVER = 8;
const ICE_FIELD_MAX_CHARS = 256;

export const iceServerSchema = z.strictObject({
  urls: z.array(z.string().max(ICE_FIELD_MAX_CHARS).regex(ICE_URL_PATTERN)).min(1).max(MAX_ICE_URLS_PER_SERVER),
  /** TURN REST scheme (coturn use-auth-secret): "<unix expiry s>:<member id>". */
  username: z.string().max(ICE_FIELD_MAX_CHARS).optional(),
  /** base64(HMAC-SHA1(secret, username)). */
  credential: z.string().max(ICE_FIELD_MAX_CHARS).optional(),
});

/**
 * What every worker's peer connections use: the server hands it out with each join and on
 * `ice:config`, with TURN credentials made for that member alone.
 */
export const iceConfigSchema = z.strictObject({
  iceServers: z.array(iceServerSchema).max(MAX_ICE_SERVERS),
  iceTransportPolicy: z.enum(ICE_TRANSPORT_POLICIES),
  /** When the TURN credentials stop working (ms since the epoch); null when there are none. */
  expiresAt: z.number().int().min(0).nullable(),
});
export type IceConfig = z.output<typeof iceConfigSchema>;

/** No ICE servers: tabs on one LAN reach each other through host candidates. */
export const DIRECT_ICE_CONFIG: IceConfig = { iceServers: [], iceTransportPolicy: 'all', expiresAt: null };

const finite = z.number().finite();

/** Numbers each Start of a room, so reports of an earlier run are told apart. */
const runSchema = z.number().int().min(1);

/** Where one step's time went on one worker, in ms (shared/trainer.ts StepTiming). */
export const stepTimingSchema = z.strictObject({
  /** Waiting for the step's examples from the data service: near 0 while the prefetch keeps up. */
  dataMs: finite.min(0),
  computeMs: finite.min(0),
  readbackMs: finite.min(0),
  commMs: finite.min(0),
  applyMs: finite.min(0),
});
export type StepTimingReport = z.output<typeof stepTimingSchema>;

/** How the step's gradients travelled, and the link model the ring agreed on. */
export const collectiveReportSchema = z.strictObject({
  algorithm: z.enum(ALGORITHMS),
  /** The ring's mean per-hop latency, measured once the generation's links are open (ms); 0 before. */
  alphaMs: finite.min(0),
  /** The ring's mean link bandwidth, measured with it (MB/s); 0 before. */
  betaMBps: finite.min(0),
  /** One sentence for the teacher: why this algorithm runs ("shared Wi-Fi: the hub moves half the airtime of the ring"). */
  reason: z.string().max(300),
  timing: stepTimingSchema,
});
export type CollectiveReport = z.output<typeof collectiveReportSchema>;

export const progressReportSchema = z.strictObject({
  run: runSchema,
  generation: z.number().int().min(0),
  step: z.number().int().min(0),
  epoch: z.number().int().min(0),
  loss: finite,
  trainAccuracy: finite.min(0).max(1),
  examplesPerSec: finite.min(0),
  weightsHash: z.string().regex(/^[0-9a-f]{16}$/),
  /** The step the run will end at if the membership stays as it is. */
  totalSteps: z.number().int().min(0),
  /** This worker's compute time for the step (forward, backward, read-back). */
  computeMs: finite.min(0),
  /** The step compared the replicas' weight hashes around the ring, and found them different. */
  hashChecked: z.boolean(),
  hashMismatch: z.boolean(),
  /** This worker's share of the step's global batch (0..1). */
  batchShare: finite.min(0).max(1),
  /** Throughput of this worker's link to its right neighbour during the step's all-reduce (MB/s). */
  linkMBps: finite.min(0),
  /** The learning rate the step applied (warm-up and, with scaleLearningRate, the global batch included). */
  learningRate: finite.min(0),
  /** This worker's measured speed against the ring's median (2: twice as fast), 0 before it is measured. */
  speedVsMedian: finite.min(0),
  collective: collectiveReportSchema,
  /**
   * Sent once after a generation that admitted joiners: how long the class stood still for
   * it (from the switch to the end of the first step on the new ring, less a normal step), ms.
   */
  switchPauseMs: finite.min(0).optional(),
  /** Sent once by a joiner: from its admission to the end of its first step in lock-step, ms. */
  lockStepMs: finite.min(0).optional(),
});
export type ProgressReport = z.output<typeof progressReportSchema>;

export const evaluationReportSchema = z.strictObject({
  run: runSchema,
  generation: z.number().int().min(0),
  step: z.number().int().min(0),
  epoch: z.number().int().min(0),
  accuracy: finite.min(0).max(1),
});
export type EvaluationReport = z.output<typeof evaluationReportSchema>;

/**
 * How many examples a member holds of each class (own-data.md): counts only, never the
 * examples, for the teacher's page and the room API. Sent when they change.
 */
export const ownExamplesReportSchema = z.strictObject({
  counts: z
    .record(classLabelSchema, z.number().int().min(0).max(MAX_OWN_EXAMPLES_PER_DEVICE))
    .refine((counts) => Object.keys(counts).length <= MAX_CLASSES, `at most ${MAX_CLASSES} classes`),
});
export type OwnExamplesReport = z.output<typeof ownExamplesReportSchema>;

export const FINISH_REASONS = ['completed', 'stopped', 'failed'] as const;

export const finishReportSchema = z.strictObject({
  run: runSchema,
  generation: z.number().int().min(0),
  step: z.number().int().min(0),
  reason: z.enum(FINISH_REASONS),
  code: z.string().max(64).optional(),
  message: z.string().max(500).optional(),
});
export type FinishReport = z.output<typeof finishReportSchema>;

/** The chief asks the server to drop a member that keeps missing the step deadline. */
export const dropRequestSchema = z.strictObject({
  run: runSchema,
  generation: z.number().int().min(0),
  member: memberIdSchema,
  step: z.number().int().min(0),
  computeMs: finite.min(0),
  deadlineMs: finite.min(0),
});
export type DropRequest = z.output<typeof dropRequestSchema>;

/**
 * What a ring peer did that no honest peer does; the receiver rejects the message
 * before adding any of it, fails the collective at once and names the sender.
 * - length: the payload is not the size the schedule gives that chunk;
 * - malformed: too short for a header, an unknown phase, tag or ring step, a chunk index
 *   outside the segment, or another wire format than the collective's;
 * - non-finite: a NaN or ±Infinity value (an honest sender saturates and flags instead);
 * - generation: a generation newer than the receiver's ring (never honest: the network holds
 *   those back until that generation is applied);
 * - duplicate: the same chunk twice in one collective (a replay);
 * - out-of-order: a later collective's message while the sender still owed this one's.
 */
export const MISBEHAVIOURS = ['length', 'malformed', 'non-finite', 'generation', 'duplicate', 'out-of-order'] as const;
export type Misbehaviour = (typeof MISBEHAVIOURS)[number];

/**
 * A ring member names the sender whose message it rejected. The server evicts the accused
 * only when the topology of `generation` makes it one of the reporter's senders (its left
 * neighbour or a halving-doubling partner), and only once per reporter and run (see
 * signaling-server/rooms/accusations.ts for the whole rule).
 */
export const evictRequestSchema = z.strictObject({
  run: runSchema,
  generation: z.number().int().min(0),
  member: memberIdSchema,
  step: z.number().int().min(0),
  reason: z.enum(MISBEHAVIOURS),
  detail: z.string().max(200),
});
export type EvictRequest = z.output<typeof evictRequestSchema>;

/** A member's link broke but nobody left: re-form the ring (links are dialled again). */
export const reformRequestSchema = z.strictObject({
  generation: z.number().int().min(0),
  reason: z.string().max(200),
});
export type ReformRequest = z.output<typeof reformRequestSchema>;

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
  /** Its admission probe (DeviceProbe), or null when it sent none. */
  probe: DeviceProbe | null;
  /** Its own examples per class (counts only; the examples never leave its device); {} when it reported none. */
  ownExamples: Record<string, number>;
  /** False while the member's signaling connection is down (it may be reconnecting). */
  connected: boolean;
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
 * Sent to a member taken out of the ring: 'straggler', dropped by the chief for missing the
 * step deadline; 'evicted', for sending data no honest peer sends (or, as a reporter, for a
 * second accusation in one run: signaling-server/rooms/accusations.ts).
 */
export type MemberDropped =
  | { reason: 'straggler'; step: number; computeMs: number; deadlineMs: number }
  | { reason: 'evicted'; step: number; misbehaviour: Misbehaviour | 'accusations'; detail: string }
  /** To the hub only: the teacher removed it (DELETE /api/rooms/:room/hub). */
  | { reason: 'removed'; step: number; detail: string };

/**
 * 'hub-accused': a ring member named the hub (recorded; the hub stays unless the accusers
 * are a majority, see accusations.ts); 'hub-removed': the teacher or the server removed it
 * and refuses hub joins for now; 'hub-allowed': the teacher lets a hub in again.
 */
export const ROOM_EVENT_KINDS = ['joined', 'left', 'admitted', 'dropped', 'evicted', 'resynced', 'reformed', 'hub-joined', 'hub-left', 'hub-accused', 'hub-removed', 'hub-allowed'] as const;
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

export interface DroppedMember {
  id: string;
  name: string;
  index: number;
  /** 'straggler': too slow (computeMs, deadlineMs); 'evicted': sent bad ring data (misbehaviour, reportedBy). */
  reason: 'straggler' | 'evicted';
  step: number;
  /** Stragglers: the member's compute time and the ring's deadline, ms; 0 for evictions. */
  computeMs: number;
  deadlineMs: number;
  /** Evictions: what the member sent, or 'accusations' for a reporter over its allowance; null for stragglers. */
  misbehaviour: Misbehaviour | 'accusations' | null;
  /** Evictions: the name of the member whose ring rejected the data; null otherwise. */
  reportedBy: string | null;
  detail: string;
  at: number;
}

export interface TrainStop {
  /**
   * 'failure': the ring could not heal itself; the room goes back to the latest checkpoint.
   * 'ended': to joiners still waiting for the state when the run finished.
   */
  reason: 'teacher' | 'failure' | 'ended';
}

export interface RoomStatus {
  room: string;
  state: RoomState;
  /** The current or last run, 0 before the first Start. */
  run: number;
  generation: number;
  step: number;
  epoch: number;
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
  /** loss and trainAccuracy: global, from the last step; accuracy: test set, after the last epoch. */
  metrics: { loss: number | null; accuracy: number | null; trainAccuracy: number | null };
  lastError: ErrorBody | null;
  /**
   * The data service: the run's training set on the wire (examples × 785 B), and what this
   * server has sent of it, and of the test set, since the current run started. Near one
   * training set per epoch means each example travelled once, to the worker that trained it.
   */
  data: { dataset: DatasetKind | null; datasetBytes: number; bytesServed: number };
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
   * machine is never capped.
   */
  seats: { perAddress: number | null; defaultPerLanAddress: number };
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
  evaluations: Array<{ epoch: number; step: number; accuracy: number }>;
}

/**
 * GET /api/info: how students reach this server, so a page loaded over plain http from a
 * LAN address (not a secure context: no WebGPU) can offer its https twin.
 */
export interface ServerInfo {
  /** The room printed at start-up: ROOM, or the generated join code ("K7M-Q2P"). */
  defaultRoom: string;
  httpPort: number;
  /** null when the server runs without HTTPS. */
  httpsPort: number | null;
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

// ---------------------------------------------------------------------------
// socket.io event maps
// ---------------------------------------------------------------------------
export interface ClientToServerEvents {
  'room:join': (request: JoinRequest, ack: Ack<JoinAccepted>) => void;
  'room:leave': (ack?: Ack<Record<string, never>>) => void;
  'signal:relay': (relay: SignalRelay, ack?: Ack<Record<string, never>>) => void;
  'worker:progress': (report: ProgressReport) => void;
  'worker:evaluated': (report: EvaluationReport) => void;
  'worker:finished': (report: FinishReport) => void;
  /** This device's own examples per class changed (counts only). */
  'worker:own-examples': (report: OwnExamplesReport) => void;
  'ring:drop': (request: DropRequest) => void;
  'ring:reform': (request: ReformRequest) => void;
  /** Fresh TURN credentials for a member whose current ones are about to expire. */
  'ice:config': (ack: Ack<{ ice: IceConfig }>) => void;
  'ring:evict': (request: EvictRequest, ack?: Ack<{ evicted: string[] }>) => void;
}

/** Every client event name, checked against the map so the list cannot fall out of date. */
export const CLIENT_EVENT_NAMES = Object.keys({
  'room:join': true,
  'room:leave': true,
  'signal:relay': true,
  'worker:progress': true,
  'worker:evaluated': true,
  'worker:finished': true,
  'worker:own-examples': true,
  'ring:drop': true,
  'ring:reform': true,
  'ice:config': true,
  'ring:evict': true,
} satisfies Record<keyof ClientToServerEvents, true>) as Array<keyof ClientToServerEvents>;

export interface ServerToClientEvents {
  'ring:generation': (generation: Generation) => void;
  'signal:relay': (relay: { from: string; linkId: string; data: Record<string, unknown> }) => void;
  'train:start': (start: TrainStart) => void;
  'train:stop': (stop: TrainStop) => void;
  'member:dropped': (dropped: MemberDropped) => void;
  /** The teacher paused: every replica stops after the same step and waits for train:resume. */
  'train:pause': () => void;
  'train:resume': () => void;
  /** The teacher opened, changed or closed collecting (null): the classes to collect for. */
  'room:collect': (collect: CollectSetting | null) => void;
  /** Errors for events that have no ack. */
  'server:error': (error: ErrorBody) => void;
}

// ---------------------------------------------------------------------------
// Validation helper
// ---------------------------------------------------------------------------
/** Parses untrusted input, throwing ERR_BAD_REQUEST that names the first bad field. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue && issue.path.length > 0 ? issue.path.map(String).join('.') : undefined;
  const message = issue ? `${field ?? 'body'}: ${issue.message}` : 'invalid input';
  throw new WebringError('ERR_BAD_REQUEST', message, field);
}

