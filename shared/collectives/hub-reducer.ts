/**
 * The hub's side of the hub collective: every rank sends its buffer (PHASE_HUB_UP), the hub
 * sums each chunk in rank order, 0 to N-1, and sends the same sum back to every rank
 * (PHASE_HUB_DOWN) as soon as the chunk is complete, so uploads and downloads overlap.
 *
 * The hub needs nothing in advance: a collective is known by (run, step, tag) from its
 * messages, a chunk's length and format by its first contribution, and the ranks send
 * their chunks in order over ordered channels. One owner sums in one fixed order, so the
 * result is the same whatever order the messages arrive in, and every rank copies the same
 * bytes: the replicas stay bit-identical in both wire formats.
 *
 * On the fp16 wire the hub decodes each rank's halves, sums them in float32 and rounds the
 * sum to halves once. For an element whose N addends have Σ|x| = S the result differs from
 * the exact sum by at most (N + 1) · (2^-11 · S + 2^-25) + (N - 1) · 2^-24 · S: N roundings at
 * the senders, N - 1 float32 additions, one rounding here; about half the ring's bound.
 * On the u32 wire (secure aggregation) it adds 32-bit words modulo 2^32: each upload is a
 * masked value that tells the hub nothing, and only the sum of all N is the class's sum.
 *
 * Admission is the ranks' own (admission.ts): header, phase, tag, generation, duplicates,
 * the same length from every rank, every value finite. A rank that sends what no honest rank
 * sends is reported through `onMisbehaviour` (the hub asks the server to evict it) and
 * nothing more of it is taken in this generation.
 *
 * Memory: a chunk's running sum, and the contributions that arrived ahead of their turn,
 * in pooled 64 KiB buffers; the steady state allocates nothing.
 */
import { WebringError } from '../protocol/errors';
import type { Misbehaviour } from '../protocol';
import { firstNonFinite, flagsSaturated } from './admission';
import { ChunkWriter } from './chunk-writer';
import { TAG_SPACE, collectiveKey, createCollectiveStats, type CollectiveStats, type RingLink } from './collective';
import { PayloadReader } from './payload';
import type { ChunkPlace } from './chunk-layout';
import {
  FLAG_SATURATED,
  HEADER_BYTES,
  MAX_CHUNK_BYTES,
  MAX_MESSAGE_BYTES,
  PHASE_HUB_DOWN,
  PHASE_HUB_UP,
  WIRE_FP32,
  isWireCode,
  readHeader,
  wireChunkFloats,
  wireFloatBytes,
  type ChunkHeader,
  type WireCode,
} from './wire';
import { DEFAULT_HIGH_WATER_BYTES } from './ring-allreduce';

export interface HubReducerOptions {
  generation: number;
  /** Ranks of the generation's ring. */
  worldSize: number;
  /** The link to rank `r`, or null while it is not dialled. */
  link(rank: number): RingLink | null;
  /** A rank sent what no honest rank sends; nothing more of it is taken in this generation. */
  onMisbehaviour?(rank: number, misbehaviour: Misbehaviour, detail: string, run: number, step: number): void;
  /** Stop sending to a link while this much is queued in it. */
  highWaterBytes?: number;
}

/** One chunk of one collective: the running sum and who has contributed. */
interface ChunkSum {
  /** Floats in the chunk, fixed by its first contribution. */
  length: number;
  wire: WireCode;
  /** The sum of ranks 0 .. next-1. */
  acc: Float32Array;
  next: number;
  /** Contributions that arrived before their turn, by rank (pooled copies). */
  early: Array<Uint8Array | null>;
  seen: Uint8Array;
  saturated: boolean;
}

interface CollectiveSums {
  run: number;
  step: number;
  tag: number;
  chunks: Map<number, ChunkSum>;
}

/** Messages queued for one rank's link while it is full. */
interface Outbox {
  queue: Uint8Array[];
  waiting: boolean;
}

export class HubReducer {
  readonly generation: number;
  readonly worldSize: number;
  readonly stats: CollectiveStats = createCollectiveStats();
  /** Chunks summed and sent back, over the hub's life. */
  chunksReduced = 0;
  private readonly link: HubReducerOptions['link'];
  private readonly onMisbehaviour: HubReducerOptions['onMisbehaviour'];
  private readonly highWaterBytes: number;
  private readonly collectives = new Map<number, CollectiveSums>();
  /** The newest collective each rank has sent to: every rank is done with anything older than all of these. */
  private readonly latestKey: number[];
  /** Collectives older than this are over everywhere: their messages are stale. */
  private closedBelow = -1;
  private readonly rejected = new Set<number>();
  private readonly outboxes: Outbox[];
  private readonly header: ChunkHeader = { phase: 0, ringStep: 0, tag: 0, wire: 0, flags: 0, generation: 0, run: 0, step: 0, chunk: 0 };
  private readonly payload = new PayloadReader();
  private readonly writer = new ChunkWriter();
  private readonly place: ChunkPlace = { start: 0, length: 0, wire: WIRE_FP32 };
  private readonly sumPool: Float32Array[] = [];
  private readonly messagePool: Uint8Array[] = [];
  private aborted: WebringError | null = null;

