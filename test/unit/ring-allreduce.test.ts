import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMemoryRing } from '../support/memory-ring';
import { RingAllReduce } from '../../shared/collectives/ring-allreduce';
import { COLLECTIVE_TAG, type CollectiveTag } from '../../shared/collectives/collective';
import { PeerMisbehavedError } from '../../shared/collectives/admission';
import { MAX_CHUNK_FLOATS, MAX_CHUNK_HALVES, HEADER_BYTES, MAX_MESSAGE_BYTES, readHeader } from '../../shared/collectives/wire';
import { WebringError } from '../../shared/protocol/errors';
import { ManualClock } from '../../shared/util/clock';
import { floatToHalf, halfToFloat } from '../../shared/collectives/fp16';
import { expectedSum, fp16Bound, integerBuffer, spreadBuffer } from '../support/test-buffers';

// Odd lengths, lengths smaller than N, and lengths spanning several 64 KiB chunks per segment.
const LENGTHS = [1, 2, 7, 13, 1001, MAX_CHUNK_FLOATS + 3, 3 * MAX_CHUNK_FLOATS * 2 + 17];

for (let n = 1; n <= 8; n++) {
  test(`ring all-reduce of ${n} peers equals the elementwise sum exactly`, async () => {
    for (const length of LENGTHS) {
      const { rings } = createMemoryRing(n);
      const bufs = rings.map((_, r) => integerBuffer(r, length));
      await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 0)));
      const want = expectedSum(n, length);
      for (let r = 0; r < n; r++) {
        assert.deepEqual(bufs[r], want, `rank ${r} of ${n}, length ${length}`);
      }
    }
  });
}

test('large rings of 16 and 32 peers stay exact, including segments of zero length', async () => {
  for (const n of [16, 32]) {
    for (const length of [1, n - 1, n + 1, 1000]) {
      const { rings } = createMemoryRing(n);
      const bufs = rings.map((_, r) => integerBuffer(r, length));
      await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 0)));
      const want = expectedSum(n, length);
      for (const b of bufs) assert.deepEqual(b, want, `N ${n}, length ${length}`);
    }
  }
});

test('consecutive steps reuse the ring and stay exact, also under backpressure', async () => {
  const n = 4;
  const length = 2 * MAX_CHUNK_FLOATS + 5;
  const { rings } = createMemoryRing(n, { drainBytesPerTick: 3 * MAX_MESSAGE_BYTES, highWaterBytes: 2 * MAX_MESSAGE_BYTES });
  for (let step = 0; step < 5; step++) {
    const bufs = rings.map((_, r) => integerBuffer(r + step, length));
    await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, step)));
    const want = new Float32Array(length);
    for (let r = 0; r < n; r++) {
      const b = integerBuffer(r + step, length);
      for (let i = 0; i < length; i++) want[i]! += b[i]!;
    }
    for (const b of bufs) assert.deepEqual(b, want);
  }
});

test('every message fits in 64 KiB and each peer sends 2(N-1)/N of the buffer', async () => {
  const n = 5;
  const length = 10 * MAX_CHUNK_FLOATS;
  const { rings, links } = createMemoryRing(n);
  let largest = 0;
  for (const link of links) {
    const deliver = link.deliver;
    link.deliver = (bytes) => {
      largest = Math.max(largest, bytes.byteLength);
      deliver(bytes);
    };
  }
  await Promise.all(rings.map((ring, r) => ring.allReduce(integerBuffer(r, length), 0)));
  assert.ok(largest <= MAX_MESSAGE_BYTES, `largest message ${largest} B`);
  for (const ring of rings) {
    const payloadBytes = ring.stats.bytesSent - ring.stats.messagesSent * HEADER_BYTES;
    assert.equal(payloadBytes, (2 * (n - 1) * length * 4) / n);
  }
});

test('messages from a stale generation are dropped and never touch the sum', async () => {
  const n = 3;
  const length = 50;
  const { rings } = createMemoryRing(n, { generation: 7 });
  // A leftover peer of generation 6 injects a chunk of junk for the same step into rank 1.
  const stale = new Uint8Array(HEADER_BYTES + 17 * 4);
  const view = new DataView(stale.buffer);
  view.setUint8(0, 1);
  view.setUint32(4, 6, true);
  new Float32Array(stale.buffer, HEADER_BYTES).fill(1e6);
  rings[1]!.receive(stale);
  const bufs = rings.map((_, r) => integerBuffer(r, length));
  await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 0)));
  for (const b of bufs) assert.deepEqual(b, expectedSum(n, length));
  assert.equal(rings[1]!.stats.droppedStaleGeneration, 1);
});

