/**
 * Reading a message's values and summing them in: the one add-or-copy of both wire formats,
 * used by every algorithm.
 */
import { addHalves, decodeHalves } from './fp16';
import { FLOAT_BYTES, HALF_BYTES, HEADER_BYTES, MAX_CHUNK_FLOATS, WIRE_FP16, WIRE_U16, WIRE_U32, WIRE_U8 } from './wire';
import { addOrCopyWords, wordsOf } from './words';
import type { ChunkPlace } from './chunk-layout';

/** Typed views of message payloads, with one reused scratch buffer for misaligned ones. */
export class PayloadReader {
  private readonly scratch = new Float32Array(MAX_CHUNK_FLOATS);
  private readonly scratchHalves = new Uint16Array(this.scratch.buffer);
  private readonly scratchWords = new Uint32Array(this.scratch.buffer);

  /** A zero-copy view of `len` float32 values when the payload is 4-byte aligned, else a copy into scratch. */
  floats(bytes: Uint8Array, len: number): Float32Array {
    return this.aligned(bytes, len * FLOAT_BYTES, FLOAT_BYTES) ? new Float32Array(bytes.buffer, bytes.byteOffset + HEADER_BYTES, len) : this.scratch;
  }

  /** The same for `len` float16 values (2-byte alignment). */
  halves(bytes: Uint8Array, len: number): Uint16Array {
    return this.aligned(bytes, len * HALF_BYTES, HALF_BYTES) ? new Uint16Array(bytes.buffer, bytes.byteOffset + HEADER_BYTES, len) : this.scratchHalves;
  }

  /** The same for `len` 32-bit words (the 'u32' wire). */
  words(bytes: Uint8Array, len: number): Uint32Array {
    return this.aligned(bytes, len * FLOAT_BYTES, FLOAT_BYTES) ? new Uint32Array(bytes.buffer, bytes.byteOffset + HEADER_BYTES, len) : this.scratchWords;
  }

  /** `len` 8-bit words: any byte offset will do. */
  bytes(bytes: Uint8Array, len: number): Uint8Array {
    return bytes.subarray(HEADER_BYTES, HEADER_BYTES + len);
  }

  /** True when the payload starts on an `alignment` boundary; otherwise its `byteLength` bytes are copied to the start of scratch. */
  private aligned(bytes: Uint8Array, byteLength: number, alignment: number): boolean {
    if ((bytes.byteOffset + HEADER_BYTES) % alignment === 0) return true;
    new Uint8Array(this.scratch.buffer, 0, byteLength).set(bytes.subarray(HEADER_BYTES, HEADER_BYTES + byteLength));
    return false;
  }

  /** Adds the message's values into `buf` at `at` (`add`), or copies them there. */
  addOrCopy(bytes: Uint8Array, buf: Float32Array, at: ChunkPlace, add: boolean): void {
    const { start, length: len } = at;
    if (at.wire === WIRE_U32) {
      addOrCopyWords(this.words(bytes, len), wordsOf(buf), start, len, add);
    } else if (at.wire === WIRE_U16) {
      addOrCopyWords(this.halves(bytes, len), wordsOf(buf), start, len, add);
    } else if (at.wire === WIRE_U8) {
      addOrCopyWords(this.bytes(bytes, len), wordsOf(buf), start, len, add);
    } else if (at.wire === WIRE_FP16) {
      const payload = this.halves(bytes, len);
      if (add) addHalves(payload, buf, start, len);
      else decodeHalves(payload, buf, start, len);
    } else {
      const payload = this.floats(bytes, len);
      if (add) for (let i = 0; i < len; i++) buf[start + i]! += payload[i]!;
      else for (let i = 0; i < len; i++) buf[start + i] = payload[i]!;
    }
  }
}
