/** Limits and the protocol's vocabulary (part of the one protocol; index.ts re-exports it). */
// ---------------------------------------------------------------------------
// Limits (units in the names)
// ---------------------------------------------------------------------------
export const ROOM_NAME_MAX_CHARS = 64;
export const MEMBER_NAME_MAX_CHARS = 40;
export const MAX_ROOM_MEMBERS = 32;
/** Runs a room can start (each Start is a new run): collectives and mask keys key on the run number below this. */
export const MAX_RUN = 2 ** 16 - 1;
/** Word widths a quantized gradient sum may travel in (start config `sumWordBits`; 0 = not quantized). */
export const SUM_WORD_BITS = [0, 8, 16] as const;
export type SumWordBits = (typeof SUM_WORD_BITS)[number];
/** SDP offers with many candidates stay well under this; anything larger is abuse. */
export const MAX_SIGNAL_BYTES = 32 * 1024;
/** socket.io closes a connection whose single packet exceeds this. */
export const MAX_SOCKET_PACKET_BYTES = 128 * 1024;
export const MAX_HTTP_JSON_BYTES = 16 * 1024;

export const ROOM_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

// ---------------------------------------------------------------------------
// Vocabulary
// ---------------------------------------------------------------------------
/** tfjs backends, fastest first: the order a tab tries them in (a Node worker has no WebGL). */
export const BACKENDS = ['webgpu', 'webgl', 'wasm', 'cpu'] as const;
export type Backend = (typeof BACKENDS)[number];
/** Each backend's name as people read it, on the pages. */
export const BACKEND_LABELS: Record<Backend, string> = { webgpu: 'WebGPU', webgl: 'WebGL', wasm: 'WebAssembly', cpu: 'CPU' };

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
 * Whose examples a run trains on: 'dataset' the server's (the task's `dataset`), streamed
 * to every worker; 'own' the examples each student collected on their own device, which
 * never leave it (shared/data/own-data.ts); 'dataset+own' both, in one epoch.
 */
export const DATA_KINDS = ['dataset', 'own', 'dataset+own'] as const;
/** What a class collects of its own for a task (shared/tasks/task.ts OwnData): examples of the classes the teacher names, or text in the task's symbols. */
export const OWN_DATA_KINDS = ['classes', 'text'] as const;
export type OwnDataKind = (typeof OWN_DATA_KINDS)[number];
/** With two members the sum of their gradients tells each the other's: a secure run waits for a third (shared/secagg/). */
export const MIN_SECURE_MEMBERS = 3;
/** A raw P-256 public key's 65 bytes in base64 (secure aggregation's `secagg:key`). */
export const SECURE_PUBLIC_KEY_CHARS = 88;
export type DataKind = (typeof DATA_KINDS)[number];

export const MIN_CLASSES = 2;
/** Classes a teacher may name for the class's own examples. */
export const MAX_CLASSES = 20;
/** A model's outputs at most: a task's classes or its vocabulary's symbols. */
export const MAX_OUTPUTS = 256;
export const CLASS_LABEL_MAX_CHARS = 24;
/** One device holds at most this many own examples: counts and positions travel as exact float32 integers. */
export const MAX_OWN_EXAMPLES_PER_DEVICE = 2 ** 24;
/** Sequence numbers and store counts travel as float32 integers: exact below 2^24. */
export const MAX_OWN_SEQ = MAX_OWN_EXAMPLES_PER_DEVICE - 1;

export const OPTIMIZER_KINDS = ['sgd', 'adam'] as const;
export type OptimizerKind = (typeof OPTIMIZER_KINDS)[number];
/** The optimizers whose state a checkpoint keeps: the tasks' two, and the rest a program's model may use (fitDataset). */
export const CHECKPOINT_OPTIMIZERS = [...OPTIMIZER_KINDS, 'momentum', 'rmsprop', 'adagrad', 'adadelta'] as const;
export type CheckpointOptimizer = (typeof CHECKPOINT_OPTIMIZERS)[number];


/**
 * How the class sums its work (shared/training/sync-mode.ts): every step's gradients, as
 * MultiWorkerMirroredStrategy does, or a round of local steps' change in weights, as
 * DiLoCo and federated averaging do (docs/local-steps.md).
 */
export const SYNC_MODES = ['every-step', 'local-steps'] as const;
export type SyncMode = (typeof SYNC_MODES)[number];
/** Local steps per round: each worker trains this many steps alone between two outer steps. */
export const MIN_LOCAL_STEPS = 1;
export const MAX_LOCAL_STEPS = 1000;
/**
 * The outer optimizer of a local-steps run (shared/training/outer-optimizer.ts): Nesterov
 * momentum as DiLoCo applies it, or heavy-ball momentum ('sgd'; with momentum 0 both are
 * plain SGD on the averaged change in weights).
 */
export const OUTER_OPTIMIZERS = ['nesterov', 'sgd'] as const;
export type OuterOptimizerKind = (typeof OUTER_OPTIMIZERS)[number];
/** How a device's local steps are corrected for its drift from the class (shared/training/drift-correction.ts). */
export const LOCAL_CORRECTIONS = ['none', 'scaffold'] as const;
