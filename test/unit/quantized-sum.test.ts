/**
 * Quantized sums (shared/collectives/quantized-sum.ts) and the narrow word wires under them:
 * every algorithm adds 16- and 8-bit words exactly modulo 2^16 and 2^8; the quantized sum
 * is the agreed grid's integer sum, within half a step per rank of the float sum, and the
 * same bits on every replica; error feedback loses nothing over time; a failed sum leaves
 * the residual as it was; masked narrow words sum exactly and keep their width on the wire.
 * In the trainer: test/unit/quantized-training.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { COLLECTIVE_TAG, type Collective, type CollectiveOptions } from '../../shared/collectives/collective';
import { BLOCK_FLOATS, QuantizedCollective, SCALE_GRID, quantizedLevels } from '../../shared/collectives/quantized-sum';
import { MAX_CHUNK_BYTES, MAX_CHUNK_HALVES } from '../../shared/collectives/wire';
import { wordsOf } from '../../shared/collectives/words';
import { mulberry32 } from '../../shared/util/random';
import { createMemoryMesh } from '../support/memory-ring';
import { createSecureMesh, withAllReduce } from '../support/secure-ring';

const TAIL = 3;
const ALGORITHMS = ['ring', 'halving-doubling', 'hub'] as const;
const bits = (b: Float32Array) => Array.from(new Uint32Array(b.buffer, b.byteOffset, b.length));

/** Rank r's gradient-like values: blocks of different magnitudes and signs, then a tail of small integers. */
function gradient(rank: number, head: number, seed = 0): Float32Array {
  const next = mulberry32(100 * seed + rank + 1);
  const buf = new Float32Array(head + TAIL);
  for (let i = 0; i < head; i++) buf[i] = (next() - 0.5) * 10 ** (Math.floor(i / BLOCK_FLOATS) % 4 - 3);
  for (let i = 0; i < TAIL; i++) buf[head + i] = rank + i;
  return buf;
}

const sumOf = (bufs: readonly Float32Array[]): Float64Array => {
  const out = new Float64Array(bufs[0]!.length);
  for (const b of bufs) for (let i = 0; i < out.length; i++) out[i] = out[i]! + b[i]!;
  return out;
};

/** The largest magnitude of block `b` of `buf`, rounded up to the scales' grid. */
const blockMax = (buf: Float32Array, b: number, head: number): number => {
  let m = 0;
  for (let i = b * BLOCK_FLOATS; i < Math.min(head, (b + 1) * BLOCK_FLOATS); i++) m = Math.max(m, Math.abs(buf[i]!));
  return Math.ceil(m / SCALE_GRID) * SCALE_GRID;
};

for (const algorithm of ALGORITHMS) {
  test(`${algorithm}: 16- and 8-bit words sum exactly modulo 2^16 and 2^8 over several messages, in a half and a quarter of float32's bytes, for N from 2 to 9`, async () => {
    for (const wire of ['u16', 'u8'] as const) {
      const mod = wire === 'u16' ? 2 ** 16 : 2 ** 8;
      const length = (wire === 'u16' ? MAX_CHUNK_HALVES : MAX_CHUNK_BYTES) * 2 + 37;
      for (const n of [2, 3, 5, 8, 9]) {
        const inputs = Array.from({ length: n }, (_, r) => {
          const next = mulberry32(r + 7);
          return Uint32Array.from({ length }, () => Math.floor(next() * 2 ** 32));
        });
        const sumOn = async (format: 'u16' | 'u8' | 'fp32') => {
          const { rings } = createMemoryMesh(n, { hub: algorithm === 'hub' });
          const bufs = inputs.map((w) => (format === 'fp32' ? new Float32Array(length) : new Float32Array(w.buffer.slice(0))));
          await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 3, COLLECTIVE_TAG.gradients, { algorithm, wire: format })));
          return { bufs, bytes: rings.reduce((s, ring) => s + ring.stats.bytesSent, 0) };
        };
        const { bufs, bytes } = await sumOn(wire);
        for (let r = 0; r < n; r++) {
          const got = wordsOf(bufs[r]!);
          for (let i = 0; i < length; i += 997) {
            const want = inputs.reduce((a, w) => (a + w[i]!) % mod, 0);
            assert.equal(got[i]! % mod, want, `${wire}, N = ${n}, rank ${r}, word ${i}`);
          }
        }
        const floatBytes = (await sumOn('fp32')).bytes;
        const share = bytes / floatBytes;
        assert.ok(share < (wire === 'u16' ? 0.51 : 0.26), `${wire}, N = ${n}: ${bytes} bytes, ${share.toFixed(3)} of float32's`);
      }
    }
  });
}

