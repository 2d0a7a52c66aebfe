/**
 * PowerSGD as a collective (shared/collectives/power-sgd.ts) over the in-memory ring: the
 * factored sum is exact when the rank covers the matrices, lossy for one sum at a low rank
 * but nothing is lost over time (error feedback), every replica gets the same bits, the
 * vectors and the tail travel whole, a failed sum leaves its state as it was, and the
 * floats sent are the layout's. The accuracy it keeps on the digits: bench:local-steps.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { COLLECTIVE_TAG, type Collective, type CollectiveOptions, type CollectiveTag } from '../../shared/collectives/collective';
import { PowerSgdCollective, factorFloats, factorLayout, orthonormalise, type FactorLayout } from '../../shared/collectives/power-sgd';
import { mulberry32 } from '../../shared/util/random';
import { createMemoryRing } from '../support/memory-ring';

const TAIL = 3;

/** `n` random floats in [-1, 1) from `seed`. */
function randoms(n: number, seed: number): Float32Array {
  const random = mulberry32(seed);
  return Float32Array.from({ length: n }, () => random() * 2 - 1);
}

/** Each rank's buffer: its head, then a tail of three floats. */
function buffers(layout: FactorLayout, ranks: number, seed: number, head: (rank: number) => Float32Array = (r) => randoms(layout.length, seed + r)): Float32Array[] {
  return Array.from({ length: ranks }, (_, r) => {
    const buf = new Float32Array(layout.length + TAIL);
    buf.set(head(r));
    buf.set([r + 1, 10 * (r + 1), 0.5], layout.length);
    return buf;
  });
}

function sumOf(bufs: readonly Float32Array[]): Float64Array {
  const out = new Float64Array(bufs[0]!.length);
  for (const b of bufs) for (let i = 0; i < out.length; i++) out[i] = out[i]! + b[i]!;
  return out;
}

const norm = (a: ArrayLike<number>, from = 0, to = a.length): number => {
  let s = 0;
  for (let i = from; i < to; i++) s += a[i]! * a[i]!;
  return Math.sqrt(s);
};

function relativeError(got: ArrayLike<number>, want: ArrayLike<number>, from: number, to: number): number {
  const diff = Float64Array.from({ length: to - from }, (_, i) => got[from + i]! - want[from + i]!);
  return norm(diff) / norm(want, from, to);
}

async function sumAll(collectives: readonly Collective[], bufs: readonly Float32Array[], step: number): Promise<void> {
  await Promise.all(collectives.map((c, r) => c.allReduce(bufs[r]!, step, COLLECTIVE_TAG.gradients, { exactTail: TAIL })));
}

test("the layout: a variable of two or more dimensions is a matrix of its last dimension's columns, unless factors would not be smaller", () => {
  const mlp = factorLayout([[784, 128], [128], [128, 10], [10]], 8);
  assert.deepEqual(mlp, { length: 101_770, matrices: [{ offset: 0, rows: 784, cols: 128 }, { offset: 100_480, rows: 128, cols: 10 }] });
  assert.deepEqual(factorFloats(mlp, 8), { first: 784 * 8 + 128 * 8 + 128 + 10, second: 128 * 8 + 10 * 8 });
  // At rank 16 the 128 × 10 matrix would cost 16 × 138 > 1,280 floats as factors: it travels whole.
  assert.deepEqual(factorLayout([[784, 128], [128], [128, 10], [10]], 16).matrices, [{ offset: 0, rows: 784, cols: 128 }]);
  assert.deepEqual(factorLayout([[5, 5, 1, 8]], 2).matrices, [{ offset: 0, rows: 25, cols: 8 }], 'a convolution kernel: (h·w·in) × out');
  const q = randoms(12, 3);
  orthonormalise(q, 0, 4, 3);
  for (let j = 0; j < 3; j++) for (let k = 0; k <= j; k++) {
    let dot = 0;
    for (let i = 0; i < 4; i++) dot += q[i * 3 + j]! * q[i * 3 + k]!;
    assert.ok(Math.abs(dot - (j === k ? 1 : 0)) < 1e-6, `columns ${j}, ${k}: ${dot}`);
  }
});

test('at a rank that covers every matrix the sum is exact (float32 rounding), the vectors and the tail come whole, and every replica holds the same bits', async () => {
  // A vector before the first matrix, one between, one after: every gap of the layout.
  const layout: FactorLayout = { length: 2 + 6 * 4 + 3 + 5 * 3 + 1, matrices: [{ offset: 2, rows: 6, cols: 4 }, { offset: 29, rows: 5, cols: 3 }] };
  const ring = createMemoryRing(3).rings;
  const collectives = ring.map((c) => new PowerSgdCollective(c, layout, 4));
  const bufs = buffers(layout, 3, 7);
  const want = sumOf(bufs);
  await sumAll(collectives, bufs, 0);
  assert.ok(relativeError(bufs[0]!, want, 0, layout.length) < 1e-5, `relative error ${relativeError(bufs[0]!, want, 0, layout.length)}`);
  for (const at of [0, 1, 26, 27, 28, layout.length - 1]) assert.equal(bufs[0]![at], Math.fround(want[at]!), `vector float ${at}`);
  assert.deepEqual([...bufs[0]!.subarray(layout.length)], [6, 60, 1.5], 'the tail: summed exactly');
  for (const b of bufs.slice(1)) assert.ok(Buffer.from(b.buffer).equals(Buffer.from(bufs[0]!.buffer)), 'bit-identical on every rank');
  const floats = factorFloats(layout, 4);
  assert.equal(collectives[0]!.sentFloats, floats.first + floats.second);
});