test('messages of an already finished step are dropped', async () => {
  const { rings, links } = createMemoryRing(2);
  const captured: Uint8Array[] = [];
  const deliver = links[0]!.deliver;
  links[0]!.deliver = (bytes) => {
    captured.push(bytes.slice());
    deliver(bytes);
  };
  const bufs = rings.map((_, r) => integerBuffer(r, 30));
  await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 0)));
  // Replay step 0's messages while step 1 runs: they must be ignored.
  const next = rings.map((_, r) => integerBuffer(r + 1, 30));
  const done = Promise.all(rings.map((ring, r) => ring.allReduce(next[r]!, 1)));
  const replayed = captured.splice(0);
  for (const bytes of replayed) rings[1]!.receive(bytes);
  await done;
  const want = new Float32Array(30);
  for (let r = 0; r < 2; r++) integerBuffer(r + 1, 30).forEach((v, i) => (want[i]! += v));
  for (const b of next) assert.deepEqual(b, want);
  assert.equal(rings[1]!.stats.droppedStaleStep, replayed.length);
});

test('an early message of the next collective is kept until that collective starts', async () => {
  const { rings } = createMemoryRing(3);
  const bufs = rings.map((_, r) => integerBuffer(r, 40));
  // Ranks start at different times: rank 0 and 1 first, rank 2 a little later.
  const first = [rings[0]!.allReduce(bufs[0]!, 3, COLLECTIVE_TAG.sync), rings[1]!.allReduce(bufs[1]!, 3, COLLECTIVE_TAG.sync)];
  await new Promise((r) => setTimeout(r, 20));
  await Promise.all([...first, rings[2]!.allReduce(bufs[2]!, 3, COLLECTIVE_TAG.sync)]);
  for (const b of bufs) assert.deepEqual(b, expectedSum(3, 40));
});

test('a later run orders after every collective of an earlier one, even at a lower step', async () => {
  const { rings } = createMemoryRing(3);
  const sum = async (step: number, tag: CollectiveTag) => {
    const bufs = rings.map((_, r) => integerBuffer(r, 9));
    await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, step, tag)));
    for (const b of bufs) assert.deepEqual(b, expectedSum(3, 9));
  };
  for (const ring of rings) ring.setRun(1);
  await sum(125, COLLECTIVE_TAG.evaluation);
  // Run 2 resumes at step 125 and starts with a sync; run 1's key space is behind it.
  for (const ring of rings) ring.setRun(2);
  await sum(125, COLLECTIVE_TAG.sync);
  await sum(125, COLLECTIVE_TAG.gradients);
  // Within one run, steps only move forward.
  await assert.rejects(rings[0]!.allReduce(new Float32Array(1), 0, COLLECTIVE_TAG.sync), (e: unknown) => e instanceof WebringError && e.code === 'ERR_STALE_STEP');
});

test('abort rejects the collective in flight with a code, and later ones too', async () => {
  const { rings } = createMemoryRing(3);
  const pending = rings[0]!.allReduce(new Float32Array(10), 0);
  rings[0]!.abort(new WebringError('ERR_STALE_GENERATION', 'generation 2 replaced 1'));
  await assert.rejects(pending, (e: unknown) => e instanceof WebringError && e.code === 'ERR_STALE_GENERATION');
  await assert.rejects(rings[0]!.allReduce(new Float32Array(10), 1), (e: unknown) => e instanceof WebringError && e.code === 'ERR_STALE_GENERATION');
});

test('a collective whose peers never answer times out with ERR_TIMEOUT', async () => {
  const clock = new ManualClock();
  const { rings } = createMemoryRing(2, { timeoutMs: 50, clock });
  const pending = rings[0]!.allReduce(new Float32Array(10), 0);
  clock.advance(49);
  assert.equal(clock.pending, 1, 'still waiting one millisecond before the timeout');
  clock.advance(1);
  await assert.rejects(pending, (e: unknown) => e instanceof WebringError && e.code === 'ERR_TIMEOUT');
});

