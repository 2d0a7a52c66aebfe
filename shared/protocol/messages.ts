/**
 * What workers and the teacher send, with the zod schemas that validate it at every entry
 * point (part of the one protocol; index.ts re-exports it), and the helper that applies them.
 */
import { z } from 'zod';
import { joinCodeSchema } from './join-code';
import { WebringError } from './errors';
import { ALGORITHMS, BACKENDS, CLASS_LABEL_MAX_CHARS, DEVICE_CLASSES, MAX_CLASSES, MAX_OUTPUTS, MAX_OWN_EXAMPLES_PER_DEVICE, MAX_ROOM_MEMBERS, MAX_RUN, MEMBER_NAME_MAX_CHARS, MIN_CLASSES, ROOM_NAME_MAX_CHARS, ROOM_NAME_PATTERN, SECURE_PUBLIC_KEY_CHARS, WORKER_KINDS } from './vocabulary';

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

/** A model's outputs in order, as a run's config keeps them: a task's classes or vocabulary's symbols, each once. */
export const outputsSchema = z
  .array(z.string().min(1).max(CLASS_LABEL_MAX_CHARS).regex(/^[^\p{Cc}]+$/u, 'no control characters'))
  .min(1)
  .max(MAX_OUTPUTS)
  .refine((labels) => new Set(labels).size === labels.length, 'each output once')
  .readonly();

/** Task, model and dataset ids: lower case, digits and dashes (they appear in URLs and checkpoint metadata). */
export const WORKLOAD_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,39}$/;
export const workloadIdSchema = z.string().regex(WORKLOAD_ID_PATTERN, 'lower-case letters, digits and "-"');

/**
 * What a room's students collect, before the teacher starts a run on the class's own data
 * (own-data.md): items of the task (absent: the default task, as rooms stored before tasks
 * read), and for a task whose class names its classes, those classes in output order
 * (absent for a task that collects text, such as names). A room that collects stays while
 * it is empty, so students can reload and come back to it.
 */
export const collectSettingSchema = z.strictObject({ task: workloadIdSchema.optional(), classes: classesSchema.optional() });
export type CollectSetting = z.output<typeof collectSettingSchema>;
/**
 * PUT /api/rooms/:room/collect: what to collect, checked against the task on the server
 * (the classes of a task whose class names them; none for a text task), or classes null
 * to stop collecting.
 */
export const collectRequestSchema = z.strictObject({ task: workloadIdSchema.optional(), classes: classesSchema.nullable().optional() });
/**
 * PUT /api/rooms/:room/seats: seats one client address may hold (null: the defaults, seats.ts;
 * MAX_ROOM_MEMBERS lets a class in from behind one NAT), and/or `vouched`: its members are
 * distinct devices, each its own client for secure aggregation (rooms/secure-count.ts).
 */
export const seatsRequestSchema = z.strictObject({ perAddress: z.number().int().min(1).max(MAX_ROOM_MEMBERS).nullable().optional(), vouched: z.boolean().optional() });

/** True when two class lists name the same classes in the same order (the same model outputs). */
export function sameClasses(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((c, i) => c === b[i]);
}


export const memberNameSchema = z
  .string()
  .trim()
  .min(1)
  .max(MEMBER_NAME_MAX_CHARS);

export const memberIdSchema = z.string().regex(/^[a-z0-9]{8,32}$/);
/** A room's hub key: HMAC-SHA256 of the room name under the server's join secret, hex. */
export const hubKeySchema = z.string().regex(/^[0-9a-f]{64}$/);


/** `secagg:key`: this member's public key for one generation of a secure run (shared/secagg/key-directory.ts). */
export const secureKeySchema = z.strictObject({
  /** The run: a new run on an unchanged class keeps its generation number, and takes new keys. */
  run: z.number().int().min(0).max(MAX_RUN),
  generation: z.number().int().min(0).max(2 ** 32 - 1),
  /** A raw P-256 public key (65 bytes), base64: the server relays it and reads nothing in it. */
  publicKey: z.string().length(SECURE_PUBLIC_KEY_CHARS).regex(/^[A-Za-z0-9+/]+=*$/),
});
export type SecureKey = z.input<typeof secureKeySchema>;

/** A member's secret token, as the server hands it out with the join (48 hex digits). */
const memberTokenSchema = z.string().regex(/^[0-9a-f]{48}$/);

/**
 * The admission probe (shared/compute/device-probe.ts): before it joins, a worker times a
 * few forward and backward passes of the default model on a small batch, on its own
 * backend. Its first share of the global batch follows from it (with balanceShares), and
 * the teacher sees the class's devices before pressing Start.
 */