/** A quantized sum of `inputs` (copied) over `collectives`; returns the buffers. */
async function quantizedSum(collectives: readonly Collective[], inputs: readonly Float32Array[], step: number, options: CollectiveOptions): Promise<Float32Array[]> {
  const bufs = inputs.map((b) => b.slice());
  await Promise.all(collectives.map((c, r) => c.allReduce(bufs[r]!, step, COLLECTIVE_TAG.gradients, { ...options, exactTail: TAIL })));
  return bufs;
}

for (const algorithm of ALGORITHMS) {
  test(`${algorithm}: a quantized sum is the same bits everywhere, within half a grid step per rank of the float sum; the tail is exact`, async () => {
    const head = 3 * BLOCK_FLOATS + 300;
    for (const wordBits of [8, 16] as const) {
      for (const n of [2, 4, 7]) {
        const { rings } = createMemoryMesh(n, { hub: algorithm === 'hub' });
        const quantized = rings.map((r) => new QuantizedCollective(r, wordBits));
        const inputs = rings.map((_, r) => gradient(r, head));
        const bufs = await quantizedSum(quantized, inputs, 1, { algorithm });
        for (const b of bufs) assert.deepEqual(bits(b), bits(bufs[0]!), `${wordBits} bits, N = ${n}: the replicas differ`);
        const want = sumOf(inputs);
        for (let block = 0; block * BLOCK_FLOATS < head; block++) {
          const grid = inputs.reduce((s, b) => s + blockMax(b, block, head), 0) / quantizedLevels(wordBits, n);
          for (let i = block * BLOCK_FLOATS; i < Math.min(head, (block + 1) * BLOCK_FLOATS); i++) {
            assert.ok(Math.abs(bufs[0]![i]! - want[i]!) <= (n * grid) / 2 + 1e-7 * Math.abs(want[i]!), `${wordBits} bits, N = ${n}, value ${i}: ${bufs[0]![i]} against ${want[i]}`);
          }
        }
        assert.deepEqual(Array.from(bufs[0]!.subarray(head)), Array.from(want.subarray(head)), 'the tail travels whole');
        assert.equal(quantized[0]!.clamped, 0);
      }
    }
  });
}

test('error feedback: summing the same buffers T times, what the class received totals T times the sum, within one sum\'s error', async () => {
  const n = 4;
  const head = 2 * BLOCK_FLOATS;
  const { rings } = createMemoryMesh(n);
  const quantized = rings.map((r) => new QuantizedCollective(r, 8));
  const inputs = rings.map((_, r) => gradient(r, head, 3));
  const want = sumOf(inputs);
  const total = new Float64Array(head);
  const rounds = 64;
  let firstError = 0;
  for (let t = 0; t < rounds; t++) {
    const [got] = await quantizedSum(quantized, inputs, t, {});
    for (let i = 0; i < head; i++) total[i] = total[i]! + got![i]!;
    if (t === 0) for (let i = 0; i < head; i++) firstError = Math.max(firstError, Math.abs(got![i]! - want[i]!));
  }
  assert.ok(firstError > 0, 'one 8-bit sum is lossy');
  for (let block = 0; block * BLOCK_FLOATS < head; block++) {
    // What each rank owes after the last sum is at most half a step of a grid a little wider
    // than the first (its magnitudes include what it owes): the mean's error falls as 1/T.
    const grid = inputs.reduce((s, b) => s + blockMax(b, block, head), 0) / quantizedLevels(8, n);
    for (let i = block * BLOCK_FLOATS; i < (block + 1) * BLOCK_FLOATS; i++) {
      const error = Math.abs(total[i]! / rounds - want[i]!);
      assert.ok(error <= (1.1 * n * grid) / 2 / rounds + 1e-7 * Math.abs(want[i]!), `value ${i}: the mean of ${rounds} sums is off by ${error}`);
    }
  }
});

test('a sum that fails leaves the residual as it was: the retried sum gives the bits of a sum that never failed', async () => {
  const n = 3;
  const head = BLOCK_FLOATS + 5;
  const inputs = [0, 1].map((s) => Array.from({ length: n }, (_, r) => gradient(r, head, s + 5)));
  const run = async (failOnce: boolean) => {
    const first = createMemoryMesh(n, { timeoutMs: 200 });
    // Rank 2 sums the scales of step 1 but never sends its words: everyone fails the words.
    const inners: Collective[] = first.rings.map((ring, r) =>
      r === 2 ? withAllReduce(ring, (original, buf, step, tag, options) => (step === 1 && tag === COLLECTIVE_TAG.gradients ? Promise.reject(new Error('gone')) : original(buf, step, tag, options))) : ring,
    );
    const quantized = inners.map((c) => new QuantizedCollective(c, 8));
    await quantizedSum(quantized, inputs[0]!, 0, {});
    if (failOnce) {
      const bufs = inputs[1]!.map((b) => b.slice());
      const results = await Promise.allSettled(quantized.map((c, r) => c.allReduce(bufs[r]!, 1, COLLECTIVE_TAG.gradients, { exactTail: TAIL })));
      assert.ok(results.every((r) => r.status === 'rejected'), 'the sum failed on every rank');
    }
    // The same state over a new ring (the test reaches into the instance; a new generation would start afresh).
    const fresh = createMemoryMesh(n);
    quantized.forEach((q, r) => Object.assign(q, { inner: fresh.rings[r]! }));
    return quantizedSum(quantized, inputs[1]!, 2, {});
  };
  const [clean, retried] = [await run(false), await run(true)];
  assert.deepEqual(bits(retried[0]!), bits(clean[0]!));
});