test('a truncated or wrongly sized message from the left neighbour fails the collective at once, naming it', async () => {
  for (const [bytes, misbehaviour] of [
    [new Uint8Array(5), 'malformed'],
    [(() => {
      const wrongSize = new Uint8Array(HEADER_BYTES + 4 * 100);
      wrongSize[0] = 1; // reduce-scatter
      wrongSize[2] = COLLECTIVE_TAG.gradients;
      wrongSize[4] = 1; // generation 1
      return wrongSize;
    })(), 'length'],
  ] as const) {
    const { rings } = createMemoryRing(2, { timeoutMs: 60_000 });
    const bufs = rings.map((_, r) => integerBuffer(r, 8));
    const before = bufs[1]!.slice();
    const pending = rings[1]!.allReduce(bufs[1]!, 0);
    rings[1]!.receive(bytes);
    await assert.rejects(pending, (e: unknown) => e instanceof PeerMisbehavedError && e.code === 'ERR_PEER_MISBEHAVED' && e.rank === 0 && e.misbehaviour === misbehaviour);
    assert.deepEqual(bufs[1], before, 'nothing was added');
    assert.equal(rings[1]!.stats.droppedMalformed, 1);
    rings[0]!.abort(new WebringError('ERR_ABORTED', 'test over'));
  }
});

test('the header round-trips generation, run, step, chunk and tag', () => {
  const ring = new RingAllReduce({ rank: 0, worldSize: 1, generation: 3, right: null });
  assert.equal(ring.worldSize, 1);
  const bytes = new Uint8Array(HEADER_BYTES);
  const view = new DataView(bytes.buffer);
  view.setUint8(0, 2);
  view.setUint8(1, 4);
  view.setUint8(2, 2);
  view.setUint8(3, 1);
  view.setUint32(4, 0xfffffffe, true);
  view.setUint32(8, 9, true);
  view.setUint32(12, 123456, true);
  view.setUint32(16, 77, true);
  const h = { phase: 0, ringStep: 0, tag: 0, wire: 0, flags: 0, generation: 0, run: 0, step: 0, chunk: 0 };
  assert.ok(readHeader(bytes, h));
  assert.deepEqual(h, { phase: 2, ringStep: 4, tag: 2, wire: 1, flags: 0, generation: 0xfffffffe, run: 9, step: 123456, chunk: 77 });
});

// ---------------------------------------------------------------------------
// The fp16 wire format: half the bytes, within a bounded error
// ---------------------------------------------------------------------------

/**
 * What the ring must compute for element i of segment s: rank s sends its value as a
 * half, each following rank adds its float32 value and rounds to half, and the last one
 * (the owner) keeps that half. Pins the order and the owner's rounding.
 */
function fp16RingOrder(inputs: Float32Array[], i: number, s: number): number {
  const n = inputs.length;
  if (n === 1) return inputs[0]![i]!;
  let half = floatToHalf(inputs[s]![i]!);
  for (let k = 1; k < n; k++) half = floatToHalf(Math.fround(halfToFloat(half) + inputs[(s + k) % n]![i]!));
  return halfToFloat(half);
}

const FP16_LENGTHS = [1, 2, 7, 13, 1001, MAX_CHUNK_HALVES + 3, 2 * MAX_CHUNK_HALVES * 3 + 17];

for (let n = 1; n <= 8; n++) {
  test(`fp16 ring all-reduce of ${n} peers: bit-identical on every rank, in ring order, within the bound`, async () => {
    let worst = 0;
    for (const length of FP16_LENGTHS) {
      const { rings } = createMemoryRing(n);
      const inputs = rings.map((_, r) => spreadBuffer(r, length, length));
      const bufs = inputs.map((b) => b.slice());
      await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 0, COLLECTIVE_TAG.gradients, { wire: 'fp16' })));
      for (let r = 1; r < n; r++) assert.deepEqual(new Uint32Array(bufs[r]!.buffer), new Uint32Array(bufs[0]!.buffer), `rank ${r} of ${n}, length ${length}`);
      const got = bufs[0]!;
      const base = Math.floor(length / n);
      const rem = length % n;
      for (let s = 0, i = 0; s < n; s++) {
        const end = i + base + (s < rem ? 1 : 0);
        for (; i < end; i++) {
          let exact = 0;
          let absSum = 0;
          for (const x of inputs) {
            exact += x[i]!;
            absSum += Math.abs(x[i]!);
          }
          const err = Math.abs(got[i]! - exact);
          const bound = fp16Bound(n, absSum);
          if (err > bound) assert.fail(`N ${n}, length ${length}, element ${i}: error ${err} above the bound ${bound}`);
          worst = Math.max(worst, err / bound);
          const want = fp16RingOrder(inputs, i, s);
          if (!Object.is(got[i], want)) assert.fail(`N ${n}, length ${length}, element ${i}: ${got[i]} but ring order gives ${want}`);
        }
      }
    }
    if (n > 1) assert.ok(worst > 0, 'the halves must really have been rounded');
  });
}

