/**
 * The automatic choice between the ring and halving-doubling: the α-β model's predictions,
 * the decision at the crossover, and trainers that measure their links, agree on the model
 * through the gradient tail and switch algorithm together, staying bit-identical.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { chooseAlgorithm, predictAllReduceMs, type LinkModel } from '../../shared/collective-choice';
import { packMnistFromPackage } from '../../signaling-server/mnist-pack';
import { createMemoryMesh } from '../support/memory-ring';
import { Trainer } from '../../shared/trainer';
import { startConfigSchema } from '../../shared/protocol';
import type { MnistDataset } from '../../shared/mnist-format';

const KB = 1024;
// 1 ms per hop and 10 MB/s: a loaded classroom Wi-Fi.
const WIFI: LinkModel = { alphaMs: 1, betaBytesPerMs: 10_000 };

test('the model: ring hops 2(N-1)·α, halving-doubling 2·log2 N·α, the same bandwidth term at a power of two', () => {
  assert.equal(predictAllReduceMs('ring', 16, 0, WIFI), 30);
  assert.equal(predictAllReduceMs('halving-doubling', 16, 0, WIFI), 8);
  const bytes = 1_600_000;
  const bandwidthMs = ((2 * 15) / 16) * (bytes / WIFI.betaBytesPerMs);
  assert.equal(predictAllReduceMs('ring', 16, bytes, WIFI), 30 + bandwidthMs);
  assert.equal(predictAllReduceMs('halving-doubling', 16, bytes, WIFI), 8 + bandwidthMs);
  // N = 6 folds 2 extra ranks into 4: 2 more hops, and the whole buffer in and out.
  assert.equal(predictAllReduceMs('halving-doubling', 6, bytes, WIFI), 6 + 1.5 * 160 + 2 * 160);
});

test('auto picks halving-doubling for small buffers on many peers and the ring for big ones when N is not a power of two', () => {
  assert.equal(chooseAlgorithm('auto', 16, 128 * KB, WIFI, true), 'halving-doubling');
  assert.equal(chooseAlgorithm('auto', 30, 128 * KB, WIFI, true), 'halving-doubling');
  assert.equal(chooseAlgorithm('auto', 30, 16 * 1024 * KB, WIFI, true), 'ring');
  assert.equal(chooseAlgorithm('auto', 3, 4 * KB, WIFI, true), 'ring', 'N = 3: the same 4 hops, more bytes');
  assert.equal(chooseAlgorithm('auto', 2, 128 * KB, WIFI, true), 'ring', 'N = 2: the two are the same exchange; ties go to the ring');
  // The crossover for N = 6 sits where 4 hops saved pay for the fold: B = 4α·β / (2 + 1.5 - 5/3).
  const crossover = (4 * WIFI.alphaMs * WIFI.betaBytesPerMs) / (2 + 1.5 - 10 / 6);
  assert.equal(chooseAlgorithm('auto', 6, crossover * 0.9, WIFI, true), 'halving-doubling');
  assert.equal(chooseAlgorithm('auto', 6, crossover * 1.1, WIFI, true), 'ring');
});

test('without open partner links or a measured model, the choice is the ring; a fixed choice is honoured', () => {
  assert.equal(chooseAlgorithm('auto', 16, 128 * KB, WIFI, false), 'ring');
  assert.equal(chooseAlgorithm('halving-doubling', 16, 128 * KB, WIFI, false), 'ring');
  assert.equal(chooseAlgorithm('auto', 16, 128 * KB, null, true), 'ring');
  assert.equal(chooseAlgorithm('auto', 16, 128 * KB, { alphaMs: 0, betaBytesPerMs: 1 }, true), 'ring');
  assert.equal(chooseAlgorithm('halving-doubling', 30, 16 * 1024 * KB, WIFI, true), 'halving-doubling');
  assert.equal(chooseAlgorithm('ring', 16, 128 * KB, WIFI, true), 'ring');
});

let dataset: MnistDataset;
before(async () => {
  await tf.setBackend('cpu');
  dataset = packMnistFromPackage();
});

test('trainers measure their links, agree on the model in the tail, switch to halving-doubling together and stay bit-identical', async () => {
  const n = 4;
  const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'adam', batchSizePerWorker: 8, seed: 5, allreduce: 'auto' });
  const { rings } = createMemoryMesh(n);
  const trainers = rings.map((ring) => new Trainer(config, dataset, ring));
  const links = await Promise.all(trainers.map((t) => t.measureLinks(0)));
  for (const link of links) assert.ok(link && link.alphaMs > 0 && link.betaBytesPerMs > 0, `measured ${JSON.stringify(link)}`);

  const algorithms: string[] = [];
  for (let step = 0; step < 4; step++) {
    // Rank 2's partner links are not all open before step 2: the ring until everyone votes ready.
    const results = await Promise.all(trainers.map((t, r) => t.trainStep({ meshReady: step >= 2 || r !== 2 })));
    for (const r of results) {
      assert.equal(r.algorithm, results[0]!.algorithm);
      assert.deepEqual(r.link, results[0]!.link, 'every replica holds the same agreed model');
      assert.ok(r.timing.commMs >= 0 && r.timing.computeMs > 0);
    }
    algorithms.push(results[0]!.algorithm);
    const hashes = new Set(await Promise.all(trainers.map((t) => t.weightsHash())));
    assert.equal(hashes.size, 1, `step ${step}: replicas differ`);
  }
  // Step 0 runs before any agreed model; steps 1 and 2 follow a step with a rank not ready.
  assert.deepEqual(algorithms, ['ring', 'ring', 'ring', 'halving-doubling']);
  for (const t of trainers) t.dispose();
});
