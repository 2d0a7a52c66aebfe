import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChunkLayout } from '../../shared/collectives/chunk-layout';
import { MAX_CHUNK_FLOATS, MAX_CHUNK_HALVES, WIRE_FP16, WIRE_FP32, type WireCode } from '../../shared/collectives/wire';

/** Every chunk of every segment, as [start, length, wire]. */
function segmentChunks(layout: ChunkLayout, segments: number): Array<[number, number, number]> {
  const out: Array<[number, number, number]> = [];
  for (let s = 0; s < segments; s++) {
    const count = layout.segmentChunks(s);
    for (let c = 0; c < count; c++) {
      assert.ok(layout.locateInSegment(s, c), `chunk ${c} of segment ${s} exists`);
      out.push([layout.place.start, layout.place.length, layout.place.wire]);
    }
    assert.equal(layout.locateInSegment(s, count), false, `segment ${s} has no chunk ${count}`);
  }
  return out;
}

/** Asserts that the chunks cover [0, length) exactly once, head in `wire` and tail in float32. */
function assertCovers(chunks: Array<[number, number, number]>, length: number, split: number, wire: WireCode): void {
  const hits = new Uint8Array(length);
  for (const [start, len, w] of chunks) {
    assert.ok(len > 0 && len <= (w === WIRE_FP16 ? MAX_CHUNK_HALVES : MAX_CHUNK_FLOATS));
    for (let i = start; i < start + len; i++) {
      hits[i]!++;
      assert.equal(w, i < split ? wire : WIRE_FP32, `element ${i} travels in the format of its part`);
    }
  }
  assert.ok(hits.every((h) => h === 1), 'every element lies in exactly one chunk');
}

test('segments cut both parts into N pieces whose chunks cover the buffer once', () => {
  const layout = new ChunkLayout();
  for (const [length, segments, wire, tail] of [
    [10, 3, WIRE_FP32, 0],
    [2, 5, WIRE_FP32, 0],
    [3 * MAX_CHUNK_FLOATS + 7, 4, WIRE_FP32, 0],
    [3 * MAX_CHUNK_HALVES + 11, 4, WIRE_FP16, 9],
    [MAX_CHUNK_HALVES, 2, WIRE_FP16, MAX_CHUNK_HALVES],
  ] as Array<[number, number, WireCode, number]>) {
    layout.reset(length, segments, wire, tail);
    assert.equal(layout.split, wire === WIRE_FP32 ? length : length - tail, 'a float32 collective is one part');
    assertCovers(segmentChunks(layout, segments), length, layout.split, wire);
    assert.ok(layout.segmentChunks(0) <= layout.maxSegmentChunks);
  }
});

test('a range is located like a segment: its head chunks, then its exact float32 tail', () => {
  const layout = new ChunkLayout();
  const length = 2 * MAX_CHUNK_HALVES + 100;
  const tail = 40;
  layout.reset(length, 4, WIRE_FP16, tail);
  const lo = 5;
  const hi = length - 3; // crosses the split
  const count = layout.rangeChunks(lo, hi);
  assert.equal(count, Math.ceil((length - tail - lo) / MAX_CHUNK_HALVES) + 1);
  const chunks: Array<[number, number, number]> = [];
  for (let c = 0; c < count; c++) {
    assert.ok(layout.locateInRange(lo, hi, c));
    chunks.push([layout.place.start, layout.place.length, layout.place.wire]);
  }
  assert.equal(layout.locateInRange(lo, hi, count), false);
  assert.deepEqual(chunks.at(-1), [length - tail, tail - 3, WIRE_FP32]);
  const hits = new Uint8Array(length);
  for (const [start, len] of chunks) for (let i = start; i < start + len; i++) hits[i]!++;
  for (let i = 0; i < length; i++) assert.equal(hits[i], i >= lo && i < hi ? 1 : 0);
  // An empty range and a range wholly in the tail.
  assert.equal(layout.rangeChunks(7, 7), 0);
  assert.equal(layout.locateInRange(7, 7, 0), false);
  assert.equal(layout.rangeChunks(length - tail, length), 1);
});
