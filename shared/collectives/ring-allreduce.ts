/**
 * The collective engine: one all-reduce at a time over injected links, by one of three
 * schedules (ring-schedule.ts, halving-doubling-schedule.ts, and hub-schedule.ts for a
 * rank of the hub collective; the hub itself runs hub-reducer.ts), with the ordering of
 * collectives, the stash of early messages, the timeout and the framing shared by both.
 *
 * The folder shared/collectives/ owns the all-reduce: schedules, wire format, fp16, chunk
 * layout, admission of peer messages, the choice between algorithms. It may import
 * protocol/ and util/ only; never training/, network/, the DOM or tfjs, so that the
 * browser, a Node worker and a unit test each pass their own links and clock.
 *
 * The fp16 wire format (`{ wire: 'fp16' }`) sends every value as a binary16 half, twice as
 * many per message, so half the bytes. A rank adds the half it receives to its own
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
 * Hostile or broken peers: see admission.ts (what a receiver checks) and chunk-writer.ts
 * (what a sender checks, and the FLAG_SATURATED that makes every rank fail alike).
 */
import { WebringError } from '../protocol/errors';
import { ALGORITHMS, leftOf, sendersOf, type Misbehaviour } from '../protocol';
import { systemClock, type Clock } from '../util/clock';
import { HubSchedule } from './hub-schedule';
import { ChainBroadcastSchedule } from './chain-broadcast-schedule';
import { Admission, PeerMisbehavedError } from './admission';
import { ChunkLayout } from './chunk-layout';
import { ChunkWriter } from './chunk-writer';
import {
  COLLECTIVE_TAG,
  MAX_RUN,
  collectiveKey,
  createCollectiveStats,
  sumTransfer,
  type BroadcastChain,
  type CollectiveEngine,
  type CollectiveOptions,
  type CollectiveStats,
  type CollectiveTag,
  type PoisonKind,
  type RingLink,
  type Transfer,
} from './collective';
import { HalvingDoublingSchedule } from './halving-doubling-schedule';
import { PayloadReader } from './payload';
import { RingSchedule } from './ring-schedule';
import { SendQueue, type SendTarget } from './send-queue';
import type { ActiveCollective, EngineParts, Schedule } from './schedule';
import { COLLECTIVE_WIRES, FLAG_SATURATED, PHASE_HUB_UP, readHeader, wireCode, wireName, type ChunkHeader, type CollectiveWire } from './wire';


/** Stop sending while this much is queued in the channel; ~0.3 s of a 30 MB/s link. */
export const DEFAULT_HIGH_WATER_BYTES = 8 * 1024 * 1024;
/** Generous: one step includes the slowest peer's forward and backward pass. */
export const DEFAULT_COLLECTIVE_TIMEOUT_MS = 120_000;
/** Early messages of the next collective are kept until it starts; beyond this, dropped. */
export const DEFAULT_MAX_STASH_BYTES = 64 * 1024 * 1024;
/** A rank count that fits the header's one-byte ring step and stage. */
const MAX_WORLD_SIZE = 255;

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
  /** The link to the generation's hub; null or absent when it has none. Without it the hub collective is refused. */
  hub?: RingLink | null;
  timeoutMs?: number;
  highWaterBytes?: number;
  maxStashBytes?: number;
  /** Times the collectives (lastTransfer) and their timeouts. Default: the system clock. */
  clock?: Clock;
  /**
   * Fault injection, never set in production: what this rank writes into every message of
   * the collective at `step`, past its own sender-side check (a hostile peer), or null.
   */
  poison?: (step: number) => PoisonKind | null;
}

interface Stashed {
  key: number;
  from: number;
  bytes: Uint8Array;
}

export class RingAllReduce implements CollectiveEngine {
  readonly rank: number;
  readonly worldSize: number;
  readonly generation: number;
  readonly stats: CollectiveStats = createCollectiveStats();
  /** Bytes this rank sent in the last finished collective (all of a step's gradient sum), and how long it took. */
  lastTransfer: Transfer = { bytes: 0, ms: 0 };

