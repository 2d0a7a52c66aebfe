/**
 * Binary framing of ring all-reduce messages on a data channel.
 *
 * Layout (little endian), 20 bytes of header then a float32 or float16 payload:
 *   0  u8   phase        1 = ring reduce-scatter, 2 = ring all-gather,
 *                        3 = a halving-doubling exchange, 4 = a rank's buffer on its way
 *                        to the hub, 5 = the hub's sum on its way back,
 *                        6 = a chain broadcast's copy on its way right
 *   1  u8   ringStep     0 .. N-2 within the ring's phase; the stage of a halving-doubling
 *                        exchange (0 .. 2·log2 N + 1)
 *   2  u8   tag          which collective of the step (sync, eval, gradients)
 *   3  u8   wire         the collective's format: 0 = float32, 1 = float16, 2 = 32-bit
 *                        words summed modulo 2^32 (masked fixed point: shared/secagg/),
 *                        3 = 16-bit and 4 = 8-bit words summed modulo 2^16 and 2^8
 *                        (quantized sums: quantized-sum.ts); the exact tail of any
 *                        format but float32's still travels as float32.
 *                        In the hub phases (4, 5) the format of this message's own
 *                        payload instead: the hub knows no layout. Bit 7
 *                        (FLAG_SATURATED): the sender clamped a non-finite value of
 *                        this collective to the format's largest finite one (an fp16 partial
 *                        sum beyond ±65504, say); every rank then fails the collective alike.
 *                        An honest sender never puts a non-finite value on the wire.
 *   4  u32  generation   membership generation the sender belongs to
 *   8  u32  run          the room's run (each Start is a new run)
 *   12 u32  step         global training step
 *   16 u32  chunk        message index within the segment or the exchanged range (of a
 *                        float16 collective: the float16 chunks first, then those of its
 *                        float32 tail)
 */
import { WIRE_FORMATS } from '../protocol';

export const HEADER_BYTES = 20;
/** Chrome closes a data channel on messages over 256 KiB; 64 KiB is the portable size (RFC 8831 §6.6). */
export const MAX_MESSAGE_BYTES = 64 * 1024;
export const FLOAT_BYTES = 4;
export const HALF_BYTES = 2;
/** Floats per message in the float32 format. */
export const MAX_CHUNK_FLOATS = Math.floor((MAX_MESSAGE_BYTES - HEADER_BYTES) / FLOAT_BYTES);
/** Floats per message in the float16 format: twice as many, in the same 64 KiB. */
export const MAX_CHUNK_HALVES = Math.floor((MAX_MESSAGE_BYTES - HEADER_BYTES) / HALF_BYTES);
/** Values per message of 8-bit words: one a byte. */
export const MAX_CHUNK_BYTES = MAX_MESSAGE_BYTES - HEADER_BYTES;

/**
 * The `wire` byte. Bytes 2-3 were a u16 tag whose high byte was always 0, so float32
 * messages are unchanged on the wire.
 */
export const WIRE_FP32 = 0;
export const WIRE_FP16 = 1;
/**
 * 32-bit words that every rank adds modulo 2^32: secure aggregation's masked fixed-point
 * values (shared/secagg/fixed-point.ts). Integer sums are associative, so every algorithm
 * and every summation order gives the same bits.
 */
export const WIRE_U32 = 2;
/**
 * Narrow words, summed modulo 2^16 and 2^8: a quantized sum's integers (quantized-sum.ts),
 * masked or not. An engine keeps them in the buffer's 32-bit words, adds modulo 2^32 and
 * sends the low 16 or 8 bits: the low bits of a sum depend only on the low bits of its
 * addends, so every rank's low bits agree, and only they are ever read.
 */
export const WIRE_U16 = 3;
export const WIRE_U8 = 4;
export type WireCode = typeof WIRE_FP32 | typeof WIRE_FP16 | typeof WIRE_U32 | typeof WIRE_U16 | typeof WIRE_U8;

