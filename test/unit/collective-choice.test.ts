/**
 * The automatic choice between the ring and halving-doubling: the α-β model's predictions,
 * the decision at the crossover, and trainers that measure their links, agree on the models
 * through the gradient tail and switch algorithm together, staying bit-identical.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { mnistShards } from '../support/mnist';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { chooseAlgorithm, predictAllReduceMs, type LinkModel, type LinkModels } from '../../shared/collectives/choice';
import { mnistSubset } from '../support/mnist';
import { createMemoryMesh } from '../support/memory-ring';
import { Trainer } from '../../shared/training/trainer';

import type { LoadedDataset } from '../../shared/tasks/task';

const KB = 1024;
// 1 ms per hop and 10 MB/s: a loaded classroom Wi-Fi, the same for both algorithms.
const WIFI: LinkModel = { alphaMs: 1, betaBytesPerMs: 10_000 };
const SAME: LinkModels = { ring: WIFI, halvingDoubling: WIFI, hub: null };
/** Partner links open everywhere, no hub; and no partner links. */
const MESH = { mesh: true, hub: false };
const NO_MESH = { mesh: false, hub: false };

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
  assert.equal(chooseAlgorithm('auto', 16, 128 * KB, SAME, MESH), 'halving-doubling');
  assert.equal(chooseAlgorithm('auto', 30, 128 * KB, SAME, MESH), 'halving-doubling');
  assert.equal(chooseAlgorithm('auto', 30, 16 * 1024 * KB, SAME, MESH), 'ring');
  assert.equal(chooseAlgorithm('auto', 3, 4 * KB, SAME, MESH), 'ring', 'N = 3: the same 4 hops, more bytes');
  assert.equal(chooseAlgorithm('auto', 2, 128 * KB, SAME, MESH), 'ring', 'N = 2: the two are the same exchange; ties go to the ring');
  // The crossover for N = 6 sits where 4 hops saved pay for the fold: B = 4α·β / (2 + 1.5 - 5/3).
  const crossover = (4 * WIFI.alphaMs * WIFI.betaBytesPerMs) / (2 + 1.5 - 10 / 6);
  assert.equal(chooseAlgorithm('auto', 6, crossover * 0.9, SAME, MESH), 'halving-doubling');
  assert.equal(chooseAlgorithm('auto', 6, crossover * 1.1, SAME, MESH), 'ring');
});

test('measured per algorithm: halving-doubling links that carry less per ms lose big buffers even at a power of two', () => {
  // Its stages wait for whole halves, so its measured β is lower than the pipelined ring's.
  const models: LinkModels = { ring: WIFI, halvingDoubling: { alphaMs: 1.2, betaBytesPerMs: 6_000 }, hub: null };
  assert.equal(chooseAlgorithm('auto', 16, 128 * KB, models, MESH), 'halving-doubling');
  assert.equal(chooseAlgorithm('auto', 16, 512 * KB, models, MESH), 'ring');
});

test('without open partner links or measured models for both, the choice is the ring; a fixed choice is honoured', () => {
  assert.equal(chooseAlgorithm('auto', 16, 128 * KB, SAME, NO_MESH), 'ring');
  assert.equal(chooseAlgorithm('halving-doubling', 16, 128 * KB, SAME, NO_MESH), 'ring');
  assert.equal(chooseAlgorithm('auto', 16, 128 * KB, null, MESH), 'ring');
  assert.equal(chooseAlgorithm('auto', 16, 128 * KB, { ring: WIFI, halvingDoubling: null, hub: null }, MESH), 'ring');
  assert.equal(chooseAlgorithm('auto', 16, 128 * KB, { ring: WIFI, halvingDoubling: { alphaMs: 0, betaBytesPerMs: 1 }, hub: null }, MESH), 'ring');
  assert.equal(chooseAlgorithm('halving-doubling', 30, 16 * 1024 * KB, SAME, MESH), 'halving-doubling');
  assert.equal(chooseAlgorithm('ring', 16, 128 * KB, SAME, MESH), 'ring');
});

let dataset: LoadedDataset;
before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

for (const allreduce of ['halving-doubling', 'auto'] as const) {
  test(`trainers (${allreduce}) measure once every partner link is open, agree in the tail, switch together and stay bit-identical`, async () => {
    const n = 4;
    const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'adam', batchSizePerWorker: 8, seed: 5, allreduce });
    const { rings } = createMemoryMesh(n);
    const trainers = rings.map((ring) => new Trainer(config, mnistShards(config, dataset), ring));
    const algorithms: string[] = [];
    const measuredBefore: number[] = [];
    for (let step = 0; step < 5; step++) {
      if (trainers[0]!.measureDue) {
        assert.ok(trainers.every((t) => t.measureDue), 'every replica sees the same tail');
        measuredBefore.push(step);
        const models = await Promise.all(trainers.map((t) => t.measureLinks()));
        for (const m of models) assert.ok(m.ring!.alphaMs > 0 && m.halvingDoubling!.betaBytesPerMs > 0, JSON.stringify(m));
      }
      // Rank 2's partner links open only before step 2: the ring until everyone votes ready.
      const results = await Promise.all(trainers.map((t, r) => t.trainStep({ meshReady: step >= 2 || r !== 2 })));
      for (const r of results) {
        assert.equal(r.algorithm, results[0]!.algorithm);
        assert.deepEqual(r.models, results[0]!.models, 'every replica holds the same agreed models');
        assert.ok(r.timing.commMs >= 0 && r.timing.computeMs > 0);
      }
      algorithms.push(results[0]!.algorithm);
      const hashes = new Set(await Promise.all(trainers.map((t) => t.weightsHash())));
      assert.equal(hashes.size, 1, `step ${step}: replicas differ`);
    }
    // Step 2 is the first with every vote ready; the links are measured once, before step 3.
    assert.deepEqual(measuredBefore, [3]);
    assert.deepEqual(algorithms.slice(0, 3), ['ring', 'ring', 'ring']);
    if (allreduce === 'halving-doubling') assert.deepEqual(algorithms.slice(3), ['halving-doubling', 'halving-doubling']);
    for (const t of trainers) t.dispose();
  });
}
