/**
 * A rank's claim cannot zero the class's quantized sum (issue 57, defect 8;
 * shared/collectives/quantized-sum.ts): an honest class's sum is the bits of the plain
 * quantization it always was; one rank claiming the bound (or less than nothing) for its
 * blocks' magnitudes makes every rank refuse the step with ERR_PEER_MISBEHAVED, naming
 * nobody, instead of decoding a sum of zeros; words past a rank's clamp that wrap the sum
 * are refused the same way. Each over the plain ring, the hub and secure aggregation.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { COLLECTIVE_TAG, type Collective, type CollectiveOptions, type CollectiveTag } from '../../shared/collectives/collective';
import { PeerMisbehavedError } from '../../shared/collectives/admission';
import { BLOCK_FLOATS, QuantizedCollective, SCALE_BOUND, SCALE_GRID, quantizedLevels } from '../../shared/collectives/quantized-sum';
import { wordsOf } from '../../shared/collectives/words';
import { WebringError } from '../../shared/protocol/errors';
import { mulberry32 } from '../../shared/util/random';
import { createMemoryMesh } from '../support/memory-ring';
import { createSecureMesh } from '../support/secure-ring';

const TAIL = 2;
const bits = (b: Float32Array) => Array.from(new Uint32Array(b.buffer, b.byteOffset, b.length));
type AllReduce = Collective['allReduce'];
type Mesh = 'plain' | 'hub' | 'secure';
const MESHES: readonly Mesh[] = ['plain', 'hub', 'secure'];

/** `target`, whose sums of `tag` first pass through `change` (what a hostile rank does to its own buffer). */
function hostile<T extends Collective>(target: T, tag: CollectiveTag, change: (buf: Float32Array, tail: number) => void): T {
  const original: AllReduce = target.allReduce.bind(target);
  return new Proxy(target, {
    get(t, prop) {
      if (prop === 'allReduce') {
        return (buf: Float32Array, step: number, at: CollectiveTag, options?: CollectiveOptions) => {
          if (at === tag) change(buf, options?.exactTail ?? 0);
          return original(buf, step, at, options);
        };
      }
      const value = Reflect.get(t, prop, t) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(t) : value;
    },
  });
}

/** The collectives of `n` ranks on `mesh`, rank r's inner one passed through `wrap`. */
function collectives(mesh: Mesh, n: number, wordBits: 8 | 16, wrap: (inner: Collective, r: number) => Collective = (c) => c): QuantizedCollective[] {
  const inners: Collective[] = mesh === 'secure' ? createSecureMesh(n).secure : createMemoryMesh(n, { hub: mesh === 'hub', timeoutMs: 2_000 }).rings;
  return inners.map((c, r) => new QuantizedCollective(wrap(c, r), wordBits));
}

async function sumOn(quantized: readonly QuantizedCollective[], inputs: readonly Float32Array[], step: number, algorithm: 'ring' | 'hub'): Promise<PromiseSettledResult<Float32Array>[]> {
  return Promise.allSettled(
    quantized.map(async (c, r) => {
      const buf = inputs[r]!.slice();
      await c.allReduce(buf, step, COLLECTIVE_TAG.gradients, { algorithm, exactTail: TAIL });
      return buf;
    }),
  );
}

/** Rank r's gradient-like values: blocks of different magnitudes (10⁻³ to 1), then a small tail. */
function gradient(rank: number, head: number, seed: number): Float32Array {
  const next = mulberry32(1000 * seed + rank + 1);
  const buf = new Float32Array(head + TAIL);
  for (let i = 0; i < head; i++) buf[i] = (next() - 0.5) * 10 ** (Math.floor(i / BLOCK_FLOATS) % 4 - 3);
  for (let i = 0; i < TAIL; i++) buf[head + i] = rank + i;
  return buf;
}

/**
 * The quantized sums of `steps` buffers a rank, worked out here from the grid's definition
 * (S the sum of the ranks' largest magnitudes on SCALE_GRID, step S / L, words rounded and
 * clamped to ±⌈c_i / step⌉, error feedback in float32): the bits the sum gave before the
 * checks, for sums of magnitudes that float32 adds exactly.
 */
function reference(steps: readonly (readonly Float32Array[])[], head: number, wordBits: 8 | 16): Float32Array[] {
  const n = steps[0]!.length;
  const levels = quantizedLevels(wordBits, n);
  const owed = Array.from({ length: n }, () => new Float32Array(head));
  return steps.map((inputs) => {
    const out = new Float32Array(head + TAIL);
    for (let b = 0; b * BLOCK_FLOATS < head; b++) {
      const [from, to] = [b * BLOCK_FLOATS, Math.min(head, (b + 1) * BLOCK_FLOATS)];
      // The largest magnitude is taken of the sum in double precision, the words of it in float32.
      const sums = inputs.map((buf, r) => Array.from({ length: to - from }, (_, k) => buf[from + k]! + owed[r]![from + k]!));
      const xs = sums.map((x) => Float32Array.from(x));
      const own = sums.map((x) => Math.fround(Math.ceil(x.reduce((m, v) => Math.max(m, Math.abs(v)), 0) / SCALE_GRID) * SCALE_GRID));
      const grid = Math.fround(own.reduce((s, c) => s + c, 0)) / levels;
      for (let k = 0; k < to - from; k++) {
        let sum = 0;
        xs.forEach((x, r) => {
          const cap = Math.ceil(own[r]! / grid);
          const q = Math.max(-cap, Math.min(cap, Math.round(x[k]! / grid)));
          owed[r]![from + k] = x[k]! - q * grid;
          sum += q;
        });
        out[from + k] = sum * grid;
      }
    }
    for (let i = head; i < head + TAIL; i++) out[i] = inputs.reduce((s, buf) => s + buf[i]!, 0);
    return out;
  });
}

