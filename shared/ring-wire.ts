/**
 * Binary framing of ring all-reduce messages on a data channel.
 *
 * Layout (little endian), 20 bytes of header then float32 payload:
 *   0  u8   phase        1 = reduce-scatter, 2 = all-gather
 *   1  u8   ringStep     0 .. N-2 within the phase
 *   2  u16  tag          which collective of the step (sync, eval, gradients)
 *   4  u32  generation   membership generation the sender belongs to
 *   8  u32  run          the room's run (each Start is a new run)
 *   12 u32  step         global training step
 *   16 u32  chunk        message index within the segment
 */
export const HEADER_BYTES = 20;
/** Chrome closes a data channel on messages over 256 KiB; 64 KiB is the portable size (RFC 8831 §6.6). */
export const MAX_MESSAGE_BYTES = 64 * 1024;
export const FLOAT_BYTES = 4;
export const MAX_CHUNK_FLOATS = Math.floor((MAX_MESSAGE_BYTES - HEADER_BYTES) / FLOAT_BYTES);

export const PHASE_REDUCE_SCATTER = 1;
export const PHASE_ALL_GATHER = 2;
export type Phase = typeof PHASE_REDUCE_SCATTER | typeof PHASE_ALL_GATHER;

export interface ChunkHeader {
  phase: number;
  ringStep: number;
  tag: number;
  generation: number;
  run: number;
  step: number;
  chunk: number;
}

export function writeHeader(view: DataView, h: ChunkHeader): void {
  view.setUint8(0, h.phase);
  view.setUint8(1, h.ringStep);
  view.setUint16(2, h.tag, true);
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
  out.tag = bytes[2]! | (bytes[3]! << 8);
  out.generation = readU32(bytes, 4);
  out.run = readU32(bytes, 8);
  out.step = readU32(bytes, 12);
  out.chunk = readU32(bytes, 16);
  return true;
}

function readU32(bytes: Uint8Array, at: number): number {
  return (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0;
}