export const deviceProbeSchema = z.strictObject({
  device: z.enum(DEVICE_CLASSES),
  /** The task and model it timed (a task's default model: the run is not known before it joins). */
  task: z.string().max(40),
  model: z.string().max(40),
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
  rejoin: z.strictObject({ memberId: z.string().regex(/^[a-z0-9]{8,32}$/), memberToken: memberTokenSchema }).optional(),
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
  /**
   * A member's token for `room`, once it holds one: its reconnects pass the lockout that
   * wrong join codes from its address set (signaling-server/edge/socket-auth.ts), so a
   * student behind the school's NAT who blips is not locked out by a classmate's guesses.
   */
  memberToken: memberTokenSchema.optional(),
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

/**
 * The largest message the server relays for a link (shared/network/relay-link.ts): one ring
 * message (collectives/wire.ts MAX_MESSAGE_BYTES, 64 KiB) with room to spare, under the
 * socket's packet cap (MAX_SOCKET_PACKET_BYTES).
 */
export const MAX_RELAYED_MESSAGE_BYTES = 96 * 1024;

/**
 * link:data: one ring message for a member this worker could open no WebRTC link to; the
 * server passes it on over that member's own connection (shared/network/relay-link.ts).
 * The bytes are what the data channel would have carried: masked words in a secure run.
 */
export const linkDataSchema = z.strictObject({
  to: memberIdSchema,
  linkId: signalRelaySchema.shape.linkId,
  bytes: z.instanceof(Uint8Array).refine((b) => b.byteLength > 0 && b.byteLength <= MAX_RELAYED_MESSAGE_BYTES, {
    message: `a relayed message is 1 to ${MAX_RELAYED_MESSAGE_BYTES} bytes`,
  }),
});
export type LinkData = z.output<typeof linkDataSchema>;
/** link:data as the server delivers it: who sent it, on which link. */
export interface RelayedLinkData {
  from: string;
  linkId: string;
  /** An ArrayBuffer in a tab, a Buffer in Node: socket.io's binary attachments. */
  bytes: ArrayBuffer | Uint8Array;
}

const finite = z.number().finite();
/**
 * The longest time a report may carry, ms: a lesson. A step, a pause for an admission or a
 * joiner's way to lock-step that took longer has long been ended by the stall watch; a
 * larger number is a forged one (issue 57 found them taken as sent).
 */
export const MAX_REPORTED_MS = 3_600_000;
const duration = finite.min(0).max(MAX_REPORTED_MS);

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
  computeMs: duration,
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
  switchPauseMs: duration.optional(),
  /** Sent once by a joiner: from its admission to the end of its first step in lock-step, ms. */
  lockStepMs: duration.optional(),
});
export type ProgressReport = z.output<typeof progressReportSchema>;

export const evaluationReportSchema = z.strictObject({
  ...reportPosition,
  /** The share of held-out examples predicted right. */
  accuracy: finite.min(0).max(1),
  /** The mean held-out loss in nats per example (per symbol for text); a uniform guess over 256 outputs is 5.5. */
  testLoss: finite.min(0).max(1000),
});
export type EvaluationReport = z.output<typeof evaluationReportSchema>;

/**
 * How many examples a member holds of each class (own-data.md): counts only, never the
 * examples, for the teacher's page and the room API. Sent when they change.
 */
/** How a link between two members carries its messages: its own WebRTC channel, the server's relay, or not at all (yet). */
export const LINK_PATHS = ['direct', 'relay', 'shut'] as const;
export type LinkPath = (typeof LINK_PATHS)[number];
/** What one device downloads from, and uploads to, the server to measure its bandwidth in a network check. */
export const NETWORK_PROBE_BYTES = 2 * 1024 * 1024;
/** The largest bandwidth a network report may carry (MB/s): far past any link, and a bound for a bad report. */
export const MAX_REPORTED_MBPS = 100_000;
/** A network check takes probe transfers this long after the teacher started it. */
export const NETWORK_CHECK_WINDOW_MS = 30_000;
/**
 * A network check takes a device's answer this long after the teacher started it: the
 * answer follows the probes, and timing a model its admission probe did not time compiles
 * that model first, tens of seconds on a slow device's emulated GPU.
 */
export const NETWORK_CHECK_REPORT_WINDOW_MS = 120_000;

/**
 * worker:network: one device's answer to a network check (room:network-check): its round
 * trip to the server, its bandwidth to and from it (NETWORK_PROBE_BYTES each way), and how
 * each of its links in the current generation carries messages.
 */
/** POST /api/rooms/:room/network-check: a model the devices time too, the teacher's choice in the form (their admission probe timed the task's default). */
export const networkCheckRequestSchema = z.strictObject({
  workload: z.strictObject({ task: workloadIdSchema, model: workloadIdSchema }).optional(),
});
export type NetworkCheckRequest = z.output<typeof networkCheckRequestSchema>;

export const networkReportSchema = z.strictObject({
  check: z.number().int().min(1),
  serverRttMs: z.number().finite().min(0).max(60_000),
  downMBps: z.number().finite().min(0).max(MAX_REPORTED_MBPS),
  upMBps: z.number().finite().min(0).max(MAX_REPORTED_MBPS),
  /** Each link's path, and for an open one its round trip and bandwidth over the link itself (null: it did not answer; absent: not probed). */
  links: z
    .array(
      z.strictObject({
        peer: memberIdSchema,
        path: z.enum(LINK_PATHS),
        rttMs: z.number().finite().min(0).max(60_000).nullable().optional(),
        MBps: z.number().finite().min(0).max(MAX_REPORTED_MBPS).nullable().optional(),
      }),
    )
    .max(MAX_ROOM_MEMBERS),
  /** The check's model timed on this device, when the check asked for one its admission probe did not time. */
  probe: deviceProbeSchema.optional(),
});
export type NetworkReport = z.output<typeof networkReportSchema>;

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
  computeMs: duration,
  deadlineMs: duration,
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

