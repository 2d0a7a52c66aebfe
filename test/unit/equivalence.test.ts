/**
 * The proof that the ring is real data parallelism: 3 workers training K steps over the
 * ring end with the same weights as 1 worker training on the same global batches.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { mnistShards } from '../support/mnist';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { mnistSubset } from '../support/mnist';
import { createMemoryRing } from '../support/memory-ring';
import { Trainer } from '../../shared/training/trainer';

import type { LoadedDataset } from '../../shared/tasks/task';

const STEPS = 6;
const WORKERS = 3;
const PER_WORKER = 16;
let dataset: LoadedDataset;

before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

// The CNN is slow on Node's pure-JS CPU backend, so it runs fewer, smaller steps.
for (const [model, optimizer, learningRate, steps, perWorker] of [
  ['mlp', 'sgd', 0.1, STEPS, PER_WORKER],
  ['mlp', 'adam', 0.001, STEPS, PER_WORKER],
  ['cnn', 'adam', 0.003, 3, 6],
] as const) {
  test(`${WORKERS} ring workers equal 1 worker on the global batch (${model}, ${optimizer})`, async () => {
    const config = startConfigSchema.parse({ model, optimizer, learningRate, batchSizePerWorker: perWorker, seed: 7 });
    const { rings } = createMemoryRing(WORKERS);
    const ringTrainers = rings.map((ring) => new Trainer(config, mnistShards(config, dataset), ring));
    const single = new Trainer({ ...config, batchSizePerWorker: perWorker * WORKERS }, mnistShards({ ...config, batchSizePerWorker: perWorker * WORKERS }, dataset), createMemoryRing(1).rings[0]!);

    let tensorsAfterFirstStep = 0;
    let firstLoss = 0;
    let lastLoss = 0;
    for (let s = 0; s < steps; s++) {
      const results = await Promise.all(ringTrainers.map((t) => t.trainStep()));
      const reference = await single.trainStep();
      // Every replica agrees on the global metrics, and they match the single worker's.
      for (const r of results) {
        assert.equal(r.loss, results[0]!.loss);
        assert.ok(Math.abs(r.loss - reference.loss) < 1e-5, `loss ${r.loss} vs ${reference.loss}`);
        assert.equal(r.trainAccuracy, reference.trainAccuracy);
        assert.ok(r.gradNorm > 0, 'gradient norm must be above zero');
      }
      // Adam creates its moment slots on the first step; after that the count must stay flat.
      if (s === 0) {
        firstLoss = reference.loss;
        tensorsAfterFirstStep = tf.memory().numTensors;
      }
      lastLoss = reference.loss;
    }
    assert.equal(tf.memory().numTensors, tensorsAfterFirstStep, 'no tensors leak across steps');

    const want = await single.readWeights();
    const hashes = new Set<string>();
    for (const t of ringTrainers) {
      const got = await t.readWeights();
      let maxDiff = 0;
      for (let i = 0; i < want.length; i++) maxDiff = Math.max(maxDiff, Math.abs(got[i]! - want[i]!));
      assert.ok(maxDiff <= 1e-5, `max abs difference ${maxDiff}`);
      hashes.add(await t.weightsHash());
    }
    assert.equal(hashes.size, 1, 'replicas are bit-identical');
    assert.ok(lastLoss < firstLoss, `loss fell from ${firstLoss} to ${lastLoss}`);
    for (const t of [...ringTrainers, single]) t.dispose();
  });
}

test('after syncState every replica trains on from rank 0 state, and evaluation agrees', async () => {
  const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'sgd', learningRate: 0.1, batchSizePerWorker: 8, seed: 1 });
  const { rings } = createMemoryRing(3);
  const trainers = rings.map((ring) => new Trainer(config, mnistShards(config, dataset), ring));
  // Replicas 1 and 2 start from other weights, as a late joiner or a drifted replica would.
  for (const [i, t] of trainers.slice(1).entries()) {
    const state = await t.replica.readState();
    for (let p = 0; p < t.parameterCount; p++) state[p]! *= i + 2;
    await t.replica.writeState(state);
  }
  // The ranks that took the state sit the first step out (Trainer.sitOutFrom): that step is
  // rank 0's slice, 8 examples, and the steps after it are whole global batches of 24.
  const firstStep = new Trainer(config, mnistShards(config, dataset), createMemoryRing(1).rings[0]!);
  const reference = new Trainer({ ...config, batchSizePerWorker: 24 }, mnistShards({ ...config, batchSizePerWorker: 24 }, dataset), createMemoryRing(1).rings[0]!);
  const before = await Promise.all(trainers.map((t) => t.weightsHash()));
  assert.equal(new Set(before).size, 3);
  await Promise.all(trainers.map((t) => t.syncState()));
  const after = await Promise.all(trainers.map((t) => t.weightsHash()));
  assert.deepEqual(after, [before[0], before[0], before[0]]);
  assert.equal(after[0], await reference.weightsHash());

  // The worker's sequence: a step, an epoch-end evaluation, the next step. The synced
  // weights must stay the replica's own (no aliasing of the reused all-reduce buffer).
  const first = await Promise.all(trainers.map((t) => t.trainStep()));
  assert.deepEqual(first.map((r) => r.examples), [8, 0, 0], 'the replicas that took the state sit the first step out');
  await firstStep.trainStep();
  await reference.replica.writeState(await firstStep.replica.readState());
  reference.setPosition(firstStep.step, firstStep.dataCursor);
  const scores = await Promise.all(trainers.map((t) => t.evaluate()));
  const accuracies = scores.map((s) => s!.accuracy);
  assert.equal(new Set(accuracies).size, 1);
  assert.equal(new Set(scores.map((s) => s!.loss)).size, 1, 'every replica scores the same held-out loss');
  assert.ok(accuracies[0]! >= 0 && accuracies[0]! <= 1);
  assert.ok(scores[0]!.loss > 0 && scores[0]!.loss < Math.log(10) * 2, `held-out loss ${scores[0]!.loss} nats per example`);
  const next = await Promise.all(trainers.map((t) => t.trainStep()));
  await reference.trainStep();
  assert.ok(next.every((r) => r.step === 1));
  const want = await reference.readWeights();
  for (const t of trainers) {
    const got = await t.readWeights();
    let maxDiff = 0;
    for (let i = 0; i < want.length; i++) maxDiff = Math.max(maxDiff, Math.abs(got[i]! - want[i]!));
    assert.ok(maxDiff <= 1e-5, `max abs difference ${maxDiff}`);
  }
  for (const t of [...trainers, reference, firstStep]) t.dispose();
});

test('a stop requested by any one replica stops all of them after the same step', async () => {
  const config = startConfigSchema.parse({ model: 'mlp', batchSizePerWorker: 4 });
  const { rings } = createMemoryRing(3);
  const trainers = rings.map((ring) => new Trainer(config, mnistShards(config, dataset), ring));
  const first = await Promise.all(trainers.map((t) => t.trainStep()));
  assert.ok(first.every((r) => !r.stop));
  const second = await Promise.all(trainers.map((t, r) => t.trainStep({ requestStop: r === 2 })));
  assert.ok(second.every((r) => r.stop && r.step === 1));
  for (const t of trainers) t.dispose();
});