  constructor(options: HubReducerOptions) {
    // A room whose students have all left still has its hub: a generation of no ranks sums nothing.
    if (!Number.isInteger(options.worldSize) || options.worldSize < 0) throw new WebringError('ERR_BAD_REQUEST', `worldSize must be an integer ≥ 0, got ${options.worldSize}`);
    this.generation = options.generation;
    this.worldSize = options.worldSize;
    this.link = options.link;
    this.onMisbehaviour = options.onMisbehaviour;
    this.highWaterBytes = options.highWaterBytes ?? DEFAULT_HIGH_WATER_BYTES;
    this.latestKey = new Array<number>(options.worldSize).fill(-1);
    this.outboxes = Array.from({ length: options.worldSize }, () => ({ queue: [], waiting: false }));
  }

  get isAborted(): boolean {
    return this.aborted !== null;
  }

  /** The generation is over: everything held is dropped, and later messages are ignored. */
  abort(error: WebringError): void {
    this.aborted ??= error;
    for (const key of [...this.collectives.keys()]) this.close(key);
    for (const box of this.outboxes) box.queue.length = 0;
  }

  /** One message from rank `from`. */
  receive(bytes: Uint8Array, from: number): void {
    if (this.aborted || this.rejected.has(from)) return;
    if (!Number.isInteger(from) || from < 0 || from >= this.worldSize) {
      this.stats.droppedWrongSender++;
      return;
    }
    const h = this.header;
    if (!readHeader(bytes, h) || h.phase !== PHASE_HUB_UP || h.ringStep !== 0 || h.tag >= TAG_SPACE || !isWireCode(h.wire)) {
      this.stats.droppedMalformed++;
      this.reject(from, 'malformed', `a ${bytes.byteLength}-byte message that is no upload to the hub (phase ${h.phase}, tag ${h.tag}, wire ${h.wire})`, h);
      return;
    }
    if (h.generation < this.generation) {
      this.stats.droppedStaleGeneration++;
      return;
    }
    if (h.generation > this.generation) {
      this.reject(from, 'generation', `a message of generation ${h.generation} into generation ${this.generation}`, h);
      return;
    }
    const key = collectiveKey(h.run, h.step, h.tag);
    if (key < this.closedBelow) {
      this.stats.droppedStaleStep++;
      return;
    }
    if (key < this.latestKey[from]!) {
      // Over one ordered channel a rank finishes a collective before it starts the next.
      this.reject(from, 'out-of-order', `run ${h.run} step ${h.step} tag ${h.tag} after a later collective`, h);
      return;
    }
    if (key > this.latestKey[from]!) this.advance(from, key);
    let sums = this.collectives.get(key);
    if (!sums) {
      sums = { run: h.run, step: h.step, tag: h.tag, chunks: new Map() };
      this.collectives.set(key, sums);
    }
    this.take(sums, h, bytes, from);
  }

  private take(sums: CollectiveSums, h: ChunkHeader, bytes: Uint8Array, from: number): void {
    const wire = h.wire as WireCode;
    const floatBytes = wireFloatBytes(wire);
    const length = (bytes.byteLength - HEADER_BYTES) / floatBytes;
    if (!Number.isInteger(length) || length < 1 || length > wireChunkFloats(wire)) {
      this.stats.droppedMalformed++;
      this.reject(from, 'length', `${bytes.byteLength} bytes, no whole chunk of format ${wire}`, h);
      return;
    }
    let chunk = sums.chunks.get(h.chunk);
    if (!chunk) {
      chunk = { length, wire, acc: this.sumPool.pop() ?? new Float32Array(MAX_CHUNK_BYTES), next: 0, early: new Array(this.worldSize).fill(null), seen: new Uint8Array(this.worldSize), saturated: false };
      sums.chunks.set(h.chunk, chunk);
    }
    if (wire !== chunk.wire) {
      this.stats.droppedWireMismatch++;
      this.reject(from, 'malformed', `wire format ${wire} into chunk ${h.chunk} of format ${chunk.wire}`, h);
      return;
    }
    if (length !== chunk.length) {
      this.stats.droppedMalformed++;
      this.reject(from, 'length', `${length} values in chunk ${h.chunk}, where the first rank sent ${chunk.length}`, h);
      return;
    }
    if (chunk.seen[from] === 1) {
      this.reject(from, 'duplicate', `chunk ${h.chunk} of step ${h.step} tag ${h.tag} a second time`, h);
      return;
    }
    const bad = firstNonFinite(this.payload, bytes, length, wire);
    if (bad >= 0) {
      this.reject(from, 'non-finite', `a non-finite value at element ${bad} of chunk ${h.chunk}`, h);
      return;
    }
    chunk.seen[from] = 1;
    if (flagsSaturated(h)) chunk.saturated = true;
    if (from !== chunk.next) {
      // Its turn has not come: summing out of rank order would change the bits.
      const copy = this.messagePool.pop() ?? new Uint8Array(MAX_MESSAGE_BYTES);
      copy.set(bytes);
      chunk.early[from] = copy.subarray(0, bytes.byteLength);
      return;
    }
    this.addInTurn(chunk, bytes);
    while (chunk.next < this.worldSize) {
      const early = chunk.early[chunk.next];
      if (!early) break;
      chunk.early[chunk.next] = null;
      this.addInTurn(chunk, early);
      this.messagePool.push(new Uint8Array(early.buffer));
    }
    if (chunk.next === this.worldSize) this.sendSum(sums, h.chunk, chunk);
  }

