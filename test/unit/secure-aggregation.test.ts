/**
 * Secure aggregation (shared/secagg/) over in-memory links: the masks cancel exactly in
 * every collective for every class size from 3 to 30, what a rank sends is uniform noise
 * that tells nothing of its gradient, a dropped member's step is redone with fresh masks on
 * the next generation and gives the exact sum, masks that do not cancel fail the step
 * instead of applying noise, the fixed-point error stays within its documented bound, and
 * no key or mask is used twice. The real relay of keys is in test/class/secure-keys.test.ts,
 * real tabs in test/e2e/secure-aggregation.spec.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { COLLECTIVE_TAG, type CollectiveOptions } from '../../shared/collectives/collective';
import type { Algorithm } from '../../shared/protocol';
import { CLIP_BOUND, SCALE, decodeSum, encodeMasked, fixedPointErrorBound } from '../../shared/secagg/fixed-point';
import { graphSeed, maskPartnerCount, maskPartners } from '../../shared/secagg/mask-graph';
import { makeKeyPair, pairMask, pairSecret } from '../../shared/secagg/pair-keys';
import { WebringError } from '../../shared/protocol/errors';
import { mulberry32 } from '../../shared/util/random';
import { createSecureMesh, memberIds, relayedDirectories, secureOver } from '../support/secure-ring';
import { createMemoryMesh } from '../support/memory-ring';

const TAIL = 3;
const bits = (b: Float32Array) => Array.from(new Uint32Array(b.buffer, b.byteOffset, b.length));

/** Rank r's gradient-like values: varied magnitudes and signs, a tail of small integers. */
function gradient(rank: number, head: number): Float32Array {
  const next = mulberry32(1000 + rank);
  const buf = new Float32Array(head + TAIL);
  for (let i = 0; i < head; i++) buf[i] = (next() - 0.5) * 10 ** (next() * 4 - 3);
  for (let i = 0; i < TAIL; i++) buf[head + i] = rank + i;
  return buf;
}

/** What the secure sum must give: the fixed-point values summed as integers, decoded once; the tail summed in float32. */
function fixedPointSum(inputs: Float32Array[], head: number): Float32Array {
  const out = new Float32Array(inputs[0]!.length);
  for (let i = 0; i < head; i++) out[i] = inputs.reduce((acc, b) => acc + Math.round(b[i]! * SCALE), 0) / SCALE;
  for (let i = head; i < out.length; i++) out[i] = inputs.reduce((acc, b) => Math.fround(acc + b[i]!), 0);
  return out;
}

const GRADIENTS = (algorithm: Algorithm): CollectiveOptions => ({ algorithm, exactTail: TAIL });

for (const algorithm of ['ring', 'halving-doubling', 'hub'] as const) {
  test(`${algorithm}: the masks cancel exactly for every class from 3 to 30, bit-identical on every replica`, async () => {
    const head = 257;
    for (let n = 3; n <= 30; n++) {
      const { secure } = createSecureMesh(n, { hub: algorithm === 'hub' });
      const inputs = secure.map((_, r) => gradient(r, head));
      const expected = fixedPointSum(inputs, head);
      const bufs = inputs.map((b) => b.slice());
      await Promise.all(secure.map((s, r) => s.allReduce(bufs[r]!, 7, COLLECTIVE_TAG.gradients, GRADIENTS(algorithm))));
      for (const b of bufs) assert.deepEqual(bits(b), bits(expected), `N = ${n}`);
    }
  });
}

test('the mask graph: k = min(N-1, 2⌈log2 N⌉) partners, symmetric, the same on every rank', () => {
  for (let n = 2; n <= 32; n++) {
    const k = maskPartnerCount(n);
    const graph = Array.from({ length: n }, (_, r) => maskPartners(r, n, 99));
    for (let r = 0; r < n; r++) {
      assert.equal(graph[r]!.length, k, `N = ${n}, rank ${r}`);
      assert.ok(!graph[r]!.includes(r));
      for (const p of graph[r]!) assert.ok(graph[p]!.includes(r), `N = ${n}: ${r} masks with ${p} but not ${p} with ${r}`);
    }
  }
  assert.equal(maskPartnerCount(3), 2);
  assert.equal(maskPartnerCount(30), 10);
});