test('at a low rank one sum loses most of a full-rank matrix, and error feedback delivers it over the following sums: nothing is lost over time', async () => {
  const layout: FactorLayout = { length: 40 * 24, matrices: [{ offset: 0, rows: 40, cols: 24 }] };
  const ring = createMemoryRing(3).rings;
  const collectives = ring.map((c) => new PowerSgdCollective(c, layout, 2));
  // The same buffers every sum (a device's steady contribution): the running total must track T × the sum.
  const fixed = buffers(layout, 3, 11);
  const want = sumOf(fixed);
  const applied = new Float64Array(layout.length);
  // Per sum: what is still undelivered (T × the sum − what was applied), over one sum's size.
  const owed: number[] = [];
  const SUMS = 60;
  for (let t = 0; t < SUMS; t++) {
    const bufs = fixed.map((b) => b.slice());
    await sumAll(collectives, bufs, t);
    for (const b of bufs.slice(1)) assert.ok(Buffer.from(b.buffer).equals(Buffer.from(bufs[0]!.buffer)), `sum ${t}: bit-identical on every rank`);
    for (let i = 0; i < layout.length; i++) applied[i] = applied[i]! + bufs[0]![i]!;
    owed.push(relativeError(applied, Float64Array.from(want, (x) => x * (t + 1)), 0, layout.length) * (t + 1));
  }
  assert.ok(owed[0]! > 0.8, `one sum at rank 2 carries little of a full-rank 40 × 24 matrix: ${owed[0]} of it owed`);
  // Each rank's residual saturates (about 7 sums' worth here, after some 20 sums) and stays:
  // everything is delivered, late, and the mean of what was applied converges on the sum as 1/T.
  assert.ok(owed[SUMS - 1]! <= owed[SUMS / 2 - 1]! * 1.05, `what is owed stops growing: ${owed[SUMS / 2 - 1]} after ${SUMS / 2} sums, ${owed[SUMS - 1]} after ${SUMS}`);
  assert.ok(owed[SUMS - 1]! / SUMS < 0.15, `the mean applied is within 15 % of the sum after ${SUMS} sums: ${owed[SUMS - 1]! / SUMS}`);
});

/** The ring, failing every rank's factors once when told to. */
class FailingFactors implements Collective {
  failNext = false;
  constructor(private readonly inner: Collective) {}
  get rank(): number {
    return this.inner.rank;
  }
  get worldSize(): number {
    return this.inner.worldSize;
  }
  allReduce(buf: Float32Array, step: number, tag: CollectiveTag, options?: CollectiveOptions): Promise<void> {
    if (tag === COLLECTIVE_TAG.gradientFactors && this.failNext) {
      this.failNext = false;
      return Promise.reject(new Error('link lost'));
    }
    return this.inner.allReduce(buf, step, tag, options);
  }
  broadcast(): Promise<void> {
    throw new Error('not used');
  }
}

test("a sum that fails between its two all-reduces leaves the residual and Q as they were: the retry gives the first try's bits", async () => {
  const layout: FactorLayout = { length: 30 * 10 + 4, matrices: [{ offset: 0, rows: 30, cols: 10 }] };
  const run = async (failFirst: boolean): Promise<Float32Array> => {
    const rings = createMemoryRing(3).rings.map((c) => new FailingFactors(c));
    const collectives = rings.map((c) => new PowerSgdCollective(c, layout, 2));
    if (failFirst) {
      for (const r of rings) r.failNext = true;
      const results = await Promise.allSettled(collectives.map((c, r) => c.allReduce(buffers(layout, 3, 5)[r]!, 0, COLLECTIVE_TAG.gradients, { exactTail: TAIL })));
      assert.ok(results.every((x) => x.status === 'rejected'));
    }
    const bufs = buffers(layout, 3, 5);
    await sumAll(collectives, bufs, 1);
    return bufs[0]!;
  };
  const [clean, retried] = [await run(false), await run(true)];
  assert.ok(Buffer.from(retried.buffer).equals(Buffer.from(clean.buffer)));
});

test('alone, or on any other collective than the gradients, the buffer passes through untouched', async () => {
  const layout: FactorLayout = { length: 8 * 8, matrices: [{ offset: 0, rows: 8, cols: 8 }] };
  const [solo] = createMemoryRing(1).rings.map((c) => new PowerSgdCollective(c, layout, 1));
  const buf = buffers(layout, 1, 9)[0]!;
  const before = buf.slice();
  await solo!.allReduce(buf, 0, COLLECTIVE_TAG.gradients, { exactTail: TAIL });
  assert.deepEqual(buf, before);
  const ring = createMemoryRing(2).rings.map((c) => new PowerSgdCollective(c, layout, 1));
  const bufs = buffers(layout, 2, 9);
  const want = sumOf(bufs);
  await Promise.all(ring.map((c, r) => c.allReduce(bufs[r]!, 0, COLLECTIVE_TAG.evaluation, { exactTail: TAIL })));
  assert.deepEqual([...bufs[0]!], [...want].map(Math.fround), 'an evaluation sums exactly');
  assert.equal(ring[0]!.sentFloats, 0);
});
