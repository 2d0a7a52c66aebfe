/**
 * PowerSGD in the trainer (start config's powerSgdRank): three replicas on the digits, every
 * step over the ring and in secure rounds of local steps over masked words, stay
 * bit-identical after every sum, learn, leak no tensor, and send a fraction of the bytes of
 * the same run whole. The factored sum itself: test/unit/power-sgd.test.ts.
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

test('every step with PowerSGD at rank 4: bit-identical replicas, the loss falls, and under a tenth of the bytes', async () => {
  const base = { model: 'mlp', optimizer: 'sgd', learningRate: 0.1, warmupSteps: 0, batchSizePerWorker: 32, seed: 4 } as const;
  const runOf = async (powerSgdRank: number) => {
    const ring = createMemoryRing(3);
    const bytes = () => ring.rings.reduce((s, r) => s + r.stats.bytesSent, 0);
    return train(startConfigSchema.parse({ ...base, powerSgdRank }), ring.rings, bytes, 40);
  };
  const [whole, factored] = [await runOf(0), await runOf(4)];
  assert.ok(mean(factored.losses.slice(-10)) < mean(factored.losses.slice(0, 5)) * 0.6, `the loss fell: ${factored.losses.map((l) => l.toFixed(2)).join(' ')}`);
  assert.ok(factored.bytes < whole.bytes / 10, `${factored.bytes} bytes against ${whole.bytes} whole`);
});

test('secure rounds of local steps with PowerSGD at rank 4: both sums masked, the replicas bit-identical after every round, the loss falls', async () => {
  const config = startConfigSchema.parse({ model: 'mlp', sync: 'local-steps', localSteps: 5, secureAggregation: true, batchSizePerWorker: 16, seed: 6, powerSgdRank: 4 });
  assert.deepEqual([config.wire, config.powerSgdRank], ['fp32', 4]);
  const mesh = createSecureMesh(3);
  const { losses } = await train(config, mesh.secure, () => 0, 8);
  // Both of a round's sums were masked (two secure sums a round), none clipped.
  assert.deepEqual(mesh.aggregations.map((a) => [a.stats.sums, a.stats.clipped]), mesh.aggregations.map(() => [16, 0]));
  assert.ok(losses.at(-1)! < losses[0]! * 0.7, `the loss fell: ${losses.map((l) => l.toFixed(3)).join(' ')}`);
});

test('the start config takes a rank from 0 (whole, the default) to 64, and refuses anything else naming the field', () => {
  assert.equal(startConfigSchema.parse({}).powerSgdRank, 0);
  for (const bad of [-1, 65, 2.5, '8']) {
    const r = startConfigSchema.safeParse({ powerSgdRank: bad });
    assert.ok(!r.success && r.error.issues[0]!.path[0] === 'powerSgdRank', String(bad));
  }
});