test('issue 38 (6): the mask graph depends on the server\'s random seed of the generation, not on the run and generation alone (failed on the previous main)', () => {
  const n = 30;
  const graphOf = (maskSeed: number) => JSON.stringify(Array.from({ length: n }, (_, r) => maskPartners(r, n, graphSeed(4, 17, maskSeed))));
  assert.equal(graphOf(123), graphOf(123), 'the same on every rank');
  const drawn = new Set(Array.from({ length: 20 }, (_, i) => graphOf(1 + i * 7919)));
  assert.equal(drawn.size, 20, 'twenty seeds, twenty different graphs for the same run and generation');
});

/** Chi-square statistic of the bytes' histogram against uniform. */
function chiSquare(bytes: Uint8Array): number {
  const counts = new Float64Array(256);
  for (const b of bytes) counts[b]!++;
  const expected = bytes.length / 256;
  return counts.reduce((acc, c) => acc + (c - expected) ** 2 / expected, 0);
}

function correlation(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = a.length;
  let ma = 0;
  let mb = 0;
  for (let i = 0; i < n; i++) {
    ma += a[i]!;
    mb += b[i]!;
  }
  ma /= n;
  mb /= n;
  let sab = 0;
  let saa = 0;
  let sbb = 0;
  for (let i = 0; i < n; i++) {
    sab += (a[i]! - ma) * (b[i]! - mb);
    saa += (a[i]! - ma) ** 2;
    sbb += (b[i]! - mb) ** 2;
  }
  return sab / Math.sqrt(saa * sbb);
}

test("what rank 0 sends its neighbour is uniform bytes, uncorrelated with its gradient (and without masks it is the gradient)", async () => {
  const n = 4;
  const head = 16_000;
  // A gradient with structure: a smooth ramp, far from uniform bytes.
  const ramp = (r: number) => {
    const b = new Float32Array(head + TAIL);
    for (let i = 0; i < head; i++) b[i] = Math.sin(i / 50) * (r + 1);
    return b;
  };
  const record = async (secureMode: boolean): Promise<{ payload: Uint8Array; sent: Int32Array | Float32Array }> => {
    const mesh = secureMode ? createSecureMesh(n) : { ...createMemoryMesh(n), secure: null };
    const link = mesh.links[0]![1]!;
    const deliver = link.deliver;
    const sent: Uint8Array[] = [];
    link.deliver = (bytes) => {
      // Reduce-scatter step 0: rank 0's own values, unsummed.
      if (bytes[0] === 1 && bytes[1] === 0) sent.push(bytes.subarray(20));
      deliver(bytes);
    };
    const bufs = Array.from({ length: n }, (_, r) => ramp(r));
    const collectives = mesh.secure ?? mesh.rings;
    await Promise.all(collectives.map((c, r) => c.allReduce(bufs[r]!, 3, COLLECTIVE_TAG.gradients, GRADIENTS('ring'))));
    const payload = new Uint8Array(sent.reduce((a, s) => a + s.length, 0));
    let at = 0;
    for (const s of sent) {
      payload.set(s, at);
      at += s.length;
    }
    const values = secureMode ? new Int32Array(payload.buffer.slice(0)) : new Float32Array(payload.buffer.slice(0));
    return { payload, sent: values };
  };
  const own = ramp(0);
  const masked = await record(true);
  // 255 degrees of freedom: 330 is the 0.1 % critical value.
  assert.ok(chiSquare(masked.payload) < 330, `chi-square ${chiSquare(masked.payload).toFixed(0)} on ${masked.payload.length} masked bytes`);
  const r = correlation(masked.sent, own.subarray(0, masked.sent.length));
  assert.ok(Math.abs(r) < 0.05, `masked words correlate ${r.toFixed(3)} with the gradient`);
  // The same recording without secure aggregation: the neighbour reads the gradient itself.
  const plain = await record(false);
  assert.ok(chiSquare(plain.payload) > 10_000);
  assert.ok(correlation(plain.sent, own.subarray(0, plain.sent.length)) > 0.999);
});

