/**
 * Framing outgoing messages. A sender checks its own message as it frames it: a
 * non-finite value (an fp16 partial sum beyond ±65504, an fp32 sum that overflowed, a NaN)
 * is clamped to the format's largest finite value, and the caller flags the collective
 * (FLAG_SATURATED) so that every rank fails it alike. So no honest sender ever puts a
 * non-finite value on the wire.
 */
import { HALF_EXPONENT_BITS, encodeHalves } from './fp16';
import { FLOAT_BYTES, HEADER_BYTES, MAX_CHUNK_BYTES, MAX_CHUNK_FLOATS, MAX_CHUNK_HALVES, WIRE_FP16, WIRE_FP32, WIRE_U16, WIRE_U32, WIRE_U8, wireFloatBytes, writeHeader, type ChunkHeader, type WireCode } from './wire';
import { wordsOf } from './words';
import type { ChunkPlace } from './chunk-layout';
import type { PoisonKind } from './collective';

/** The largest finite float32: where the sender clamps an fp32 value that is not finite. */
const FLOAT32_MAX = 3.4028234663852886e38;
/** The largest finite half's bits (65504). */
const HALF_MAX_BITS = 0x7bff;
const HALF_MANTISSA_BITS = 0x03ff;
const HALF_SIGN_BIT = 0x8000;
/** A quiet NaN half: what a 'nan' poison writes. */
const HALF_NAN_BITS = 0x7e00;
/** What a 'length' poison cuts off a message. */
const POISON_SHORTFALL_BYTES = 2;

/** One outgoing message buffer, reused for every message: RingLink.send copies. */
export class ChunkWriter {
  /** Filled by the caller before seal(). */
  readonly header: ChunkHeader = { phase: 0, ringStep: 0, tag: 0, wire: 0, flags: 0, generation: 0, run: 0, step: 0, chunk: 0 };
  /** Finite values that became ±Infinity in the last payload written (fp16 only). */
  overflows = 0;
  private readonly buffer = new ArrayBuffer(HEADER_BYTES + MAX_CHUNK_FLOATS * FLOAT_BYTES);
  private readonly headerView = new DataView(this.buffer, 0, HEADER_BYTES);
  private readonly floats = new Float32Array(this.buffer, HEADER_BYTES, MAX_CHUNK_FLOATS);
  private readonly halves = new Uint16Array(this.buffer, HEADER_BYTES, MAX_CHUNK_HALVES);
  private readonly words = new Uint32Array(this.buffer, HEADER_BYTES, MAX_CHUNK_FLOATS);
  private readonly bytes = new Uint8Array(this.buffer, HEADER_BYTES, MAX_CHUNK_BYTES);
  /** A view per message length, so sending allocates nothing after warm-up. */
  private readonly views = new Map<number, Uint8Array>();
  private payloadLength = 0;
  private payloadWire: WireCode = WIRE_FP32;

  /** Writes floats `at` of `buf` as the payload; true when a non-finite value had to be clamped. */
  writePayload(buf: Float32Array, at: ChunkPlace): boolean {
    const { start, length: len, wire } = at;
    this.payloadLength = len;
    this.payloadWire = wire;
    if (wire === WIRE_FP16) {
      this.overflows = encodeHalves(buf, start, this.halves, len);
      return saturateHalves(this.halves, len);
    }
    this.overflows = 0;
    if (wire === WIRE_U32 || wire === WIRE_U16 || wire === WIRE_U8) {
      // Words are any bits: nothing to check, and a float copy could alter a NaN's bits. A
      // narrower typed array's store keeps a word's low 16 or 8 bits (its sum modulo 2^16, 2^8).
      const out = wire === WIRE_U32 ? this.words : wire === WIRE_U16 ? this.halves : this.bytes;
      out.set(wordsOf(buf).subarray(start, start + len));
      return false;
    }
    const out = this.floats;
    let check = 0;
    for (let i = 0; i < len; i++) {
      const v = buf[start + i]!;
      out[i] = v;
      check += v - v; // NaN once any value is ±Infinity or NaN, else 0
    }
    return check !== 0 && saturateFloats(out, len);
  }

  /** Writes `header` in front of the payload and returns the whole message (a reused view). */
  seal(poison: PoisonKind | null): Uint8Array {
    writeHeader(this.headerView, this.header);
    const wire = this.payloadWire;
    let byteLength = HEADER_BYTES + this.payloadLength * wireFloatBytes(wire);
    if (poison === 'nan') {
      if (wire === WIRE_FP16) this.halves[0] = HALF_NAN_BITS;
      else this.floats[0] = Number.NaN;
    } else if (poison === 'length') {
      byteLength -= POISON_SHORTFALL_BYTES;
    }
    let view = this.views.get(byteLength);
    if (!view) {
      view = new Uint8Array(this.buffer, 0, byteLength);
      this.views.set(byteLength, view);
    }
    return view;
  }
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
    if ((bits & HALF_EXPONENT_BITS) !== HALF_EXPONENT_BITS) continue;
    halves[i] = (bits & HALF_MANTISSA_BITS) !== 0 ? 0 : (bits & HALF_SIGN_BIT) | HALF_MAX_BITS;
    changed = true;
  }
  return changed;
}