  /** Adds rank `chunk.next`'s contribution (rank 0's is copied: the sum starts from it). */
  private addInTurn(chunk: ChunkSum, bytes: Uint8Array): void {
    const at = this.place;
    at.start = 0;
    at.length = chunk.length;
    at.wire = chunk.wire;
    this.payload.addOrCopy(bytes, chunk.acc, at, chunk.next !== 0);
    chunk.next++;
  }

  /** Frames the finished sum once and sends the same bytes to every rank. */
  private sendSum(sums: CollectiveSums, index: number, chunk: ChunkSum): void {
    const at = this.place;
    at.start = 0;
    at.length = chunk.length;
    at.wire = chunk.wire;
    const writer = this.writer;
    const clamped = writer.writePayload(chunk.acc, at);
    this.stats.fp16Overflows += writer.overflows;
    if (clamped) this.stats.saturatedSends++;
    const h = writer.header;
    h.phase = PHASE_HUB_DOWN;
    h.ringStep = 0;
    h.tag = sums.tag;
    h.wire = chunk.wire;
    h.flags = clamped || chunk.saturated ? FLAG_SATURATED : 0;
    h.generation = this.generation;
    h.run = sums.run;
    h.step = sums.step;
    h.chunk = index;
    const message = writer.seal(null);
    for (let r = 0; r < this.worldSize; r++) this.sendTo(r, message);
    sums.chunks.delete(index);
    this.sumPool.push(chunk.acc);
    this.chunksReduced++;
  }

  /** Sends now when the link has room and nothing waits before it; else queues a copy in order. */
  private sendTo(rank: number, message: Uint8Array): void {
    const link = this.link(rank);
    if (!link) {
      // The rank's link is gone: it fails its collective, and the ring re-forms without this hub's sum.
      return;
    }
    const box = this.outboxes[rank]!;
    if (box.queue.length === 0 && link.isOpen() && link.bufferedAmount() <= this.highWaterBytes) {
      this.transmit(link, message);
      return;
    }
    box.queue.push(message.slice());
    this.drain(rank);
  }

  private drain(rank: number): void {
    const box = this.outboxes[rank]!;
    if (box.waiting) return;
    const link = this.link(rank);
    while (box.queue.length > 0 && link) {
      if (!link.isOpen() || link.bufferedAmount() > this.highWaterBytes) {
        box.waiting = true;
        link.whenWritable().then(
          () => {
            box.waiting = false;
            if (!this.aborted) this.drain(rank);
          },
          () => {
            // The link failed: that rank's collective fails with it and the ring re-forms.
            box.waiting = false;
            box.queue.length = 0;
          },
        );
        return;
      }
      this.transmit(link, box.queue.shift()!);
    }
  }

  private transmit(link: RingLink, message: Uint8Array): void {
    link.send(message);
    this.stats.messagesSent++;
    this.stats.bytesSent += message.byteLength;
  }

  /** Rank `from` has moved on to collective `key`: whatever every rank has moved past is over. */
  private advance(from: number, key: number): void {
    this.latestKey[from] = key;
    let oldest = Infinity;
    for (const k of this.latestKey) oldest = Math.min(oldest, k);
    if (oldest <= this.closedBelow) return;
    this.closedBelow = oldest;
    for (const k of [...this.collectives.keys()]) if (k < oldest) this.close(k);
  }

  private close(key: number): void {
    const sums = this.collectives.get(key);
    if (!sums) return;
    for (const chunk of sums.chunks.values()) {
      this.sumPool.push(chunk.acc);
      for (const early of chunk.early) if (early) this.messagePool.push(new Uint8Array(early.buffer));
    }
    this.collectives.delete(key);
  }

  private reject(from: number, misbehaviour: Misbehaviour, detail: string, h: ChunkHeader): void {
    this.stats.rejectedMisbehaviour++;
    this.rejected.add(from);
    this.onMisbehaviour?.(from, misbehaviour, `rank ${from} sent ${detail} (${misbehaviour}); rejected before any of it was summed`, h.run, h.step);
  }
}
