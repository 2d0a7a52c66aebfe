import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChunkWriter } from '../../shared/collectives/chunk-writer';
import { PayloadReader } from '../../shared/collectives/payload';
import { halfToFloat } from '../../shared/collectives/fp16';
import { HEADER_BYTES, PHASE_EXCHANGE, WIRE_FP16, WIRE_FP32, readHeader, type ChunkHeader } from '../../shared/collectives/wire';
import type { ChunkPlace } from '../../shared/collectives/chunk-layout';

const emptyHeader = (): ChunkHeader => ({ phase: 0, ringStep: 0, tag: 0, wire: 0, flags: 0, generation: 0, run: 0, step: 0, chunk: 0 });

test('a framed message reads back: header, then values added or copied in either format', () => {
  const writer = new ChunkWriter();
  const reader = new PayloadReader();
  const src = Float32Array.of(9, 1.5, -2, 0.25, 9);
  for (const wire of [WIRE_FP32, WIRE_FP16] as const) {
    const at: ChunkPlace = { start: 1, length: 3, wire };
    assert.equal(writer.writePayload(src, at), false);
    Object.assign(writer.header, { phase: PHASE_EXCHANGE, ringStep: 2, tag: 10, wire, flags: 0, generation: 3, run: 1, step: 7, chunk: 4 });
    const bytes = writer.seal(null);
    assert.equal(bytes.byteLength, HEADER_BYTES + 3 * (wire === WIRE_FP16 ? 2 : 4));
    const h = emptyHeader();
    assert.ok(readHeader(bytes, h));
    assert.deepEqual(h, { ...writer.header });
    const dst = Float32Array.of(0, 1, 1, 1, 0);
    reader.addOrCopy(bytes, dst, at, true);
    assert.deepEqual(Array.from(dst), [0, 2.5, -1, 1.25, 0]);
    reader.addOrCopy(bytes, dst, at, false);
    assert.deepEqual(Array.from(dst), [0, 1.5, -2, 0.25, 0]);
    // A misaligned payload goes through the scratch buffer and reads the same.
    const shifted = new Uint8Array(bytes.byteLength + 1);
    shifted.set(bytes, 1);
    reader.addOrCopy(shifted.subarray(1), dst, at, true);
    assert.deepEqual(Array.from(dst), [0, 3, -4, 0.5, 0]);
  }
});

test('the sender clamps what is not finite, and the same length reuses one view', () => {
  const writer = new ChunkWriter();
  const at32: ChunkPlace = { start: 0, length: 3, wire: WIRE_FP32 };
  assert.equal(writer.writePayload(Float32Array.of(Infinity, Number.NaN, 1), at32), true);
  const first = writer.seal(null);
  assert.deepEqual(Array.from(new Float32Array(first.slice(HEADER_BYTES).buffer)), [3.4028234663852886e38, 0, 1]);
  assert.equal(writer.writePayload(Float32Array.of(1, 2, 3), at32), false);
  assert.equal(writer.seal(null), first, 'one view per length');

  const at16: ChunkPlace = { start: 0, length: 2, wire: WIRE_FP16 };
  assert.equal(writer.writePayload(Float32Array.of(70000, -1), at16), true);
  assert.equal(writer.overflows, 1);
  const halves = new Uint16Array(writer.seal(null).slice(HEADER_BYTES).buffer);
  assert.deepEqual([halfToFloat(halves[0]!), halfToFloat(halves[1]!)], [65504, -1]);
});

test('poison writes past the sender check: a NaN, or a message two bytes short', () => {
  const writer = new ChunkWriter();
  const at: ChunkPlace = { start: 0, length: 2, wire: WIRE_FP32 };
  writer.writePayload(Float32Array.of(1, 2), at);
  assert.ok(Number.isNaN(new Float32Array(writer.seal('nan').slice(HEADER_BYTES).buffer)[0]!));
  writer.writePayload(Float32Array.of(1, 2), at);
  assert.equal(writer.seal('length').byteLength, HEADER_BYTES + 8 - 2);
});