  private readonly peer: ((rank: number) => RingLink | null) | null;
  private readonly left: number;
  /** Ranks that send to this one in some schedule: the left neighbour and the halving-doubling partners. */
  private readonly senders: ReadonlySet<number>;
  private readonly poisonAt: ((step: number) => PoisonKind | null) | null;
  private readonly timeoutMs: number;
  private readonly maxStashBytes: number;
  private readonly clock: Clock;

  private readonly layout = new ChunkLayout();
  private readonly payload = new PayloadReader();
  private readonly admission: Admission;
  private readonly queue: SendQueue;
  private readonly writer = new ChunkWriter();
  private readonly ring: RingSchedule;
  private readonly halvingDoubling: HalvingDoublingSchedule;
  private readonly hub: HubSchedule | null;
  private readonly chain: ChainBroadcastSchedule;
  private readonly inHeader: ChunkHeader = { phase: 0, ringStep: 0, tag: 0, wire: 0, flags: 0, generation: 0, run: 0, step: 0, chunk: 0 };

  private active: ActiveCollective | null = null;
  private lastDoneKey = -1;
  private run = 0;
  private abortedWith: WebringError | null = null;
  private stash: Stashed[] = [];
  private stashBytes = 0;

  constructor(options: RingAllReduceOptions) {
    const { rank, worldSize } = options;
    if (!Number.isInteger(worldSize) || worldSize < 1 || worldSize > MAX_WORLD_SIZE) {
      throw new WebringError('ERR_BAD_REQUEST', `worldSize must be 1..${MAX_WORLD_SIZE}, got ${worldSize}`);
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
    this.peer = options.peer ?? null;
    this.left = leftOf(rank, worldSize);
    this.senders = sendersOf(rank, worldSize, (options.hub ?? null) !== null);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_COLLECTIVE_TIMEOUT_MS;
    this.maxStashBytes = options.maxStashBytes ?? DEFAULT_MAX_STASH_BYTES;
    this.clock = options.clock ?? systemClock;
    this.poisonAt = options.poison ?? null;
    this.admission = new Admission({
      generation: this.generation,
      left: this.left,
      senders: this.senders,
      stats: this.stats,
      payload: this.payload,
      reject: (from, misbehaviour, detail) => this.reject(from, misbehaviour, detail),
    });
    // Bound once: the queue calls these per message, and they stay off the public surface.
    const target: SendTarget = {
      linkFor: (phase, step) => this.active!.schedule.linkFor(phase, step),
      send: (phase, step, chunk, link) => this.sendChunk(phase, step, chunk, link),
      missingLink: (phase, step) => this.fail(new WebringError('ERR_PEER_FAILED', this.active!.schedule.missingLinkDetail(phase, step))),
      writable: () => this.pump(),
      linkFailed: (error) => this.linkFailed(error),
    };
    this.queue = new SendQueue(target, options.highWaterBytes ?? DEFAULT_HIGH_WATER_BYTES);
    const parts: EngineParts = {
      rank,
      worldSize,
      stats: this.stats,
      layout: this.layout,
      admission: this.admission,
      payload: this.payload,
      queue: this.queue,
      pump: () => this.pump(),
      isActive: (c) => this.active === c,
    };
    this.ring = new RingSchedule(parts, options.right, this.left);
    this.halvingDoubling = new HalvingDoublingSchedule(parts, this.peer, this.maxStashBytes);
    this.hub = options.hub ? new HubSchedule(parts, options.hub) : null;
    this.chain = new ChainBroadcastSchedule(parts, options.right, this.left);
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
  allReduce(buf: Float32Array, step: number, tag: CollectiveTag = COLLECTIVE_TAG.gradients, options: CollectiveOptions = {}): Promise<void> {
    const wire = options.wire ?? 'fp32';
    const exactTail = options.exactTail ?? 0;
    const algorithm = options.algorithm ?? 'ring';
    if (!COLLECTIVE_WIRES.includes(wire)) return Promise.reject(new WebringError('ERR_BAD_REQUEST', `unknown wire format ${String(wire)}`));
    if (!ALGORITHMS.includes(algorithm)) return Promise.reject(new WebringError('ERR_BAD_REQUEST', `unknown algorithm ${String(algorithm)}`));
    if (algorithm === 'halving-doubling' && this.peer === null && this.worldSize > 1) {
      return Promise.reject(new WebringError('ERR_BAD_REQUEST', 'halving-doubling needs links to its partners (the peer option)'));
    }
    if (algorithm === 'hub' && this.hub === null && this.worldSize > 1) {
      return Promise.reject(new WebringError('ERR_BAD_REQUEST', 'the hub collective needs a link to the hub (the hub option)'));
    }
    if (!Number.isInteger(exactTail) || exactTail < 0 || exactTail > buf.length) {
      return Promise.reject(new WebringError('ERR_BAD_REQUEST', `exactTail ${exactTail} outside 0..${buf.length}`));
    }
    const schedule: Schedule = algorithm === 'halving-doubling' ? this.halvingDoubling : algorithm === 'hub' ? this.hub! : this.ring;
    return this.begin(buf, step, tag, schedule, wire, exactTail, Math.max(this.timeoutMs, options.patienceMs ?? 0));
  }

  /**
   * Copies `buf` of rank `chain.from` into ranks from+1 … `chain.to` (rightwards around the
   * ring), pipelined (chain-broadcast-schedule.ts); the other ranks' buffers stay as they
   * are. Every rank must call it with the same length, step, tag and chain. float32, exact.
   */
  broadcast(buf: Float32Array, step: number, tag: CollectiveTag, chain: BroadcastChain): Promise<void> {
    const n = this.worldSize;
    const valid = (r: number) => Number.isInteger(r) && r >= 0 && r < n;
    if (!valid(chain.from) || !valid(chain.to)) {
      return Promise.reject(new WebringError('ERR_BAD_REQUEST', `broadcast chain ${chain.from} → ${chain.to} outside ranks 0..${n - 1}`));
    }
    this.chain.setChain(chain);
    return this.begin(buf, step, tag, this.chain, 'fp32', 0);
  }

  /** Starts one collective of `schedule` over `buf`: ordering, timeout, stash replay. */
  private begin(buf: Float32Array, step: number, tag: CollectiveTag, schedule: Schedule, wire: CollectiveWire, exactTail: number, timeoutMs = this.timeoutMs): Promise<void> {
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
    return new Promise<void>((resolve, reject) => {
      const c: ActiveCollective = {
        startedAt: this.clock.now(),
        bytesAtStart: this.stats.bytesSent,
        buf,
        step,
        tag,
        key,
        saturated: false,
        schedule,
        resolve,
        reject,
        timer: null,
      };
      this.active = c;
      const layout = this.layout;
      layout.reset(buf.length, n, wireCode(wire), exactTail);
      // The ring queues at most a few segments' chunks; halving-doubling at most one stage's
      // range, the whole buffer in its PRE and POST stages; the hub the whole buffer.
      this.queue.reset(Math.max(2 * n * layout.maxSegmentChunks, layout.wholeBufferChunks));
      c.timer = this.clock.setTimeout(() => {
        this.fail(new WebringError('ERR_TIMEOUT', `all-reduce of step ${step} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      schedule.start(c);
      this.replayStash(c);
      if (this.active === c) schedule.resume(c);
    });
  }

  /**
   * Feeds one message that arrived from rank `from` (by default the left neighbour). Ring
   * messages are taken only from the left neighbour, exchange messages only from the
   * partner the schedule names for their stage.
   */
  receive(bytes: Uint8Array, from: number = this.left): void {
    const h = this.inHeader;
    if (!this.admission.header(bytes, h, from)) return;
    const key = collectiveKey(h.run, h.step, h.tag);
    const c = this.active;
    if (c && key === c.key) {
      c.schedule.receive(c, h, bytes, from);
      return;
    }
    if (key <= this.lastDoneKey || (c !== null && key < c.key) || this.abortedWith) {
      this.stats.droppedStaleStep++;
      return;
    }
    const owed = c ? c.schedule.owedBy(from) : 0;
    if (c && owed > 0) {
      // Over one ordered channel the left neighbour finishes sending a collective before it
      // starts the next: a later one's message now means it skipped some of this one's.
      this.reject(from, 'out-of-order', `run ${h.run} step ${h.step} tag ${h.tag} while it still owed ${owed} message(s) of step ${c.step} tag ${c.tag}`);
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

  private linkFailed(error: unknown): void {
    const message = error instanceof Error ? error.message : String(error);
    this.fail(new WebringError('ERR_PEER_FAILED', `right neighbour failed: ${message}`));
  }

  /** Frames floats of the collective's buffer in the one reused message and sends it. */
  private sendChunk(phase: number, step: number, chunk: number, link: RingLink): void {
    const c = this.active!;
    c.schedule.locateSend(phase, step, chunk);
    const writer = this.writer;
    // The sender's own check: nothing non-finite leaves this rank (see chunk-writer.ts).
    const clamped = writer.writePayload(c.buf, this.layout.place);
    this.stats.fp16Overflows += writer.overflows;
    if (clamped) {
      this.stats.saturatedSends++;
      c.saturated = true;
    }
    const h = writer.header;
    h.phase = phase;
    h.ringStep = step;
    h.tag = c.tag;
    // An upload to the hub names its own payload's format: the hub knows no layout, and the
    // exact tail of an fp16 collective travels as float32.
    h.wire = phase === PHASE_HUB_UP ? this.layout.place.wire : this.layout.wire;
    h.flags = c.saturated ? FLAG_SATURATED : 0;
    h.generation = this.generation;
    h.run = this.run;
    h.step = c.step;
    h.chunk = chunk;
    const message = writer.seal(this.poisonAt?.(c.step) ?? null);
    try {
      link.send(message);
    } catch (err) {
      // The channel closed under the send, before the link heard of it (a peer evicted or
      // gone mid-step): a link failure like any other, not an exception in a timer callback.
      this.fail(new WebringError('ERR_PEER_FAILED', `sending to a link that just closed: ${(err as Error).message}`));
      return;
    }
    this.stats.messagesSent++;
    this.stats.bytesSent += message.byteLength;
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

  private pump(): void {
    const c = this.active;
    if (!c || this.queue.waiting) return;
    if (!this.queue.drain()) return;
    // A send that failed ended the collective (and cleared the queue) inside drain().
    if (this.active === c && c.schedule.isDone()) this.finish(c);
  }

  private replayStash(c: ActiveCollective): void {
    if (this.stash.length === 0) return;
    const matching: Stashed[] = [];
    const later: Stashed[] = [];
    let laterBytes = 0;
    for (const entry of this.stash) {
      if (entry.key === c.key) matching.push(entry);
      else if (entry.key > c.key) {
        later.push(entry);
        laterBytes += entry.bytes.byteLength;
      } else this.stats.droppedStaleStep++;
    }
    this.stash = later;
    this.stashBytes = laterBytes;
    const h = this.inHeader;
    for (const { from, bytes } of matching) {
      if (this.active !== c) return;
      readHeader(bytes, h); // admitted when stashed
      c.schedule.receive(c, h, bytes, from);
    }
  }

  private finish(c: ActiveCollective): void {
    this.lastTransfer = sumTransfer(this.lastTransfer, c.step, c.tag, this.stats.bytesSent - c.bytesAtStart, this.clock.now() - c.startedAt);
    this.clock.clearTimeout(c.timer);
    this.active = null;
    this.lastDoneKey = c.key;
    if (c.saturated) {
      // The flag reached every rank on a message of the clamped chunk: all fail here alike.
      c.reject(
        new WebringError(
          'ERR_BAD_DATA',
          `step ${c.step}: a value of the ${wireName(this.layout.wire)} all-reduce was beyond the format's range or not finite on some rank (an fp16 sum beyond ±65504, or a diverged model); resume with wire 'fp32' or a lower learning rate`,
        ),
      );
      return;
    }
    c.resolve();
  }

  private fail(error: WebringError): void {
    const c = this.active;
    if (!c) return;
    this.clock.clearTimeout(c.timer);
    this.active = null;
    this.queue.clear();
    c.schedule.stop();
    c.reject(error);
  }
}