for (const mesh of MESHES) {
  test(`${mesh}: an honest class's quantized sums are the bits of the plain quantization, step after step, in 8- and 16-bit words`, async () => {
    const n = 4;
    const head = 4 * BLOCK_FLOATS + 100;
    for (const wordBits of [8, 16] as const) {
      const steps = [0, 1, 2].map((s) => Array.from({ length: n }, (_, r) => gradient(r, head, s)));
      const want = reference(steps, head, wordBits);
      const quantized = collectives(mesh, n, wordBits);
      for (let s = 0; s < steps.length; s++) {
        const got = await sumOn(quantized, steps[s]!, s, mesh === 'hub' ? 'hub' : 'ring');
        for (const [r, result] of got.entries()) {
          assert.equal(result.status, 'fulfilled', `${wordBits} bits, step ${s}, rank ${r}: ${result.status === 'rejected' ? String(result.reason) : ''}`);
          if (result.status === 'fulfilled') assert.deepEqual(bits(result.value), bits(want[s]!), `${wordBits} bits, step ${s}, rank ${r}`);
        }
      }
    }
  });
}

/** Every rank's sum failed with ERR_PEER_MISBEHAVED and accused nobody (no PeerMisbehavedError names a rank). */
function assertRefusedByAll(results: readonly PromiseSettledResult<Float32Array>[], what: string): void {
  for (const [r, result] of results.entries()) {
    if (result.status === 'fulfilled') {
      const largest = result.value.subarray(0, -TAIL).reduce((m, v) => Math.max(m, Math.abs(v)), 0);
      assert.fail(`${what}: rank ${r} decoded a sum (largest magnitude ${largest}) instead of refusing it`);
    }
    const err = result.reason as unknown;
    assert.ok(err instanceof WebringError, `${what}, rank ${r}: ${String(err)}`);
    assert.equal(err.code, 'ERR_PEER_MISBEHAVED', `${what}, rank ${r}`);
    assert.ok(!(err instanceof PeerMisbehavedError), `${what}, rank ${r}: the claimant cannot be named, and nobody else may be`);
  }
}

for (const mesh of MESHES) {
  test(`${mesh}: one rank claiming the bound (or less than nothing) for its blocks makes every rank refuse the step with a code, not decode zeros`, async () => {
    const n = 4;
    const head = 2 * BLOCK_FLOATS;
    const inputs = Array.from({ length: n }, (_, r) => gradient(r, head, 7));
    for (const wordBits of [8, 16] as const) {
      for (const [claim, what] of [[SCALE_BOUND, 'the bound'], [-SCALE_BOUND, 'a negative magnitude']] as const) {
        // Rank 3 adds its claim to every block's magnitude before the class sums them.
        const quantized = collectives(mesh, n, wordBits, (inner, r) => (r !== 3 ? inner : hostile(inner, COLLECTIVE_TAG.gradientScales, (scales) => scales.fill(claim))));
        assertRefusedByAll(await sumOn(quantized, inputs, 1, mesh === 'hub' ? 'hub' : 'ring'), `${wordBits} bits, rank 3 claims ${what}`);
      }
    }
  });
}

for (const mesh of MESHES) {
  test(`${mesh}: a rank whose words are past its clamp cannot wrap the sum: every rank refuses it with a code`, async () => {
    const n = 3;
    const head = BLOCK_FLOATS;
    // Every rank's values are 1/4, so each honest word is its cap, a third of the grid; rank 2
    // claims honestly but sends the largest positive word, and the sum would wrap negative.
    const inputs = Array.from({ length: n }, (_, r) => new Float32Array(head + TAIL).fill(0.25, 0, head).fill(r, head));
    for (const wordBits of [8, 16] as const) {
      const largest = 2 ** (wordBits - 1) - 1;
      const pastClamp = (words: Float32Array, tail: number) => void wordsOf(words).fill(largest, 0, words.length - tail);
      const quantized = collectives(mesh, n, wordBits, (inner, r) => (r !== 2 ? inner : hostile(inner, COLLECTIVE_TAG.gradients, pastClamp)));
      assertRefusedByAll(await sumOn(quantized, inputs, 1, mesh === 'hub' ? 'hub' : 'ring'), `${wordBits} bits, rank 2 sends ${largest}`);
    }
  });
}
