/**
 * Where each message's floats lie in a collective's buffer. The buffer has two parts, each
 * cut into N segments of its own: [0, split) travels in the collective's wire format (the
 * head), [split, length) in float32 (the exact tail; empty unless the wire is fp16). A
 * segment's or an exchanged range's chunks are the head's chunks first, then the tail's,
 * each chunk filling one data-channel message.
 */
import { MAX_CHUNK_FLOATS, WIRE_FP32, wireChunkFloats, type WireCode } from './wire';

/** One chunk: floats [start, start + length) of the buffer, sent in `wire`. */
export interface ChunkPlace {
  start: number;
  length: number;
  wire: WireCode;
}

/** The geometry of the collective in flight; reused across collectives, so locating allocates nothing. */
export class ChunkLayout {
  wire: WireCode = WIRE_FP32;
  length = 0;
  split = 0;
  /** Filled by locateInSegment and locateInRange. */
  readonly place: ChunkPlace = { start: 0, length: 0, wire: WIRE_FP32 };
  private headBase = 0;
  private headRem = 0;
  private tailBase = 0;
  private tailRem = 0;

  /**
   * Lays out a buffer of `length` floats over `segments` segments. A float32 collective is
   * one part, exactly as before the fp16 format existed.
   */
  reset(length: number, segments: number, wire: WireCode, exactTail: number): void {
    this.wire = wire;
    this.length = length;
    this.split = wire === WIRE_FP32 ? length : length - exactTail;
    const tailLength = length - this.split;
    this.headBase = Math.floor(this.split / segments);
    this.headRem = this.split % segments;
    this.tailBase = Math.floor(tailLength / segments);
    this.tailRem = tailLength % segments;
  }

  /** Chunks of segment `s`. */
  segmentChunks(s: number): number {
    return Math.ceil(this.segmentHeadLength(s) / wireChunkFloats(this.wire)) + Math.ceil(this.segmentTailLength(s) / MAX_CHUNK_FLOATS);
  }

  /** Chunks of the range [lo, hi): its part before `split` in `wire`, then its float32 part. */
  rangeChunks(lo: number, hi: number): number {
    const tailStart = Math.max(lo, this.split);
    return Math.ceil(Math.max(0, Math.min(hi, this.split) - lo) / wireChunkFloats(this.wire)) + Math.ceil(Math.max(0, hi - tailStart) / MAX_CHUNK_FLOATS);
  }

  /** At least the chunks of any segment: what the send queue sizes itself by. */
  get maxSegmentChunks(): number {
    return Math.ceil((this.headBase + 1) / wireChunkFloats(this.wire)) + Math.ceil((this.tailBase + 1) / MAX_CHUNK_FLOATS);
  }

  /** At least the chunks of the whole buffer. */
  get wholeBufferChunks(): number {
    return Math.ceil(this.length / wireChunkFloats(this.wire)) + 2;
  }

  /** Fills `place` with chunk `chunk` of segment `s`; false when that chunk does not exist. */
  locateInSegment(s: number, chunk: number): boolean {
    const headStart = s * this.headBase + Math.min(s, this.headRem);
    const tailStart = this.split + s * this.tailBase + Math.min(s, this.tailRem);
    return this.locate(headStart, this.segmentHeadLength(s), tailStart, this.segmentTailLength(s), chunk);
  }

  /** Fills `place` with chunk `chunk` of the range [lo, hi); false when that chunk does not exist. */
  locateInRange(lo: number, hi: number, chunk: number): boolean {
    const tailStart = Math.max(lo, this.split);
    return this.locate(lo, Math.max(0, Math.min(hi, this.split) - lo), tailStart, Math.max(0, hi - tailStart), chunk);
  }

  private segmentHeadLength(s: number): number {
    return this.headBase + (s < this.headRem ? 1 : 0);
  }

  private segmentTailLength(s: number): number {
    return this.tailBase + (s < this.tailRem ? 1 : 0);
  }

  /** The one place a chunk index becomes floats: head chunks in `wire`, then tail chunks in float32. */
  private locate(headStart: number, headLength: number, tailStart: number, tailLength: number, chunk: number): boolean {
    const at = this.place;
    const perHead = wireChunkFloats(this.wire);
    const headChunks = Math.ceil(headLength / perHead);
    if (chunk < headChunks) {
      at.wire = this.wire;
      at.start = headStart + chunk * perHead;
      at.length = Math.min(perHead, headLength - chunk * perHead);
    } else {
      const c = chunk - headChunks;
      at.wire = WIRE_FP32;
      at.start = tailStart + c * MAX_CHUNK_FLOATS;
      at.length = Math.min(MAX_CHUNK_FLOATS, tailLength - c * MAX_CHUNK_FLOATS);
    }
    return at.length > 0;
  }
}