test('a member lost mid-step: the step is redone on the next generation with fresh masks, and the sum is exact', async () => {
  const head = 5_000;
  const ids = memberIds(4);
  const directories = relayedDirectories(ids);
  const first = createMemoryMesh(4, { generation: 1, timeoutMs: 300 });
  const { secure } = secureOver(first.rings, ids, directories, 1);
  const inputs = ids.map((_, r) => gradient(r, head));
  // Rank 3 is gone before it sends anything: the others' collective fails.
  const attempts = secure.slice(0, 3).map((s, r) => s.allReduce(inputs[r]!.slice(), 11, COLLECTIVE_TAG.gradients, GRADIENTS('ring')));
  setTimeout(() => first.rings.forEach((ring) => ring.abort(new WebringError('ERR_PEER_FAILED', 'rank 3 left'))), 20);
  for (const a of attempts) await assert.rejects(a, (e: WebringError) => e.code === 'ERR_PEER_FAILED');
  // Generation 2: the three survivors, the same directories (fresh keys for the new generation).
  const survivors = ids.slice(0, 3);
  const second = createMemoryMesh(3, { generation: 2 });
  const again = secureOver(second.rings, survivors, directories.slice(0, 3), 2);
  const bufs = inputs.slice(0, 3).map((b) => b.slice());
  await Promise.all(again.secure.map((s, r) => s.allReduce(bufs[r]!, 11, COLLECTIVE_TAG.gradients, GRADIENTS('ring'))));
  const expected = fixedPointSum(inputs.slice(0, 3), head);
  for (const b of bufs) assert.deepEqual(bits(b), bits(expected));
  // The first generation's keys are gone from every survivor.
  for (const d of directories.slice(0, 3)) assert.deepEqual(d.held, [{ run: 1, generation: 2 }]);
});

test('masks that do not cancel fail the step (ERR_SECAGG_MISMATCH) rather than apply noise', async () => {
  const head = 1_000;
  const ids = memberIds(3);
  const directories = relayedDirectories(ids);
  const { rings } = createMemoryMesh(3);
  const honest = secureOver(rings, ids, directories, 1, 1).secure;
  // Rank 2 labels its masks with another run: its masks cannot cancel its partners'.
  const rogue = secureOver(rings, ids, directories, 1, 2).secure[2]!;
  const results = await Promise.allSettled([honest[0]!, honest[1]!, rogue].map((s, r) => s.allReduce(gradient(r, head), 4, COLLECTIVE_TAG.gradients, GRADIENTS('ring'))));
  for (const r of results) {
    assert.equal(r.status, 'rejected');
    assert.equal(((r as PromiseRejectedResult).reason as WebringError).code, 'ERR_SECAGG_MISMATCH');
  }
});

test('the fixed-point error stays within N·2^-17 + 2^-24·|Σ| for every class size', () => {
  const length = 20_000;
  const zero = new Uint32Array(length);
  for (const n of [3, 8, 30, 32]) {
    const next = mulberry32(n);
    const inputs = Array.from({ length: n }, () => Float32Array.from({ length }, () => (next() - 0.5) * 2 * (next() < 0.01 ? CLIP_BOUND : 10 ** (next() * 5 - 4))));
    const words = new Uint32Array(length);
    const sum = new Uint32Array(length);
    for (const x of inputs) {
      assert.equal(encodeMasked(x, zero, words, length), 0);
      for (let i = 0; i < length; i++) sum[i]! += words[i]!;
    }
    const decoded = new Float32Array(length);
    decodeSum(sum, decoded, length);
    let worst = 0;
    for (let i = 0; i < length; i++) {
      const exact = inputs.reduce((acc, x) => acc + x[i]!, 0);
      const err = Math.abs(decoded[i]! - exact);
      worst = Math.max(worst, err / fixedPointErrorBound(n, exact));
    }
    assert.ok(worst <= 1, `N = ${n}: error ${worst.toFixed(3)}× the bound`);
  }
  // Beyond the bound: clipped and counted, never wrapped.
  const big = Float32Array.of(5000, -5000, Number.NaN);
  const out = new Uint32Array(3);
  assert.equal(encodeMasked(big, new Uint32Array(3), out, 3), 2);
  const back = new Float32Array(3);
  decodeSum(out, back, 3);
  assert.deepEqual([...back], [Math.fround(CLIP_BOUND), -Math.fround(CLIP_BOUND), 0]);
});