test('an fp16 collective keeps its exact tail in float32, and the head within the bound', async () => {
  const n = 5;
  const tail = 59; // the trainer's tail of votes, counts, timings and link measurements
  for (const length of [tail, tail + 1, 101_770 + tail]) {
    const { rings } = createMemoryRing(n);
    const inputs = rings.map((_, r) => {
      const b = spreadBuffer(r, length, 3);
      // Sums of squared votes, far beyond what a half holds exactly.
      for (let i = length - tail; i < length; i++) b[i] = 261_121 + r * 1_000 + i;
      return b;
    });
    const bufs = inputs.map((b) => b.slice());
    await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 4, COLLECTIVE_TAG.gradients, { wire: 'fp16', exactTail: tail })));
    for (let i = 0; i < length; i++) {
      let exact = 0;
      let absSum = 0;
      for (const x of inputs) {
        exact += x[i]!;
        absSum += Math.abs(x[i]!);
      }
      for (const b of bufs) {
        if (i >= length - tail) assert.equal(b[i], exact, `tail element ${i}`);
        else assert.ok(Math.abs(b[i]! - exact) <= fp16Bound(n, absSum), `head element ${i}`);
        assert.ok(Object.is(b[i], bufs[0]![i]), `element ${i} differs between ranks`);
      }
    }
  }
});

test('fp16 sends at most 0.52 of the float32 bytes, in messages of at most 64 KiB', async () => {
  const n = 5;
  // Several chunks per segment; the MLP's gradients with the trainer's 54-float exact tail; a small buffer.
  for (const [length, tail] of [
    [10 * MAX_CHUNK_FLOATS, 0],
    [101_770 + 54, 54],
    [1001, 0],
  ] as const) {
    const sent = { fp32: [] as number[], fp16: [] as number[] };
    let largest = 0;
    for (const wire of ['fp32', 'fp16'] as const) {
      const { rings, links } = createMemoryRing(n);
      for (const link of links) {
        const deliver = link.deliver;
        link.deliver = (bytes) => {
          largest = Math.max(largest, bytes.byteLength);
          deliver(bytes);
        };
      }
      await Promise.all(rings.map((ring, r) => ring.allReduce(integerBuffer(r, length), 0, COLLECTIVE_TAG.gradients, { wire, exactTail: tail })));
      sent[wire] = rings.map((ring) => ring.stats.bytesSent);
    }
    assert.ok(largest <= MAX_MESSAGE_BYTES, `largest message ${largest} B`);
    for (let r = 0; r < n; r++) {
      const ratio = sent.fp16[r]! / sent.fp32[r]!;
      if (r === 0) console.log(`length ${length}: fp16 sends ${sent.fp16[r]} B per rank, fp32 ${sent.fp32[r]} B, ratio ${ratio.toFixed(4)}`);
      assert.ok(ratio <= 0.52, `length ${length}, rank ${r}: fp16 sent ${sent.fp16[r]} B, fp32 ${sent.fp32[r]} B (${ratio.toFixed(4)})`);
    }
  }
  // A full fp16 message is exactly 64 KiB: twice the floats of a float32 one, in the same size.
  assert.equal(HEADER_BYTES + 2 * MAX_CHUNK_HALVES, MAX_MESSAGE_BYTES);
  assert.equal(MAX_CHUNK_HALVES, Math.floor((MAX_MESSAGE_BYTES - HEADER_BYTES) / 2));
});

test('a message in the other wire format fails the collective at once and is never summed', async () => {
  const n = 3;
  const { rings } = createMemoryRing(n, { timeoutMs: 60_000 });
  const bufs = rings.map((_, r) => integerBuffer(r, 300));
  const before = bufs.map((b) => b.slice());
  // Rank 2 was configured with the other format.
  const pending = rings.map((ring, r) => ring.allReduce(bufs[r]!, 0, COLLECTIVE_TAG.gradients, r === 2 ? { wire: 'fp32' } : { wire: 'fp16', exactTail: 10 }));
  const errors = pending.map((p) => p.then(() => null, (e: unknown) => e));
  // Rank 0 names rank 2 (float32 into its fp16 collective), rank 2 names rank 1.
  const e0 = await errors[0]!;
  const e2 = await errors[2]!;
  assert.ok(e0 instanceof PeerMisbehavedError && e0.rank === 2 && e0.misbehaviour === 'malformed', String(e0));
  assert.ok(e2 instanceof PeerMisbehavedError && e2.rank === 1 && e2.misbehaviour === 'malformed', String(e2));
  // Rank 1 waits on rank 0, which stopped forwarding; a new generation would abort it.
  rings[1]!.abort(new WebringError('ERR_STALE_GENERATION', 'test over'));
  assert.equal(((await errors[1]!) as WebringError).code, 'ERR_STALE_GENERATION');
  assert.ok(rings[0]!.stats.droppedWireMismatch > 0, 'rank 0 rejects rank 2 float32 chunks');
  assert.ok(rings[2]!.stats.droppedWireMismatch > 0, 'rank 2 rejects rank 1 float16 chunks');
  // Rank 2 added nothing from rank 1, not even the float32 chunks of its exact tail.
  assert.deepEqual(bufs[2], before[2]);
});

