/**
 * Ring all-reduce (reduce-scatter, then all-gather) over an injected transport.
 *
 * The buffer is cut into N segments; every segment is cut into chunks of at most
 * MAX_CHUNK_FLOATS so that each data-channel message stays under 64 KiB. The ring is
 * pipelined at chunk granularity: a chunk received in ring step k is added and forwarded
 * in ring step k+1 at once, without waiting for the rest of its segment. Every peer
 * sends 2(N-1)/N of the buffer, the bandwidth-optimal amount.
 *
 * Each segment is summed exactly once, in ring order, and then copied, so every replica
 * ends with bit-identical results.
 *
 * The fp16 wire format (issue 6, `{ wire: 'fp16' }`) sends every value as a binary16 half,
 * twice as many per message, so half the bytes. A rank adds the half it receives to its own
 * float32 value and forwards the half of that sum; the owner of a finished segment rounds
 * its own copy to halves as well, so the value it keeps is the value every other rank
 * decodes, and the replicas stay bit-identical. For an element whose N addends have
 * Σ|x| = S, the result differs from the exact sum by at most
 *
 *     N · (2^-10 · S + 2^-24)
 *
 * The element meets N roundings to half (the first send, N-2 forwards, the owner's) and
 * N-1 float32 additions. An addition errs by at most 2^-24·|v|, a rounding to half by at
 * most 2^-11·|v| + 2^-25 (relative among normal halves, absolute among the subnormals
 * below 2^-14), and every |v| is at most S plus the error so far; by induction the error
 * after k of these add-and-round steps is at most k · (2^-10 · S + 2^-24) for k ≤ 1023,
 * far above the largest ring. That is 0.8% of S for 8 ranks at worst; the measured error
 * stays below half the bound, as rounding errors rarely all fall one way.
 * A partial sum of 65520 or more becomes ±Infinity: counted in stats.fp16Overflows and left
 * in the result for the caller to see (the trainer fails the step rather than apply it).
 * With one rank nothing travels, so nothing is rounded.
 *
 * Hostile or broken peers (issue 7). A message is checked whole before any of its values is
 * added: header (phase, ring step, tag, wire format, generation), chunk index, exact length,
 * that its chunk has not already arrived in this collective, and every value finite. A
 * sender checks its own message as it frames it: a non-finite value (an fp16 partial sum
 * beyond ±65504, an fp32 sum that overflowed, a NaN) is clamped to the format's largest
 * finite value and the collective is flagged (FLAG_SATURATED); the flag travels on every
 * later message, reaches every rank, and every rank fails the collective alike with
 * ERR_BAD_DATA. So no honest sender ever puts a non-finite value on the wire, and a receiver
 * that finds one, or any other message of its own generation that no honest sender frames,
 * fails the collective at once with a PeerMisbehavedError naming the sender's rank (the
 * worker asks the server to evict it). Messages of an older generation or an earlier
 * collective are dropped and counted: honest peers send those around a generation change.
 *
 * DOM-free: the browser passes simple-peer data channels, the Node worker passes wrtc
 * channels, the unit tests pass an in-memory link.
 */
import { WebringError } from '../protocol/errors';
import { ALGORITHMS, WIRE_FORMATS, type Algorithm, type Misbehaviour, type WireFormat } from '../protocol';
import { addHalves, decodeHalves, encodeHalves, roundToHalves } from './fp16';
import { halvingDoublingPlan, type HalvingDoublingPlan } from './halving-doubling';
import { leftOf, sendersOf } from './topology';
import { systemClock, type Clock } from '../util/clock';

export { systemClock, type Clock };
import {
  FLAG_SATURATED,
  FLOAT_BYTES,
  HEADER_BYTES,
  MAX_CHUNK_FLOATS,
  MAX_CHUNK_HALVES,
  MAX_MESSAGE_BYTES,
  PHASE_ALL_GATHER,
  PHASE_EXCHANGE,
  PHASE_REDUCE_SCATTER,
  WIRE_FP16,
  WIRE_FP32,
  readHeader,
  wireChunkFloats,
  wireCode,
  wireFloatBytes,
  writeHeader,
  type ChunkHeader,
  type WireCode,
} from './wire';

/** One direction of a ring link: where this peer sends (its right neighbour). */
export interface RingLink {
  /** Sends one message. Must copy `bytes` before returning, as RTCDataChannel.send does. */
  send(bytes: Uint8Array): void;
  isOpen(): boolean;
  bufferedAmount(): number;
  /** Resolves once the link is open and its send buffer is below the low-water mark; rejects if the link fails. */
  whenWritable(): Promise<void>;
}

/**
 * Which collective of a step a message belongs to. Collectives run in (step, tag) order, so
 * the values follow the order within one step number: the check whether the replicas
 * already agree, the chief's state hand-over, the evaluation that closes the previous
 * step's epoch, the link probes, then the step's gradients.
 */
export const COLLECTIVE_TAG = {
  agree: 0,
  sync: 1,
  evaluation: 2,
  // Link measurements (collective-choice.ts), just before the step's gradients.
  probeBarrier: 3,
  probeRingLatency: 4,
  probeHdLatency: 5,
  probeRingBandwidth: 6,
  probeHdBandwidth: 7,
  probeRingBandwidthAgain: 8,
  probeHdBandwidthAgain: 9,
  gradients: 10,
} as const;
export type CollectiveTag = (typeof COLLECTIVE_TAG)[keyof typeof COLLECTIVE_TAG];
/**
 * Collectives are ordered by (run, step, tag); the key packs the three into one safe
 * integer: tag < 16, step < 2^32, run < 2^17.
 */
const TAG_SPACE = 16;
const RUN_SPACE = 2 ** 36;
export const MAX_RUN = 2 ** 17 - 1;
const collectiveKey = (run: number, step: number, tag: number): number => run * RUN_SPACE + step * TAG_SPACE + tag;