/**
 * The formats a collective can take: the two a run may configure (WireFormat), and the
 * words of a masked or quantized sum, which secure aggregation and quantized sums ask for.
 */
export const COLLECTIVE_WIRES = [...WIRE_FORMATS, 'u32', 'u16', 'u8'] as const;
export type CollectiveWire = (typeof COLLECTIVE_WIRES)[number];
/** True for a wire byte some collective uses. */
export const isWireCode = (code: number): code is WireCode => Number.isInteger(code) && code >= WIRE_FP32 && code <= WIRE_U8;
/** True for the formats whose values are words summed modulo 2^32, 2^16 or 2^8 (never non-finite). */
export const isWordWire = (code: WireCode): boolean => code === WIRE_U32 || code === WIRE_U16 || code === WIRE_U8;

/** Bit 7 of the wire byte: this collective saturated somewhere (see the layout above). */
export const FLAG_SATURATED = 0x80;

const CODES: Record<CollectiveWire, WireCode> = { fp32: WIRE_FP32, fp16: WIRE_FP16, u32: WIRE_U32, u16: WIRE_U16, u8: WIRE_U8 };
export const wireCode = (format: CollectiveWire): WireCode => CODES[format];
/** The format's name, for messages. */
export const wireName = (code: WireCode): CollectiveWire => COLLECTIVE_WIRES[code]!;
/** Payload bytes per float of a wire code. */
export const wireFloatBytes = (code: WireCode): number => (code === WIRE_U8 ? 1 : code === WIRE_FP16 || code === WIRE_U16 ? HALF_BYTES : FLOAT_BYTES);
/** Floats per message of a wire code. */
export const wireChunkFloats = (code: WireCode): number => (code === WIRE_U8 ? MAX_CHUNK_BYTES : code === WIRE_FP16 || code === WIRE_U16 ? MAX_CHUNK_HALVES : MAX_CHUNK_FLOATS);

export const PHASE_REDUCE_SCATTER = 1;
export const PHASE_ALL_GATHER = 2;
export const PHASE_EXCHANGE = 3;
export const PHASE_HUB_UP = 4;
export const PHASE_HUB_DOWN = 5;
/** A chain broadcast (chain-broadcast-schedule.ts): values copied rightwards along the ring. */
export const PHASE_CHAIN = 6;
/** Not a collective's: the network check's probe of a link (network/link-probe.ts), answered outside any collective. */
export const PHASE_PROBE = 7;

export interface ChunkHeader {
  phase: number;
  ringStep: number;
  tag: number;
  wire: number;
  /** The flag bits of the wire byte (FLAG_SATURATED). */
  flags: number;
  generation: number;
  run: number;
  step: number;
  chunk: number;
}

export function writeHeader(view: DataView, h: ChunkHeader): void {
  view.setUint8(0, h.phase);
  view.setUint8(1, h.ringStep);
  view.setUint8(2, h.tag);
  view.setUint8(3, h.wire | h.flags);
  view.setUint32(4, h.generation, true);
  view.setUint32(8, h.run, true);
  view.setUint32(12, h.step, true);
  view.setUint32(16, h.chunk, true);
}

/**
 * Reads a header into `out` (reused by the caller); false when the message is too short.
 * Byte arithmetic instead of a DataView so that the per-message path allocates nothing.
 */
export function readHeader(bytes: Uint8Array, out: ChunkHeader): boolean {
  if (bytes.byteLength < HEADER_BYTES) return false;
  out.phase = bytes[0]!;
  out.ringStep = bytes[1]!;
  out.tag = bytes[2]!;
  out.wire = bytes[3]! & 0x7f;
  out.flags = bytes[3]! & FLAG_SATURATED;
  out.generation = readU32(bytes, 4);
  out.run = readU32(bytes, 8);
  out.step = readU32(bytes, 12);
  out.chunk = readU32(bytes, 16);
  return true;
}

function readU32(bytes: Uint8Array, at: number): number {
  return (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0;
}
