/**
 * What workers and the teacher send, with the zod schemas that validate it at every entry
 * point (part of the one protocol; index.ts re-exports it), and the helper that applies them.
 */
import { z } from 'zod';
import { joinCodeSchema } from './join-code';
import { WebringError } from './errors';
import { ALGORITHMS, ALLREDUCE_CHOICES, BACKENDS, CLASS_LABEL_MAX_CHARS, DATASET_KINDS, DATA_KINDS, DEVICE_CLASSES, DIGIT_CLASSES, MAX_CLASSES, MAX_OWN_EXAMPLES_PER_DEVICE, MAX_ROOM_MEMBERS, MEMBER_NAME_MAX_CHARS, MIN_CLASSES, MODEL_KINDS, OPTIMIZER_KINDS, ROOM_NAME_MAX_CHARS, ROOM_NAME_PATTERN, SECURE_PUBLIC_KEY_CHARS, WIRE_FORMATS, WORKER_KINDS, SYNC_MODES, OUTER_OPTIMIZERS, MIN_LOCAL_STEPS, MAX_LOCAL_STEPS, type DataKind, type SyncMode, type WireFormat } from './vocabulary';

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
  // What secureByDefault gives the default data, the server's digits: no secret to keep.
  secureAggregation: false,
  sync: 'every-step',
  // DiLoCo's (Douillard et al. 2023): 20 local steps, Nesterov at 0.7 with momentum 0.9.
  localSteps: 20,
  outerOptimizer: 'nesterov',
  outerLearningRate: 0.7,
  outerMomentum: 0.9,
} as const;

/** The wire a local-steps run takes when the teacher names none: DiLoCo's outer gradients survive fp16, and a round's one all-reduce then moves half the bytes. */
export const LOCAL_STEPS_DEFAULT_WIRE = 'fp16';

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
  wire: z.enum(WIRE_FORMATS).optional(),
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
  /**
   * Secure aggregation (shared/secagg/, docs/privacy.md): each device's gradients leave it
   * only masked, so no classmate, hub or server sees one student's gradient; only the
   * class's sum is public. Default: on for the class's own data ('own', 'mnist+own'), off
   * for the server's digits, which are no secret. A ring of two waits for a third (the sum
   * would tell each the other's gradient; one alone sends nothing), and it needs the fp32
   * wire (masked words do not survive fp16).
   */
  secureAggregation: z.boolean().optional(),
  /**
   * 'every-step' all-reduces every step's gradients; 'local-steps' lets each worker train
   * `localSteps` steps alone on its share, then averages the change in weights once per
   * round, weighted by the examples each trained, through the outer optimizer
   * (docs/local-steps.md): for slow links and big classes.
   */
  sync: z.enum(SYNC_MODES).default(DEFAULT_START_CONFIG.sync),
  localSteps: z.number().int().min(MIN_LOCAL_STEPS).max(MAX_LOCAL_STEPS).default(DEFAULT_START_CONFIG.localSteps),
  outerOptimizer: z.enum(OUTER_OPTIMIZERS).default(DEFAULT_START_CONFIG.outerOptimizer),
  outerLearningRate: z.number().positive().max(10).default(DEFAULT_START_CONFIG.outerLearningRate),
  outerMomentum: z.number().min(0).max(0.999).default(DEFAULT_START_CONFIG.outerMomentum),
})
  .refine((c) => c.data === 'own' || areDigitClasses(c.classes), { path: ['classes'], message: "the server's digits have the classes 0-9: name other classes with data 'own'" })
  .transform((c) => {
    const secureAggregation = c.secureAggregation ?? secureByDefault(c.data);
    return { ...c, secureAggregation, wire: c.wire ?? defaultWire(c.sync, secureAggregation) };
  })
  .refine((c) => !(c.secureAggregation && c.wire === 'fp16'), {
    path: ['wire'],
    message: "secure aggregation masks 32-bit words, which the fp16 wire cannot carry: choose wire 'fp32', or turn secureAggregation off",
  });
export type StartConfig = z.output<typeof startConfigSchema>;

/**
 * The wire when the teacher names none: fp32 for every step's gradients; fp16 for a round's
 * change in weights, unless the run is secure (masked words need 32 bits).
 */
export const defaultWire = (sync: SyncMode, secure: boolean): WireFormat =>
  sync === 'local-steps' && !secure ? LOCAL_STEPS_DEFAULT_WIRE : DEFAULT_START_CONFIG.wire;

/** Whether a run on `data` masks its gradients when the teacher does not say: the class's own drawings are private, the server's digits are not. */
export const secureByDefault = (data: DataKind): boolean => data !== 'mnist';

/** `secagg:key`: this member's public key for one generation of a secure run (shared/secagg/key-directory.ts). */
export const secureKeySchema = z.strictObject({
  /** The run: a new run on an unchanged class keeps its generation number, and takes new keys. */
  run: z.number().int().min(0).max(2 ** 17 - 1),
  generation: z.number().int().min(0).max(2 ** 32 - 1),
  /** A raw P-256 public key (65 bytes), base64: the server relays it and reads nothing in it. */
  publicKey: z.string().length(SECURE_PUBLIC_KEY_CHARS).regex(/^[A-Za-z0-9+/]+=*$/),
});
export type SecureKey = z.input<typeof secureKeySchema>;

/**
 * The admission probe (shared/compute/device-probe.ts): before it joins, a worker times a
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

const finite = z.number().finite();

/** Numbers each Start of a room, so reports of an earlier run are told apart. */
const runSchema = z.number().int().min(1);

/** Where one step's time went on one worker, in ms (shared/trainer.ts StepTiming). */
export const stepTimingSchema = z.strictObject({
  /** Waiting for the step's examples from the data service: near 0 while the prefetch keeps up. */
  dataMs: finite.min(0),
  computeMs: finite.min(0),
  readbackMs: finite.min(0),
  /** Crossing to the compute thread and back, beyond the maths (0 when it runs in the network's thread). */
  crossMs: finite.min(0),
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

/** Where in a run a member's report stands: every report about a step carries it. */
const reportPosition = {
  run: runSchema,
  generation: z.number().int().min(0),
  step: z.number().int().min(0),
  epoch: z.number().int().min(0),
};

export const progressReportSchema = z.strictObject({
  ...reportPosition,
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
  /**
   * Outer steps so far: a local-steps run sums the class's work once per round (each round
   * `localSteps` steps, fewer at an epoch's end); an every-step run once per step.
   */
  round: z.number().int().min(0).optional(),
  /** Bytes this worker sent in the turn's gradient all-reduce: once per round in local-steps mode. */
  bytesSent: finite.min(0).optional(),
  /** Examples the whole class trained in the turn (a round's, in local-steps mode). */
  roundExamples: z.number().int().min(0).optional(),
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
  ...reportPosition,
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
  /**
   * The ring neighbours (at most two) this member's links to stayed shut past their
   * deadline in `generation`: the server sheds whoever cannot be reached
   * (signaling-server/rooms/formation.ts). Absent: re-dial the same ring.
   */
  unreachable: z.array(memberIdSchema).max(2).optional(),
});
export type ReformRequest = z.output<typeof reformRequestSchema>;

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