/** Stop sending while this much is queued in the channel; ~0.3 s of a 30 MB/s link. */
export const DEFAULT_HIGH_WATER_BYTES = 8 * 1024 * 1024;
/** Generous: one step includes the slowest peer's forward and backward pass. */
export const DEFAULT_COLLECTIVE_TIMEOUT_MS = 120_000;
/** Early messages of the next collective are kept until it starts; beyond this, dropped. */
export const DEFAULT_MAX_STASH_BYTES = 64 * 1024 * 1024;

/** The largest finite float32: where the sender clamps an fp32 value that is not finite. */
const FLOAT32_MAX = 3.4028234663852886e38;
/** The largest finite half's bits (65504), and a half's exponent bits (all ones: ±Inf or NaN). */
const HALF_MAX_BITS = 0x7bff;
const HALF_EXPONENT = 0x7c00;

/**
 * A collective failed because a peer sent what no honest peer sends (see the file comment).
 * `rank` is that peer's rank in the collective's generation.
 */
export class PeerMisbehavedError extends WebringError {
  readonly rank: number;
  readonly misbehaviour: Misbehaviour;

  constructor(rank: number, misbehaviour: Misbehaviour, message: string) {
    super('ERR_PEER_MISBEHAVED', message);
    this.rank = rank;
    this.misbehaviour = misbehaviour;
  }
}

/** What a poisoned rank's sender writes into its messages (fault injection: tests and the bench only). */
export type PoisonKind = 'nan' | 'length';

/** How one collective's floats travel. Every rank of a collective passes the same options. */
export interface CollectiveOptions {
  /** Default 'ring'. 'halving-doubling' needs links to its partners (RingAllReduceOptions.peer). */
  algorithm?: Algorithm;
  /** Number format on the wire; 'fp16' halves the bytes at the cost bounded above. Default 'fp32'. */
  wire?: WireFormat;
  /**
   * The last `exactTail` floats travel as float32 whatever `wire` says: sums that must be
   * exact, such as votes and counts. Default 0.
   */
  exactTail?: number;
}

export interface RingAllReduceOptions {
  rank: number;
  worldSize: number;
  generation: number;
  /** The right neighbour; null only when worldSize is 1. */
  right: RingLink | null;
  /**
   * The link to any rank, for halving-doubling's partners; null when there is none yet.
   * Without it only the ring runs.
   */
  peer?: (rank: number) => RingLink | null;
  timeoutMs?: number;
  highWaterBytes?: number;
  maxStashBytes?: number;
  clock?: Clock;
  /**
   * Fault injection, never set in production: what this rank writes into every message of
   * the collective at `step`, past its own sender-side check (a hostile peer), or null.
   */
  poison?: (step: number) => PoisonKind | null;
}

export interface RingStats {
  messagesSent: number;
  bytesSent: number;
  droppedStaleGeneration: number;
  droppedStaleStep: number;
  droppedMalformed: number;
  droppedOverflow: number;
  /** Messages in another wire format than this rank's collective uses for that chunk. */
  droppedWireMismatch: number;
  /** Messages from a peer that is not this message's sender in the schedule. */
  droppedWrongSender: number;
  /** Finite values that became ±Infinity on the fp16 wire (|value| ≥ 65520). */
  fp16Overflows: number;
  /** Messages this rank framed with a non-finite value clamped (the collective then fails alike everywhere). */
  saturatedSends: number;
  /** Messages rejected as misbehaviour: each failed its collective and named the sender. */
  rejectedMisbehaviour: number;
}

interface ActiveCollective {
  startedAt: number;
  bytesAtStart: number;
  buf: Float32Array;
  step: number;
  tag: CollectiveTag;
  key: number;
  received: number;
  expected: number;
  /**
   * Two parts, each cut into N segments of its own: [0, split) in `wire`, then
   * [split, length) in float32 (the exact tail; empty unless `wire` is fp16). Chunk c of
   * segment s is chunk c of the first part's segment s while c < that segment's chunk
   * count, else a chunk of the second part's.
   */
  wire: WireCode;
  split: number;
  headBase: number;
  headRem: number;
  tailBase: number;
  tailRem: number;
  /** Halving-doubling only: the plan, the stage in progress and its messages so far. */
  plan: HalvingDoublingPlan | null;
  stage: number;
  stageReceived: number;
  /** Chunks per (phase, ring step) or per exchange stage in `seen`: the most any can hold. */
  seenStride: number;
  /** Some rank clamped a non-finite value (its own, or FLAG_SATURATED arrived): fail alike at the end. */
  saturated: boolean;
  resolve: () => void;
  reject: (err: WebringError) => void;
  timer: unknown;
}

const mod = (a: number, n: number): number => ((a % n) + n) % n;

export class RingAllReduce {
  readonly rank: number;
  readonly worldSize: number;
  readonly generation: number;
  readonly stats: RingStats = {
    messagesSent: 0,
    bytesSent: 0,
    droppedStaleGeneration: 0,
    droppedStaleStep: 0,
    droppedMalformed: 0,
    droppedOverflow: 0,
    droppedWireMismatch: 0,
    droppedWrongSender: 0,
    fp16Overflows: 0,
    saturatedSends: 0,
    rejectedMisbehaviour: 0,
  };

  private readonly right: RingLink | null;
  private readonly peer: ((rank: number) => RingLink | null) | null;
  private readonly left: number;
  /** Ranks that send to this one in some schedule: the left neighbour and the halving-doubling partners. */
  private readonly senders: ReadonlySet<number>;
  /** Which chunks of the collective in flight have arrived (a second copy is a replay), reused. */
  private seen = new Uint8Array(0);
  private readonly poisonAt: ((step: number) => PoisonKind | null) | null;
  private readonly timeoutMs: number;
  private readonly highWaterBytes: number;
  private readonly maxStashBytes: number;
  private readonly clock: Clock;

