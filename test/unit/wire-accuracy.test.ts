/**
 * The fp16 wire format must not cost accuracy. Two ring workers train the MLP for
 * one epoch of the real MNIST digits, once with fp32 and once with fp16 on the wire, from
 * the same seed; test accuracy after the epoch must agree within 0.5 percentage points.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { mnistShards } from '../support/mnist';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { mnistSubset } from '../support/mnist';
import { createMemoryRing } from '../support/memory-ring';
import { Trainer } from '../../shared/training/trainer';
import { type WireFormat } from '../../shared/protocol';
import type { LoadedDataset } from '../../shared/tasks/task';
import type { Collective } from '../../shared/collectives/collective';
import { COLLECTIVE_TAG } from '../../shared/collectives/collective';
import { WebringError } from '../../shared/protocol/errors';

const WORKERS = 2;
const MAX_ACCURACY_GAP = 0.005;
let dataset: LoadedDataset;

before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

interface EpochResult {
  accuracy: number;
  steps: number;
  bytesPerRank: number;
  weightsHash: string;
  seconds: number;
}

async function trainOneEpoch(wire: WireFormat): Promise<EpochResult> {
  const t0 = performance.now();
  const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'adam', learningRate: 0.001, batchSizePerWorker: 32, epochs: 1, seed: 11, wire });
  const { rings } = createMemoryRing(WORKERS);
  const trainers = rings.map((ring) => new Trainer(config, mnistShards(config, dataset), ring));
  let steps = 0;
  while (!trainers[0]!.finished) {
    const results = await Promise.all(trainers.map((t) => t.trainStep()));
    // The votes in the tail stay exact, so the weights-hash check sees bit-identical replicas.
    for (const r of results) assert.ok(!r.hashMismatch, `${wire}: replicas differ at step ${r.step}`);
    steps++;
  }
  const accuracies = (await Promise.all(trainers.map((t) => t.evaluate()))).map((s) => s!.accuracy);
  assert.equal(accuracies[0], accuracies[1]);
  const hashes = await Promise.all(trainers.map((t) => t.weightsHash()));
  assert.equal(hashes[0], hashes[1], `${wire}: replicas end bit-identical`);
  const bytesPerRank = rings[0]!.stats.bytesSent;
  assert.equal(rings[0]!.stats.fp16Overflows, 0);
  for (const t of trainers) t.dispose();
  return { accuracy: accuracies[0]!, steps, bytesPerRank, weightsHash: hashes[0]!, seconds: (performance.now() - t0) / 1000 };
}

test('one epoch with fp16 on the wire reaches the fp32 test accuracy within 0.5 points', async () => {
  const fp32 = await trainOneEpoch('fp32');
  const fp16 = await trainOneEpoch('fp16');
  console.log(
    `fp32: ${(100 * fp32.accuracy).toFixed(2)}% after ${fp32.steps} steps, ${fp32.bytesPerRank} B sent per rank, ${fp32.seconds.toFixed(1)} s; ` +
      `fp16: ${(100 * fp16.accuracy).toFixed(2)}% after ${fp16.steps} steps, ${fp16.bytesPerRank} B sent per rank, ${fp16.seconds.toFixed(1)} s`,
  );
  assert.equal(fp16.steps, fp32.steps);
  assert.notEqual(fp16.weightsHash, fp32.weightsHash, 'the fp16 run really rounded its gradients');
  assert.ok(fp32.accuracy > 0.8, `fp32 learned: ${fp32.accuracy}`);
  assert.ok(Math.abs(fp16.accuracy - fp32.accuracy) <= MAX_ACCURACY_GAP, `fp32 ${fp32.accuracy} vs fp16 ${fp16.accuracy}`);
  assert.ok(fp16.bytesPerRank <= 0.52 * fp32.bytesPerRank);
});

test('a gradient that overflowed the fp16 wire fails the step before it is applied', async () => {
  // A one-rank collective that overflows the first gradient, as a sum beyond ±65504 would.
  const overflowing: Collective = {
    rank: 0,
    worldSize: 1,
    allReduce: async (buf, _step, tag, options) => {
      if (tag === COLLECTIVE_TAG.gradients && options?.wire === 'fp16') buf[0] = Infinity;
    },
    // One rank: a broadcast has nobody to copy to.
    broadcast: async () => {},
  };
  const config = startConfigSchema.parse({ model: 'mlp', batchSizePerWorker: 4, seed: 2, wire: 'fp16' });
  const trainer = new Trainer(config, mnistShards(config, dataset), overflowing);
  const before = await trainer.weightsHash();
  await assert.rejects(trainer.trainStep(), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA' && /fp16/.test(e.message));
  assert.equal(await trainer.weightsHash(), before, 'nothing was applied');
  assert.equal(trainer.step, 0);
  trainer.dispose();
});