test('fp16 overflow: the sender clamps and flags instead of sending Infinity, and every rank fails the step alike', async () => {
  const n = 4;
  const { rings, links } = createMemoryRing(n);
  // Nothing non-finite may cross a link: that is what lets receivers treat it as hostile.
  let nonFiniteOnWire = 0;
  links.forEach((link, r) => {
    const deliver = link.deliver;
    link.deliver = (bytes) => {
      const halves = new Uint16Array(bytes.buffer, bytes.byteOffset + HEADER_BYTES, (bytes.byteLength - HEADER_BYTES) / 2);
      for (const h of halves) if ((h & 0x7c00) === 0x7c00) nonFiniteOnWire++;
      deliver(bytes);
    };
    void r;
  });
  const bufs = rings.map(() => Float32Array.from([20_000, 1, -30_000, 0.5, 16_000]));
  const results = await Promise.allSettled(rings.map((ring, r) => ring.allReduce(bufs[r]!, 0, COLLECTIVE_TAG.gradients, { wire: 'fp16' })));
  for (const result of results) assert.ok(result.status === 'rejected' && result.reason instanceof WebringError && result.reason.code === 'ERR_BAD_DATA', 'every rank fails alike');
  assert.equal(nonFiniteOnWire, 0);
  assert.ok(rings.reduce((sum, ring) => sum + ring.stats.fp16Overflows, 0) >= 2, 'overflows are counted, never silent');
  assert.ok(rings.some((ring) => ring.stats.saturatedSends > 0));
  assert.ok(rings.every((ring) => ring.stats.rejectedMisbehaviour === 0), 'nobody is accused of an honest overflow');
  // The ring goes on: the next collective is clean.
  const next = rings.map(() => Float32Array.from([1, 2, 3, 4, 5]));
  await Promise.all(rings.map((ring, r) => ring.allReduce(next[r]!, 1, COLLECTIVE_TAG.gradients, { wire: 'fp16' })));
  for (const b of next) assert.deepEqual([...b], [4, 8, 12, 16, 20]);
});

test('bad collective options are refused with ERR_BAD_REQUEST', async () => {
  const { rings } = createMemoryRing(2);
  const bad = (e: unknown): boolean => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST';
  await assert.rejects(rings[0]!.allReduce(new Float32Array(4), 0, COLLECTIVE_TAG.gradients, { exactTail: 5 }), bad);
  await assert.rejects(rings[0]!.allReduce(new Float32Array(4), 0, COLLECTIVE_TAG.gradients, { exactTail: -1 }), bad);
  await assert.rejects(rings[0]!.allReduce(new Float32Array(4), 0, COLLECTIVE_TAG.gradients, { wire: 'bf16' as 'fp16' }), bad);
});

test('a channel that closes under a send, before its link hears of it, fails the step with ERR_PEER_FAILED and throws nowhere else', async () => {
  // Backpressure makes later sends run from the link's writable callback, where a throw would escape.
  // Rank 1 is left waiting for messages that never come: a short timeout ends its collective.
  const { rings, links } = createMemoryRing(2, { drainBytesPerTick: MAX_MESSAGE_BYTES, highWaterBytes: MAX_MESSAGE_BYTES, timeoutMs: 2_000 });
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  const closing = links[0]!;
  let sends = 0;
  const send = closing.send.bind(closing);
  closing.send = (bytes) => {
    // As an RTCDataChannel in 'closing' throws: "readyState is not 'open'".
    if (++sends > 3) throw new Error("Failed to execute 'send' on 'RTCDataChannel': RTCDataChannel.readyState is not 'open'");
    send(bytes);
  };
  const bufs = rings.map((_, r) => integerBuffer(r, 200_000));
  const results = await Promise.allSettled([rings[0]!.allReduce(bufs[0]!, 0), rings[1]!.allReduce(bufs[1]!, 0).catch(() => 'abandoned')]);
  process.off('unhandledRejection', onUnhandled);
  assert.equal(results[0]!.status, 'rejected');
  assert.equal(((results[0] as PromiseRejectedResult).reason as { code?: string }).code, 'ERR_PEER_FAILED');
  assert.match(String((results[0] as PromiseRejectedResult).reason), /sending to a link that just closed/);
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(unhandled, []);
});