  private active: ActiveCollective | null = null;
  /** Bytes this rank sent to its right neighbour in the last finished collective, and how long it took. */
  lastTransfer: { bytes: number; ms: number } = { bytes: 0, ms: 0 };
  private lastDoneKey = -1;
  private run = 0;
  private abortedWith: WebringError | null = null;
  private stash: Array<{ key: number; from: number; bytes: Uint8Array }> = [];
  /** Plans of recent halving-doubling buffer lengths (a run uses two or three). */
  private readonly plans = new Map<number, HalvingDoublingPlan>();
  /**
   * Halving-doubling messages of a later stage than the one in progress: a partner two
   * stages on may be faster. Their sums must wait, as addition order decides the bits.
   * Copied into pooled 64 KiB buffers, so early messages allocate nothing after warm-up.
   */
  private deferred: Array<{ stage: number; length: number; bytes: Uint8Array }> = [];
  private readonly deferPool: Uint8Array[] = [];
  private stashBytes = 0;

  // Send queue of (phase, ringStep, chunk) triples, reused across collectives.
  private queue = new Int32Array(0);
  private qHead = 0;
  private qTail = 0;
  private waitingForLink = false;

  // One outgoing message buffer, reused: RingLink.send copies.
  private readonly msgBuffer = new ArrayBuffer(HEADER_BYTES + MAX_CHUNK_FLOATS * FLOAT_BYTES);
  private readonly msgHeaderView = new DataView(this.msgBuffer, 0, HEADER_BYTES);
  private readonly msgFloats = new Float32Array(this.msgBuffer, HEADER_BYTES, MAX_CHUNK_FLOATS);
  private readonly msgHalves = new Uint16Array(this.msgBuffer, HEADER_BYTES, MAX_CHUNK_HALVES);
  private readonly msgViews = new Map<number, Uint8Array>();
  private readonly header: ChunkHeader = { phase: 0, ringStep: 0, tag: 0, wire: 0, flags: 0, generation: 0, run: 0, step: 0, chunk: 0 };
  private readonly inHeader: ChunkHeader = { phase: 0, ringStep: 0, tag: 0, wire: 0, flags: 0, generation: 0, run: 0, step: 0, chunk: 0 };
  private readonly alignedScratch = new Float32Array(MAX_CHUNK_FLOATS);
  private readonly alignedScratchHalves = new Uint16Array(this.alignedScratch.buffer);
  /** Where a chunk lies, filled by locate(). */
  private readonly chunkAt = { start: 0, length: 0, wire: WIRE_FP32 as WireCode };

