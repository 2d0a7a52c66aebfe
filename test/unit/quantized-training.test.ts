/**
 * Quantized sums in the trainer (start config's sumWordBits): three replicas on the digits,
 * every step in 8-bit words over the ring, and secure rounds of local steps whose PowerSGD
 * factors travel as masked 16-bit words, stay bit-identical after every sum, learn, leak no
 * tensor, and send the fraction of the bytes their words promise. The sum itself:
 * test/unit/quantized-sum.test.ts; the accuracy it keeps on the digits: bench:local-steps.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { createMemoryRing } from '../support/memory-ring';
import { createSecureMesh } from '../support/secure-ring';
import { train } from '../support/replica-training';

before(async () => {
  await tf.setBackend('cpu');
});

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

test('every step in 8-bit words: bit-identical replicas, the loss falls as with floats, and under 0.27 of the bytes', async () => {
  const base = { model: 'mlp', optimizer: 'sgd', learningRate: 0.1, warmupSteps: 0, batchSizePerWorker: 32, seed: 4 } as const;
  const runOf = async (sumWordBits: number) => {
    const ring = createMemoryRing(3);
    const bytes = () => ring.rings.reduce((s, r) => s + r.stats.bytesSent, 0);
    return train(startConfigSchema.parse({ ...base, sumWordBits }), ring.rings, bytes, 40);
  };
  const [whole, words] = [await runOf(0), await runOf(8)];
  const [late, lateWhole] = [mean(words.losses.slice(-10)), mean(whole.losses.slice(-10))];
  assert.ok(late < mean(words.losses.slice(0, 5)) * 0.6, `the loss fell: ${words.losses.map((l) => l.toFixed(2)).join(' ')}`);
  assert.ok(Math.abs(late - lateWhole) < 0.1 * lateWhole, `the last ten losses average ${late.toFixed(3)} in words, ${lateWhole.toFixed(3)} in floats`);
  assert.ok(words.bytes < whole.bytes * 0.27, `${words.bytes} bytes against ${whole.bytes} in float32`);
});

test('secure rounds of local steps, PowerSGD at rank 4 in 16-bit words: four masked sums a round, bit-identical replicas, the loss falls', async () => {
  const config = startConfigSchema.parse({ model: 'mlp', sync: 'local-steps', localSteps: 5, secureAggregation: true, batchSizePerWorker: 16, seed: 6, powerSgdRank: 4, sumWordBits: 16 });
  const mesh = createSecureMesh(3);
  const bytes = () => mesh.rings.reduce((s, r) => s + r.stats.bytesSent, 0);
  const { losses, bytes: sent } = await train(config, mesh.secure, bytes, 8);
  // Each of the factors' two sums: the scales, then the words, all masked.
  assert.deepEqual(mesh.aggregations.map((a) => [a.stats.sums, a.stats.clipped]), mesh.aggregations.map(() => [32, 0]));
  assert.ok(losses.at(-1)! < losses[0]! * 0.7, `the loss fell: ${losses.map((l) => l.toFixed(3)).join(' ')}`);
  const plain = createSecureMesh(3);
  const plainBytes = () => plain.rings.reduce((s, r) => s + r.stats.bytesSent, 0);
  const floats = await train({ ...config, sumWordBits: 0 }, plain.secure, plainBytes, 8);
  assert.ok(sent < floats.bytes * 0.6, `masked 16-bit words: ${sent} bytes against ${floats.bytes} as masked 32-bit fixed point`);
});

test('the start config takes 0 (floats, the default), 8 or 16 bits, and refuses anything else naming the field', () => {
  assert.equal(startConfigSchema.parse({}).sumWordBits, 0);
  assert.equal(startConfigSchema.parse({ sumWordBits: 8 }).sumWordBits, 8);
  for (const bad of [4, 32, 7.5, '8', -8]) {
    const r = startConfigSchema.safeParse({ sumWordBits: bad });
    assert.ok(!r.success && r.error.issues[0]!.path[0] === 'sumWordBits', String(bad));
  }
});
