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
 * DOM-free: the browser passes simple-peer data channels, the Node worker passes wrtc
 * channels, the unit tests pass an in-memory link.
 */
import { WebringError } from './errors';
import { ALGORITHMS, WIRE_FORMATS, type Algorithm, type WireFormat } from './protocol';
import { addHalves, decodeHalves, encodeHalves, roundToHalves } from './fp16';
import { halvingDoublingPlan, type HalvingDoublingPlan } from './halving-doubling';
import {
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
} from './ring-wire';

/** One direction of a ring link: where this peer sends (its right neighbour). */
export interface RingLink {
  /** Sends one message. Must copy `bytes` before returning, as RTCDataChannel.send does. */
  send(bytes: Uint8Array): void;
  isOpen(): boolean;
  bufferedAmount(): number;
  /** Resolves once the link is open and its send buffer is below the low-water mark; rejects if the link fails. */
  whenWritable(): Promise<void>;
}

export interface Clock {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

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
  };

  private readonly right: RingLink | null;
  private readonly peer: ((rank: number) => RingLink | null) | null;
  private readonly left: number;
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
  private readonly header: ChunkHeader = { phase: 0, ringStep: 0, tag: 0, wire: 0, generation: 0, run: 0, step: 0, chunk: 0 };
  private readonly inHeader: ChunkHeader = { phase: 0, ringStep: 0, tag: 0, wire: 0, generation: 0, run: 0, step: 0, chunk: 0 };
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
    this.left = mod(rank - 1, worldSize);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_COLLECTIVE_TIMEOUT_MS;
    this.highWaterBytes = options.highWaterBytes ?? DEFAULT_HIGH_WATER_BYTES;
    this.maxStashBytes = options.maxStashBytes ?? DEFAULT_MAX_STASH_BYTES;
    this.clock = options.clock ?? systemClock;
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
        resolve,
        reject,
        timer: null,
      };
      const r = this.rank;
      this.active = a;
      this.ensureQueueCapacity(a);
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
      return;
    }
    if (h.phase !== PHASE_EXCHANGE && from !== this.left) {
      this.stats.droppedWrongSender++;
      return;
    }
    if (h.generation !== this.generation) {
      this.stats.droppedStaleGeneration++;
      return;
    }
    if (h.tag >= TAG_SPACE || (h.wire !== WIRE_FP32 && h.wire !== WIRE_FP16)) {
      this.stats.droppedMalformed++;
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
    // A faster neighbour may already be one collective ahead: keep its messages until we start it.
    if (this.stashBytes + bytes.byteLength > this.maxStashBytes) {
      this.stats.droppedOverflow++;
      return;
    }
    this.stash.push({ key, from, bytes: bytes.slice() });
    this.stashBytes += bytes.byteLength;
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
      return;
    }
    const reduce = h.phase === PHASE_REDUCE_SCATTER;
    // Reduce-scatter step k delivers segment (r-k-1); all-gather step k delivers segment (r-k).
    const s = reduce ? mod(this.rank - h.ringStep - 1, n) : mod(this.rank - h.ringStep, n);
    if (h.wire !== a.wire) {
      // A peer that runs this collective in another format: its values cannot be summed.
      this.stats.droppedWireMismatch++;
      return;
    }
    const at = this.chunkAt;
    if (!this.locate(a, s, h.chunk)) {
      this.stats.droppedMalformed++;
      return;
    }
    const { start, length: len } = at;
    if (bytes.byteLength !== HEADER_BYTES + len * wireFloatBytes(at.wire)) {
      this.stats.droppedMalformed++;
      return;
    }
    const buf = a.buf;
    const last = h.ringStep === n - 2;
    if (at.wire === WIRE_FP16) {
      const payload = this.payloadHalves(bytes, len);
      if (reduce) {
        addHalves(payload, buf, start, len);
        // The owner keeps what it will send, so that it ends equal to every other rank.
        if (last) this.stats.fp16Overflows += roundToHalves(buf, start, len);
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
      return;
    }
    if (h.wire !== a.wire) {
      this.stats.droppedWireMismatch++;
      return;
    }
    const at = this.chunkAt;
    if (!this.locateInRange(a, st.recvStart, st.recvEnd, h.chunk) || bytes.byteLength !== HEADER_BYTES + at.length * wireFloatBytes(at.wire)) {
      this.stats.droppedMalformed++;
      return;
    }
    if (h.ringStep < a.stage) {
      this.stats.droppedStaleStep++;
      return;
    }
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
        if (end > plan.ownedStart) this.stats.fp16Overflows += roundToHalves(a.buf, plan.ownedStart, end - plan.ownedStart);
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
    const h = this.header;
    h.phase = phase;
    h.ringStep = ringStep;
    h.tag = a.tag;
    h.wire = a.wire;
    h.generation = this.generation;
    h.run = this.run;
    h.step = a.step;
    h.chunk = chunk;
    writeHeader(this.msgHeaderView, h);
    const buf = a.buf;
    if (wire === WIRE_FP16) {
      this.stats.fp16Overflows += encodeHalves(buf, start, this.msgHalves, len);
    } else {
      const out = this.msgFloats;
      for (let i = 0; i < len; i++) out[i] = buf[start + i]!;
    }
    const byteLength = HEADER_BYTES + len * wireFloatBytes(wire);
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