  constructor(options: RingAllReduceOptions) {
    const { rank, worldSize } = options;
    if (!Number.isInteger(worldSize) || worldSize < 1 || worldSize > 255) {
      throw new WebringError('ERR_BAD_REQUEST', `worldSize must be 1..255, got ${worldSize}`);
    }
    if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) {
      throw new WebringError('ERR_BAD_REQUEST', `rank ${rank} outside 0..${worldSize - 1}`);
    }
    if (worldSize > 1 && options.right === null) {
      throw new WebringError('ERR_BAD_REQUEST', 'a ring of more than one peer needs a right link');
    }
    this.rank = rank;
    this.worldSize = worldSize;
    this.generation = options.generation;
    this.right = options.right;
    this.peer = options.peer ?? null;
    this.left = leftOf(rank, worldSize);
    this.senders = sendersOf(rank, worldSize);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_COLLECTIVE_TIMEOUT_MS;
    this.highWaterBytes = options.highWaterBytes ?? DEFAULT_HIGH_WATER_BYTES;
    this.maxStashBytes = options.maxStashBytes ?? DEFAULT_MAX_STASH_BYTES;
    this.clock = options.clock ?? systemClock;
    this.poisonAt = options.poison ?? null;
  }

  /**
   * Sets the run that the following collectives belong to. Every rank of a run sets the
   * same value; a later run's collectives order after all of an earlier run's.
   */
  setRun(run: number): void {
    if (!Number.isInteger(run) || run < 0 || run > MAX_RUN) throw new WebringError('ERR_BAD_REQUEST', `run ${run} outside 0..${MAX_RUN}`);
    this.run = run;
  }

  /**
   * Sums `buf` elementwise across all ranks, in place. Every rank must call it with the
   * same length, step, tag and options. Resolves when `buf` holds the sum and every outgoing
   * message has been handed to the link (so the caller may reuse `buf` at once).
   */
  allReduce(
    buf: Float32Array,
    step: number,
    tag: CollectiveTag = COLLECTIVE_TAG.gradients,
    options: CollectiveOptions = {},
  ): Promise<void> {
    const wire = options.wire ?? 'fp32';
    const exactTail = options.exactTail ?? 0;
    const algorithm = options.algorithm ?? 'ring';
    if (!WIRE_FORMATS.includes(wire)) return Promise.reject(new WebringError('ERR_BAD_REQUEST', `unknown wire format ${String(wire)}`));
    if (!ALGORITHMS.includes(algorithm)) return Promise.reject(new WebringError('ERR_BAD_REQUEST', `unknown algorithm ${String(algorithm)}`));
    if (algorithm === 'halving-doubling' && this.peer === null && this.worldSize > 1) {
      return Promise.reject(new WebringError('ERR_BAD_REQUEST', 'halving-doubling needs links to its partners (the peer option)'));
    }
    if (!Number.isInteger(exactTail) || exactTail < 0 || exactTail > buf.length) {
      return Promise.reject(new WebringError('ERR_BAD_REQUEST', `exactTail ${exactTail} outside 0..${buf.length}`));
    }
    if (this.abortedWith) return Promise.reject(this.abortedWith);
    if (this.active) {
      return Promise.reject(new WebringError('ERR_BAD_STATE', 'an all-reduce is already in flight'));
    }
    const key = collectiveKey(this.run, step, tag);
    if (key <= this.lastDoneKey) {
      return Promise.reject(new WebringError('ERR_STALE_STEP', `collective (run ${this.run}, step ${step}, tag ${tag}) already ran`));
    }
    const n = this.worldSize;
    if (n === 1) {
      this.lastDoneKey = key;
      return Promise.resolve();
    }
    const code = wireCode(wire);
    // A float32 collective is one part, exactly as before the fp16 format existed.
    const split = code === WIRE_FP32 ? buf.length : buf.length - exactTail;
    const tailLength = buf.length - split;
    return new Promise<void>((resolve, reject) => {
      const a: ActiveCollective = {
        startedAt: performance.now(),
        bytesAtStart: this.stats.bytesSent,
        buf,
        step,
        tag,
        key,
        received: 0,
        expected: 0,
        wire: code,
        split,
        headBase: Math.floor(split / n),
        headRem: split % n,
        tailBase: Math.floor(tailLength / n),
        tailRem: tailLength % n,
        plan: algorithm === 'halving-doubling' ? this.planFor(buf.length) : null,
        stage: 0,
        stageReceived: 0,
        seenStride: 0,
        saturated: false,
        resolve,
        reject,
        timer: null,
      };
      const r = this.rank;
      this.active = a;
      this.ensureQueueCapacity(a);
      this.resetSeen(a);
      a.timer = this.clock.setTimeout(() => {
        this.fail(new WebringError('ERR_TIMEOUT', `all-reduce of step ${step} timed out after ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      if (a.plan) {
        this.enqueueStageSends(a);
        this.replayStash(a);
        if (this.active === a) this.advanceStages(a);
        return;
      }
      for (let k = 0; k < n - 1; k++) {
        a.expected += this.chunkCount(a, mod(r - k - 1, n)) + this.chunkCount(a, mod(r - k, n));
      }
      const own = this.chunkCount(a, r);
      for (let c = 0; c < own; c++) this.enqueue(PHASE_REDUCE_SCATTER, 0, c);
      this.replayStash(a);
      if (this.active === a) this.pump();
    });
  }

  private planFor(length: number): HalvingDoublingPlan {
    let plan = this.plans.get(length);
    if (!plan) {
      if (this.plans.size >= 8) this.plans.clear();
      plan = halvingDoublingPlan(this.rank, this.worldSize, length);
      this.plans.set(length, plan);
    }
    return plan;
  }

  /**
   * Feeds one message that arrived from rank `from` (by default the left neighbour). Ring
   * messages are taken only from the left neighbour, exchange messages only from the
   * partner the schedule names for their stage.
   */
  receive(bytes: Uint8Array, from: number = this.left): void {
    const h = this.inHeader;
    if (!readHeader(bytes, h) || (h.phase !== PHASE_REDUCE_SCATTER && h.phase !== PHASE_ALL_GATHER && h.phase !== PHASE_EXCHANGE)) {
      this.stats.droppedMalformed++;
      this.reject(from, 'malformed', `a ${bytes.byteLength}-byte message with no valid header`);
      return;
    }
    if (h.generation < this.generation) {
      // Sent before the sender applied this generation: honest around every change.
      this.stats.droppedStaleGeneration++;
      return;
    }
    if (!this.senders.has(from)) {
      this.stats.droppedWrongSender++;
      return;
    }
    if (h.generation > this.generation) {
      // The network holds a newer generation's messages back until it is applied here.
      this.reject(from, 'generation', `a message of generation ${h.generation} into generation ${this.generation}`);
      return;
    }
    if (h.phase !== PHASE_EXCHANGE && from !== this.left) {
      this.reject(from, 'malformed', `a ring message, but it is not this rank's left neighbour`);
      return;
    }
    if (h.tag >= TAG_SPACE || (h.wire !== WIRE_FP32 && h.wire !== WIRE_FP16)) {
      this.stats.droppedMalformed++;
      this.reject(from, 'malformed', `tag ${h.tag}, wire ${h.wire}`);
      return;
    }
    const key = collectiveKey(h.run, h.step, h.tag);
    const a = this.active;
    if (a && key === a.key) {
      this.process(a, h, bytes, from);
      return;
    }
    if (key <= this.lastDoneKey || (a !== null && key < a.key) || this.abortedWith) {
      this.stats.droppedStaleStep++;
      return;
    }
    if (a && !a.plan && from === this.left && a.received < a.expected) {
      // Over one ordered channel the left neighbour finishes sending a collective before it
      // starts the next: a later one's message now means it skipped some of this one's.
      this.reject(from, 'out-of-order', `run ${h.run} step ${h.step} tag ${h.tag} while it still owed ${a.expected - a.received} message(s) of step ${a.step} tag ${a.tag}`);
      return;
    }
    // A faster neighbour may already be one collective ahead: keep its messages until we start it.
    if (this.stashBytes + bytes.byteLength > this.maxStashBytes) {
      this.stats.droppedOverflow++;
      return;
    }
    this.stash.push({ key, from, bytes: bytes.slice() });
    this.stashBytes += bytes.byteLength;
  }

  /**
   * `from` sent what no honest peer sends: fail this generation's collectives at once,
   * naming it. Only a rank that sends to this one can be named (the server checks the same
   * topology); anything else is dropped and counted.
   */
  private reject(from: number, misbehaviour: Misbehaviour, detail: string): void {
    if (!this.senders.has(from)) return;
    this.stats.rejectedMisbehaviour++;
    this.abort(new PeerMisbehavedError(from, misbehaviour, `rank ${from} sent ${detail} (${misbehaviour}); rejected before any of it was summed`));
  }

  /** Fails the collective in flight and every later one: the generation is over. */
  abort(error: WebringError): void {
    // The first reason stands: a run ended by the server stays ended when a new generation follows.
    this.abortedWith ??= error;
    this.stash = [];
    this.stashBytes = 0;
    this.fail(this.abortedWith);
  }

  /** Fails the collective in flight, if any; later collectives of this generation still run. */
  cancel(error: WebringError): void {
    this.fail(error);
  }

  get isAborted(): boolean {
    return this.abortedWith !== null;
  }

  private headChunks(a: ActiveCollective, s: number): number {
    return Math.ceil((a.headBase + (s < a.headRem ? 1 : 0)) / wireChunkFloats(a.wire));
  }

  private chunkCount(a: ActiveCollective, s: number): number {
    return this.headChunks(a, s) + Math.ceil((a.tailBase + (s < a.tailRem ? 1 : 0)) / MAX_CHUNK_FLOATS);
  }

  /** Fills `chunkAt` with where chunk `chunk` of segment `s` lies; false when it does not exist. */
  private locate(a: ActiveCollective, s: number, chunk: number): boolean {
    const at = this.chunkAt;
    const headChunks = this.headChunks(a, s);
    let c = chunk;
    let from = s * a.headBase + Math.min(s, a.headRem);
    let segLength = a.headBase + (s < a.headRem ? 1 : 0);
    at.wire = a.wire;
    if (c >= headChunks) {
      c -= headChunks;
      from = a.split + s * a.tailBase + Math.min(s, a.tailRem);
      segLength = a.tailBase + (s < a.tailRem ? 1 : 0);
      at.wire = WIRE_FP32;
    }
    const perChunk = wireChunkFloats(at.wire);
    at.start = from + c * perChunk;
    at.length = Math.min(perChunk, segLength - c * perChunk);
    return at.length > 0;
  }

  private process(a: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, from: number): void {
    if (h.phase === PHASE_EXCHANGE || a.plan) {
      this.processExchange(a, h, bytes, from);
      return;
    }
    const n = this.worldSize;
    if (h.ringStep >= n - 1) {
      this.stats.droppedMalformed++;
      this.reject(from, 'malformed', `ring step ${h.ringStep} of ${n - 1}`);
      return;
    }
    const reduce = h.phase === PHASE_REDUCE_SCATTER;
    // Reduce-scatter step k delivers segment (r-k-1); all-gather step k delivers segment (r-k).
    const s = reduce ? mod(this.rank - h.ringStep - 1, n) : mod(this.rank - h.ringStep, n);
    if (h.wire !== a.wire) {
      // Every rank runs a collective in the same format: its values cannot be summed.
      this.stats.droppedWireMismatch++;
      this.reject(from, 'malformed', `wire format ${h.wire} into a collective of format ${a.wire}`);
      return;
    }
    const at = this.chunkAt;
    if (h.chunk >= a.seenStride || !this.locate(a, s, h.chunk)) {
      this.stats.droppedMalformed++;
      this.reject(from, 'malformed', `chunk ${h.chunk}, beyond segment ${s}`);
      return;
    }
    const seenAt = ((h.phase - 1) * (n - 1) + h.ringStep) * a.seenStride + h.chunk;
    if (!this.admit(a, h, bytes, from, seenAt)) return;
    const { start, length: len } = at;
    const buf = a.buf;
    const last = h.ringStep === n - 2;
    if (at.wire === WIRE_FP16) {
      const payload = this.payloadHalves(bytes, len);
      if (reduce) {
        addHalves(payload, buf, start, len);
        // The owner keeps what it will send, so that it ends equal to every other rank.
        if (last) this.noteOverflows(a, roundToHalves(buf, start, len));
      } else {
        decodeHalves(payload, buf, start, len);
      }
    } else {
      const payload = this.payloadFloats(bytes, len);
      if (reduce) for (let i = 0; i < len; i++) buf[start + i]! += payload[i]!;
      else for (let i = 0; i < len; i++) buf[start + i] = payload[i]!;
    }
    if (reduce) {
      // The partial sum moves on at once (pipelining). After the last reduce step this
      // chunk is final and becomes the first all-gather message.
      if (!last) this.enqueue(PHASE_REDUCE_SCATTER, h.ringStep + 1, h.chunk);
      else this.enqueue(PHASE_ALL_GATHER, 0, h.chunk);
    } else if (!last) {
      this.enqueue(PHASE_ALL_GATHER, h.ringStep + 1, h.chunk);
    }
    a.received++;
    this.pump();
  }

  /**
   * The checks that need the chunk's place (`chunkAt`): exact length, first arrival, every
   * value finite. All of them pass before a single value is added; false when rejected.
   */
  private admit(a: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, from: number, seenAt: number): boolean {
    const { length: len, wire } = this.chunkAt;
    if (bytes.byteLength !== HEADER_BYTES + len * wireFloatBytes(wire)) {
      this.stats.droppedMalformed++;
      this.reject(from, 'length', `${bytes.byteLength} bytes where chunk ${h.chunk} takes ${HEADER_BYTES + len * wireFloatBytes(wire)}`);
      return false;
    }
    if (this.seen[seenAt] === 1) {
      this.reject(from, 'duplicate', `chunk ${h.chunk} of phase ${h.phase} step ${h.ringStep} a second time`);
      return false;
    }
    const bad = wire === WIRE_FP16 ? firstNonFiniteHalf(this.payloadHalves(bytes, len), len) : firstNonFiniteFloat(this.payloadFloats(bytes, len), len);
    if (bad >= 0) {
      this.reject(from, 'non-finite', `a non-finite value at element ${bad} of chunk ${h.chunk}`);
      return false;
    }
    this.seen[seenAt] = 1;
    if (h.flags & FLAG_SATURATED) a.saturated = true;
    return true;
  }

  /** Sizes and clears the arrival marks for a new collective (grown only when a larger one needs it). */
  private resetSeen(a: ActiveCollective): void {
    const n = this.worldSize;
    let slots: number;
    if (a.plan) {
      a.seenStride = this.rangeChunks(a, 0, a.buf.length);
      slots = a.plan.stages.length * a.seenStride;
    } else {
      a.seenStride = this.chunkCount(a, 0); // segment 0 is never shorter than another
      slots = 2 * (n - 1) * a.seenStride;
    }
    if (this.seen.length < slots) this.seen = new Uint8Array(slots);
    else this.seen.fill(0, 0, slots);
  }

  /** fp16 values that overflowed where this rank rounded its own copy: the collective fails alike everywhere. */
  private noteOverflows(a: ActiveCollective, overflows: number): void {
    if (overflows === 0) return;
    this.stats.fp16Overflows += overflows;
    a.saturated = true;
  }

  /** Chunks of the exchanged range [lo, hi): its part before `split` in `wire`, then its float32 part. */
  private rangeChunks(a: ActiveCollective, lo: number, hi: number): number {
    const headEnd = Math.min(hi, a.split);
    const tailStart = Math.max(lo, a.split);
    return Math.ceil(Math.max(0, headEnd - lo) / wireChunkFloats(a.wire)) + Math.ceil(Math.max(0, hi - tailStart) / MAX_CHUNK_FLOATS);
  }

  /** Fills `chunkAt` with where chunk `chunk` of the range [lo, hi) lies; false when it does not exist. */
  private locateInRange(a: ActiveCollective, lo: number, hi: number, chunk: number): boolean {
    const at = this.chunkAt;
    const headEnd = Math.min(hi, a.split);
    const headLength = Math.max(0, headEnd - lo);
    const perHead = wireChunkFloats(a.wire);
    const headChunks = Math.ceil(headLength / perHead);
    if (chunk < headChunks) {
      at.wire = a.wire;
      at.start = lo + chunk * perHead;
      at.length = Math.min(perHead, headLength - chunk * perHead);
    } else {
      const tailStart = Math.max(lo, a.split);
      const c = chunk - headChunks;
      at.wire = WIRE_FP32;
      at.start = tailStart + c * MAX_CHUNK_FLOATS;
      at.length = Math.min(MAX_CHUNK_FLOATS, hi - tailStart - c * MAX_CHUNK_FLOATS);
    }
    return at.length > 0;
  }

  /**
   * One halving-doubling message. It must come from the stage's partner and fit the range
   * the schedule says; a message of a later stage waits (addition order decides the bits),
   * one of an earlier stage is a duplicate.
   */
  private processExchange(a: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, from: number): void {
    const plan = a.plan;
    if (!plan || h.phase !== PHASE_EXCHANGE || h.ringStep >= plan.stages.length) {
      this.stats.droppedMalformed++;
      return;
    }
    const st = plan.stages[h.ringStep]!;
    if (from !== st.recvFrom) {
      this.stats.droppedWrongSender++;
      this.reject(from, 'malformed', `an exchange of stage ${h.ringStep}, whose partner is rank ${st.recvFrom}`);
      return;
    }
    if (h.wire !== a.wire) {
      this.stats.droppedWireMismatch++;
      this.reject(from, 'malformed', `wire format ${h.wire} into a collective of format ${a.wire}`);
      return;
    }
    if (h.chunk >= a.seenStride || !this.locateInRange(a, st.recvStart, st.recvEnd, h.chunk)) {
      this.stats.droppedMalformed++;
      this.reject(from, 'malformed', `chunk ${h.chunk}, beyond the range of stage ${h.ringStep}`);
      return;
    }
    // A stage before the one in progress is complete: every message of it has been seen.
    if (!this.admit(a, h, bytes, from, h.ringStep * a.seenStride + h.chunk)) return;
    if (h.ringStep > a.stage) {
      this.defer(h.ringStep, bytes);
      return;
    }
    this.applyExchange(a, st.add, bytes);
    a.stageReceived++;
    this.advanceStages(a);
  }

  /** Adds or copies the message's values at `chunkAt`. */
  private applyExchange(a: ActiveCollective, add: boolean, bytes: Uint8Array): void {
    const { start, length: len, wire } = this.chunkAt;
    const buf = a.buf;
    if (wire === WIRE_FP16) {
      const payload = this.payloadHalves(bytes, len);
      if (add) addHalves(payload, buf, start, len);
      else decodeHalves(payload, buf, start, len);
    } else {
      const payload = this.payloadFloats(bytes, len);
      if (add) for (let i = 0; i < len; i++) buf[start + i]! += payload[i]!;
      else for (let i = 0; i < len; i++) buf[start + i] = payload[i]!;
    }
  }

  private defer(stage: number, bytes: Uint8Array): void {
    if ((this.deferred.length + 1) * MAX_MESSAGE_BYTES > this.maxStashBytes) {
      this.stats.droppedOverflow++;
      return;
    }
    const copy = this.deferPool.pop() ?? new Uint8Array(MAX_MESSAGE_BYTES);
    copy.set(bytes);
    this.deferred.push({ stage, length: bytes.byteLength, bytes: copy });
  }

  /** Moves through every stage whose messages have all arrived, starting each next stage's sends. */
  private advanceStages(a: ActiveCollective): void {
    const plan = a.plan!;
    while (this.active === a && a.stage < plan.stages.length) {
      const st = plan.stages[a.stage]!;
      if (a.stageReceived < this.rangeChunks(a, st.recvStart, st.recvEnd)) break;
      if (a.stage === plan.lastReduceStage && a.wire === WIRE_FP16) {
        // The owner keeps what it will send, so that it ends equal to every other rank.
        const end = Math.min(plan.ownedEnd, a.split);
        if (end > plan.ownedStart) this.noteOverflows(a, roundToHalves(a.buf, plan.ownedStart, end - plan.ownedStart));
      }
      a.stage++;
      a.stageReceived = 0;
      if (a.stage < plan.stages.length) {
        this.enqueueStageSends(a);
        this.applyDeferred(a);
      }
    }
    this.pump();
  }

  private enqueueStageSends(a: ActiveCollective): void {
    const st = a.plan!.stages[a.stage]!;
    if (st.sendTo < 0) return;
    const chunks = this.rangeChunks(a, st.sendStart, st.sendEnd);
    for (let c = 0; c < chunks; c++) this.enqueue(PHASE_EXCHANGE, a.stage, c);
  }

  private applyDeferred(a: ActiveCollective): void {
    if (this.deferred.length === 0) return;
    const st = a.plan!.stages[a.stage]!;
    const h = this.inHeader;
    const waiting: typeof this.deferred = [];
    for (const d of this.deferred) {
      if (d.stage !== a.stage) {
        waiting.push(d);
        continue;
      }
      readHeader(d.bytes, h);
      this.locateInRange(a, st.recvStart, st.recvEnd, h.chunk);
      this.applyExchange(a, st.add, d.bytes);
      a.stageReceived++;
      this.deferPool.push(d.bytes);
    }
    this.deferred = waiting;
  }

  private sendExchangeChunk(a: ActiveCollective, stage: number, chunk: number, link: RingLink): void {
    const st = a.plan!.stages[stage]!;
    this.locateInRange(a, st.sendStart, st.sendEnd, chunk);
    const { start, length, wire } = this.chunkAt;
    this.sendMessage(a, PHASE_EXCHANGE, stage, chunk, start, length, wire, link);
  }

  /** A zero-copy view when the payload is 4-byte aligned, else a copy into scratch. */
  private payloadFloats(bytes: Uint8Array, len: number): Float32Array {
    const offset = bytes.byteOffset + HEADER_BYTES;
    if (offset % FLOAT_BYTES === 0) return new Float32Array(bytes.buffer, offset, len);
    const scratchBytes = new Uint8Array(this.alignedScratch.buffer, 0, len * FLOAT_BYTES);
    scratchBytes.set(bytes.subarray(HEADER_BYTES, HEADER_BYTES + len * FLOAT_BYTES));
    return this.alignedScratch;
  }

  /** The same for a float16 payload (2-byte alignment). */
  private payloadHalves(bytes: Uint8Array, len: number): Uint16Array {
    const offset = bytes.byteOffset + HEADER_BYTES;
    if (offset % 2 === 0) return new Uint16Array(bytes.buffer, offset, len);
    const scratchBytes = new Uint8Array(this.alignedScratch.buffer, 0, len * 2);
    scratchBytes.set(bytes.subarray(HEADER_BYTES, HEADER_BYTES + len * 2));
    return this.alignedScratchHalves;
  }

  private ensureQueueCapacity(a: ActiveCollective): void {
    const maxChunksPerSegment = Math.ceil((a.headBase + 1) / wireChunkFloats(a.wire)) + Math.ceil((a.tailBase + 1) / MAX_CHUNK_FLOATS);
    // The ring queues at most a few segments' chunks; halving-doubling at most one stage's
    // range, the whole buffer in its PRE and POST stages.
    const wholeBuffer = Math.ceil(a.buf.length / wireChunkFloats(a.wire)) + 2;
    const needed = 3 * Math.max(2 * this.worldSize * maxChunksPerSegment, wholeBuffer);
    if (this.queue.length < needed) this.queue = new Int32Array(needed);
    this.qHead = 0;
    this.qTail = 0;
  }

  private enqueue(phase: number, ringStep: number, chunk: number): void {
    if (this.qTail + 3 > this.queue.length) {
      // Compact, then grow if still needed; happens only with a pathological backlog.
      this.queue.copyWithin(0, this.qHead, this.qTail);
      this.qTail -= this.qHead;
      this.qHead = 0;
      if (this.qTail + 3 > this.queue.length) {
        const bigger = new Int32Array(this.queue.length * 2 + 3);
        bigger.set(this.queue);
        this.queue = bigger;
      }
    }
    this.queue[this.qTail++] = phase;
    this.queue[this.qTail++] = ringStep;
    this.queue[this.qTail++] = chunk;
  }

  private pump(): void {
    const a = this.active;
    if (!a || this.waitingForLink) return;
    while (this.qHead < this.qTail) {
      const phase = this.queue[this.qHead]!;
      const ringStep = this.queue[this.qHead + 1]!;
      const chunk = this.queue[this.qHead + 2]!;
      const link = phase === PHASE_EXCHANGE ? this.peer?.(a.plan!.stages[ringStep]!.sendTo) : this.right;
      if (!link) {
        this.fail(new WebringError('ERR_PEER_FAILED', `no link to rank ${a.plan!.stages[ringStep]!.sendTo}`));
        return;
      }
      if (!link.isOpen() || link.bufferedAmount() > this.highWaterBytes) {
        this.waitingForLink = true;
        link.whenWritable().then(
          () => {
            this.waitingForLink = false;
            this.pump();
          },
          (err: unknown) => {
            this.waitingForLink = false;
            const message = err instanceof Error ? err.message : String(err);
            this.fail(new WebringError('ERR_PEER_FAILED', `right neighbour failed: ${message}`));
          },
        );
        return;
      }
      this.qHead += 3;
      if (phase === PHASE_EXCHANGE) this.sendExchangeChunk(a, ringStep, chunk, link);
      else this.sendChunk(a, phase, ringStep, chunk, link);
    }
    this.qHead = 0;
    this.qTail = 0;
    const done = a.plan ? a.stage === a.plan.stages.length : a.received === a.expected;
    if (done) this.finish(a);
  }

  private sendChunk(a: ActiveCollective, phase: number, ringStep: number, chunk: number, link: RingLink): void {
    const n = this.worldSize;
    // Reduce-scatter step k sends segment (r-k); all-gather step k sends segment (r+1-k).
    const s = phase === PHASE_REDUCE_SCATTER ? mod(this.rank - ringStep, n) : mod(this.rank + 1 - ringStep, n);
    const at = this.chunkAt;
    this.locate(a, s, chunk);
    const { start, length: len, wire } = at;
    this.sendMessage(a, phase, ringStep, chunk, start, len, wire, link);
  }

  /** Frames floats [start, start+len) of the collective's buffer in one reused message and sends it. */
  private sendMessage(a: ActiveCollective, phase: number, ringStep: number, chunk: number, start: number, len: number, wire: WireCode, link: RingLink): void {
    const buf = a.buf;
    // The sender's own check: nothing non-finite leaves this rank (see the file comment).
    let clamped = false;
    if (wire === WIRE_FP16) {
      this.stats.fp16Overflows += encodeHalves(buf, start, this.msgHalves, len);
      clamped = saturateHalves(this.msgHalves, len);
    } else {
      const out = this.msgFloats;
      let check = 0;
      for (let i = 0; i < len; i++) {
        const v = buf[start + i]!;
        out[i] = v;
        check += v - v; // NaN once any value is ±Infinity or NaN, else 0
      }
      if (check !== 0) clamped = saturateFloats(out, len);
    }
    if (clamped) {
      this.stats.saturatedSends++;
      a.saturated = true;
    }
    const h = this.header;
    h.phase = phase;
    h.ringStep = ringStep;
    h.tag = a.tag;
    h.wire = a.wire;
    h.flags = a.saturated ? FLAG_SATURATED : 0;
    h.generation = this.generation;
    h.run = this.run;
    h.step = a.step;
    h.chunk = chunk;
    writeHeader(this.msgHeaderView, h);
    let byteLength = HEADER_BYTES + len * wireFloatBytes(wire);
    const poison = this.poisonAt?.(a.step) ?? null;
    if (poison === 'nan') {
      if (wire === WIRE_FP16) this.msgHalves[0] = 0x7e00;
      else this.msgFloats[0] = Number.NaN;
    } else if (poison === 'length') {
      byteLength -= 2;
    }
    let view = this.msgViews.get(byteLength);
    if (!view) {
      view = new Uint8Array(this.msgBuffer, 0, byteLength);
      this.msgViews.set(byteLength, view);
    }
    link.send(view);
    this.stats.messagesSent++;
    this.stats.bytesSent += byteLength;
  }

  private replayStash(a: ActiveCollective): void {
    if (this.stash.length === 0) return;
    const matching: Array<{ from: number; bytes: Uint8Array }> = [];
    const later: Array<{ key: number; from: number; bytes: Uint8Array }> = [];
    let laterBytes = 0;
    for (const entry of this.stash) {
      if (entry.key === a.key) matching.push(entry);
      else if (entry.key > a.key) {
        later.push(entry);
        laterBytes += entry.bytes.byteLength;
      } else this.stats.droppedStaleStep++;
    }
    this.stash = later;
    this.stashBytes = laterBytes;
    const h = this.inHeader;
    for (const { from, bytes } of matching) {
      if (this.active !== a) return;
      readHeader(bytes, h);
      this.process(a, h, bytes, from);
    }
  }

  private releaseDeferred(): void {
    for (const d of this.deferred) this.deferPool.push(d.bytes);
    this.deferred = [];
  }

  private finish(a: ActiveCollective): void {
    this.lastTransfer = { bytes: this.stats.bytesSent - a.bytesAtStart, ms: performance.now() - a.startedAt };
    this.clock.clearTimeout(a.timer);
    this.active = null;
    this.lastDoneKey = a.key;
    if (a.saturated) {
      // The flag reached every rank on a message of the clamped chunk: all fail here alike.
      a.reject(
        new WebringError(
          'ERR_BAD_DATA',
          `step ${a.step}: a value of the ${a.wire === WIRE_FP16 ? 'fp16' : 'fp32'} all-reduce was beyond the format's range or not finite on some rank (an fp16 sum beyond ±65504, or a diverged model); resume with wire 'fp32' or a lower learning rate`,
        ),
      );
      return;
    }
    a.resolve();
  }

  private fail(error: WebringError): void {
    const a = this.active;
    if (!a) return;
    this.clock.clearTimeout(a.timer);
    this.active = null;
    this.qHead = 0;
    this.qTail = 0;
    this.releaseDeferred();
    a.reject(error);
  }
}

/** Index of the first value that is ±Infinity or NaN, or -1. */
function firstNonFiniteFloat(values: Float32Array, length: number): number {
  for (let i = 0; i < length; i++) {
    const v = values[i]!;
    if (v - v !== 0) return i;
  }
  return -1;
}

/** The same for halves: all exponent bits set. */
function firstNonFiniteHalf(halves: Uint16Array, length: number): number {
  for (let i = 0; i < length; i++) if ((halves[i]! & HALF_EXPONENT) === HALF_EXPONENT) return i;
  return -1;
}

/** Clamps ±Infinity to ±FLOAT32_MAX and NaN to 0, in place; true when anything changed. */
function saturateFloats(values: Float32Array, length: number): boolean {
  let changed = false;
  for (let i = 0; i < length; i++) {
    const v = values[i]!;
    if (v - v === 0) continue;
    values[i] = v > 0 ? FLOAT32_MAX : v < 0 ? -FLOAT32_MAX : 0;
    changed = true;
  }
  return changed;
}

/** Clamps ±Infinity halves to ±65504 and NaN halves to 0, in place; true when anything changed. */
function saturateHalves(halves: Uint16Array, length: number): boolean {
  let changed = false;
  for (let i = 0; i < length; i++) {
    const bits = halves[i]!;
    if ((bits & HALF_EXPONENT) !== HALF_EXPONENT) continue;
    halves[i] = (bits & 0x03ff) !== 0 ? 0 : (bits & 0x8000) | HALF_MAX_BITS;
    changed = true;
  }
  return changed;
}