for (const algorithm of ['ring', 'hub'] as const) {
  test(`${algorithm}: masked narrow words sum exactly: a secure quantized sum has the bits of the plain one, for N from 3 to 30`, async () => {
    const head = BLOCK_FLOATS + 77;
    for (const wordBits of [8, 16] as const) {
      for (const n of [3, 4, 9, 30]) {
        const inputs = Array.from({ length: n }, (_, r) => gradient(r, head, 9));
        const plain = createMemoryMesh(n, { hub: algorithm === 'hub' });
        const want = await quantizedSum(plain.rings.map((r) => new QuantizedCollective(r, wordBits)), inputs, 4, { algorithm });
        const mesh = createSecureMesh(n, { hub: algorithm === 'hub' });
        const got = await quantizedSum(mesh.secure.map((s) => new QuantizedCollective(s, wordBits)), inputs, 4, { algorithm });
        for (const b of got) assert.deepEqual(bits(b), bits(want[0]!), `${wordBits} bits, N = ${n}`);
        // Two secure sums (the scales, then the words), the words in their own width.
        assert.deepEqual(mesh.aggregations.map((a) => a.stats.sums), mesh.aggregations.map(() => 2));
        const securePerValue = mesh.rings.reduce((s, r) => s + r.stats.bytesSent, 0) / plain.rings.reduce((s, r) => s + r.stats.bytesSent, 0);
        assert.ok(securePerValue < 1.1, `${wordBits} bits, N = ${n}: masked words cost ${securePerValue.toFixed(2)}× the plain ones`);
      }
    }
  });
}

test('what a rank sends on a masked 16-bit wire is uniform words, whatever its gradient', async () => {
  const n = 4;
  const head = 8 * BLOCK_FLOATS;
  const mesh = createSecureMesh(n);
  const sent: Uint8Array[] = [];
  const link = mesh.links[0]![1]!;
  const deliver = link.deliver;
  link.deliver = (bytes) => {
    sent.push(bytes.slice(20));
    deliver(bytes);
  };
  // Rank 0's gradient is nearly all zeros: unmasked, its words would be too.
  const inputs = Array.from({ length: n }, (_, r) => (r === 0 ? new Float32Array(head + TAIL).fill(1e-3, 0, 10) : gradient(r, head, 2)));
  await quantizedSum(mesh.secure.map((s) => new QuantizedCollective(s, 16)), inputs, 1, {});
  const halves = new Uint16Array(Uint8Array.from(sent.filter((b) => b.length > 4 * 1024).flatMap((b) => Array.from(b))).buffer);
  const zeros = halves.reduce((z, h) => z + (h === 0 ? 1 : 0), 0);
  assert.ok(halves.length > head / 8, `${halves.length} words seen`);
  assert.ok(zeros < halves.length / 1000, `${zeros} of ${halves.length} words are zero: not masked`);
});

test("a step's transfer is all of its gradient sum: the scales' and the words' bytes (what the product reports a turn), and any other collective alone", async () => {
  const n = 3;
  const head = 2 * BLOCK_FLOATS;
  const { rings } = createMemoryMesh(n);
  const quantized = rings.map((r) => new QuantizedCollective(r, 8));
  const before = rings.map((r) => r.stats.bytesSent);
  await quantizedSum(quantized, rings.map((_, r) => gradient(r, head)), 5, {});
  rings.forEach((ring, r) => {
    assert.equal(ring.lastTransfer.bytes, ring.stats.bytesSent - before[r]!, `rank ${r}: both collectives of the sum`);
    assert.equal(ring.lastTransfer.tag, COLLECTIVE_TAG.gradients);
  });
  const sum = rings[0]!.lastTransfer.bytes;
  assert.ok(sum > ((2 * (n - 1)) / n) * head, 'more than the words alone');
  // The next step's evaluation is another collective: it stands alone.
  const mid = rings.map((r) => r.stats.bytesSent);
  await Promise.all(rings.map((ring) => ring.allReduce(new Float32Array(4), 6, COLLECTIVE_TAG.evaluation)));
  rings.forEach((ring, r) => assert.equal(ring.lastTransfer.bytes, ring.stats.bytesSent - mid[r]!));
});