test('no key or mask is used twice: a key pair per (run, generation), a mask per (generation, step, attempt)', async () => {
  const ids = memberIds(3);
  const directories = relayedDirectories(ids);
  // A new run on an unchanged class keeps its generation number: it still gets new keys.
  const rings = [{ run: 1, generation: 1 }, { run: 1, generation: 2 }, { run: 1, generation: 3 }, { run: 2, generation: 3 }];
  const keys = await Promise.all(rings.map((r) => directories[0]!.ensureOwn(r)));
  assert.equal(new Set(keys.map((k) => k.publicKey)).size, rings.length);
  directories[0]!.forgetBefore({ run: 2, generation: 3 });
  assert.deepEqual(directories[0]!.held, [{ run: 2, generation: 3 }]);
  const a = await makeKeyPair();
  const b = await makeKeyPair();
  const secret = await pairSecret(a.privateKey, b.publicKey);
  const base = { run: 1, generation: 5, step: 9, tag: COLLECTIVE_TAG.gradients, attempt: 0, low: 0, high: 1 };
  const variants = [base, { ...base, run: 2 }, { ...base, generation: 6 }, { ...base, step: 10 }, { ...base, attempt: 1 }, { ...base, high: 2 }];
  const masks = await Promise.all(variants.map((l) => pairMask(secret, l, 64)));
  const distinct = new Set(masks.map((m) => Array.from(m).join(',')));
  assert.equal(distinct.size, variants.length);
  // Both ends of a pair derive the same mask from their own private keys.
  const other = await pairMask(await pairSecret(b.privateKey, a.publicKey), base, 64);
  assert.deepEqual(Array.from(other), Array.from(masks[0]!));
  // A retried step on the same collective sends other words for the same gradient.
  const { secure, links } = createSecureMesh(3, { timeoutMs: 200 });
  const sent: string[] = [];
  const link = links[0]![1]!;
  const deliver = link.deliver;
  link.deliver = (bytes) => {
    // Reduce-scatter step 0, the words' chunk (0; the float tail is chunk 1).
    if (bytes[0] === 1 && bytes[1] === 0 && bytes[16] === 0) sent.push(Array.from(bytes.subarray(20, 60)).join(','));
    deliver(bytes);
  };
  const g = gradient(0, 500);
  await Promise.allSettled([secure[0]!.allReduce(g.slice(), 2, COLLECTIVE_TAG.gradients, GRADIENTS('ring'))]);
  await Promise.allSettled([secure[0]!.allReduce(g.slice(), 2, COLLECTIVE_TAG.gradients, GRADIENTS('ring'))]);
  assert.equal(sent.length, 2);
  assert.notEqual(sent[0], sent[1]);
});

test('issue 38 (5): a partner key that does not import is a recoverable ERR_PEER_MISBEHAVED that names its owner (before: a DOMException, and the victim left as failed)', async () => {
  const ids = memberIds(3);
  const directories = relayedDirectories(ids, new Set([ids[2]!]), 100);
  const ring = { run: 1, generation: 1 };
  const { publicKey } = await directories[2]!.ensureOwn(ring);
  const offCurve = Buffer.from(publicKey, 'base64');
  offCurve.writeUInt8(offCurve.readUInt8(64) ^ 1, 64);
  directories[0]!.heard(ring, ids[2]!, offCurve.toString('base64'));
  await assert.rejects(directories[0]!.secrets(ring, [ids[2]!]), (e: WebringError) => e instanceof WebringError && e.code === 'ERR_PEER_MISBEHAVED' && e.message.includes(ids[2]!));
});

test('a partner that never publishes its key fails the step with ERR_TIMEOUT naming it, within the key wait', async () => {
  const ids = memberIds(3);
  const directories = relayedDirectories(ids, new Set([ids[2]!]), 100);
  const ring = { run: 1, generation: 1 };
  await directories[1]!.ensureOwn(ring);
  await directories[2]!.ensureOwn(ring);
  await assert.rejects(directories[0]!.secrets(ring, [ids[1]!, ids[2]!]), (e: WebringError) => e.code === 'ERR_TIMEOUT' && e.message.includes(ids[2]!));
  // The one that did publish is usable.
  assert.equal((await directories[0]!.secrets(ring, [ids[1]!])).length, 1);
});
