/**
 * The names task keeps everything the engine does for the digits: three replicas train it
 * with masked gradients (secure aggregation) in rounds of local steps with shares that
 * follow speed, end bit-identical, learn, and a checkpoint of the run restores exactly and
 * carries the task. (Every step, elastic rings, the data service and real workers: the
 * class test and the E2E.)
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { namesTask } from '../../shared/tasks/names/task';
import { FIRST_NAMES } from '../../shared/tasks/names/datasets';
import { featureCount, type LoadedDataset } from '../../shared/tasks/task';
import { inMemoryShards } from '../../shared/data/data-source';
import { loadDataset } from '../../signaling-server/data/datasets';
import { Trainer } from '../../shared/training/trainer';
import { applyCheckpoint, captureCheckpoint } from '../../shared/checkpoints/checkpoint-io';
import { createSecureMesh } from '../support/secure-ring';
import { createMemoryRing } from '../support/memory-ring';

let data: LoadedDataset;

before(async () => {
  await tf.setBackend('cpu');
  const all = await loadDataset(FIRST_NAMES);
  // Every 22nd training example, 2,400 of them from every part of the alphabet (the split is
  // sorted by name): rounds end with their epoch in a test's time.
  const f = featureCount(namesTask.example);
  const n = 2_400;
  const stride = Math.floor(all.train.count / n);
  const labels = new Uint8Array(n);
  const features = new Uint8Array(n * f);
  for (let i = 0; i < n; i++) {
    labels[i] = all.train.labels[i * stride]!;
    features.set(all.train.features.subarray(i * stride * f, (i * stride + 1) * f), i * f);
  }
  data = { train: { count: n, labels, features }, test: all.test };
});

test('names in secure local-steps rounds with balanced shares: replicas bit-identical, the loss falls, the checkpoint restores and names its task', async () => {
  const config = startConfigSchema.parse({ task: 'names', sync: 'local-steps', localSteps: 5, secureAggregation: true, balanceShares: true, batchSizePerWorker: 32, warmupSteps: 0, epochs: 2, seed: 9 });
  assert.deepEqual([config.wire, config.model, config.classes.length], ['fp32', 'char-mlp', 28]);
  const mesh = createSecureMesh(3);
  const trainers = mesh.secure.map((collective) => new Trainer(config, inMemoryShards(config, data, namesTask.example), collective));
  await Promise.all(trainers.map((t) => t.syncState()));
  const losses: number[] = [];
  while (!trainers[0]!.finished) {
    const results = await Promise.all(trainers.map((t) => t.trainStep()));
    assert.equal(new Set(results.map((r) => r.loss)).size, 1, 'every replica reads the same global loss');
    losses.push(results[0]!.loss);
  }
  // 2,400 examples at 3 × 32 are 25 steps an epoch: five rounds of five, two epochs.
  assert.deepEqual([trainers[0]!.round, trainers[0]!.step], [10, 50], 'rounds of local steps');
  assert.equal(new Set(await Promise.all(trainers.map((t) => t.weightsHash()))).size, 1, 'replicas end bit-identical');
  assert.ok(losses.at(-1)! < losses[0]! - 0.5, `loss ${losses[0]} -> ${losses.at(-1)}`);
  const scores = await Promise.all(trainers.map((t) => t.evaluate()));
  assert.equal(new Set(scores.map((s) => s!.loss)).size, 1);
  assert.ok(scores[0]!.loss < Math.log(28), `held out ${scores[0]!.loss} nats per character`);

  const captured = await captureCheckpoint(trainers[0]!, { room: 'r', run: 1, backend: 'cpu', members: [] });
  assert.deepEqual([captured.metadata.config.task, captured.metadata.config.model, captured.metadata.round], ['names', 'char-mlp', trainers[0]!.round]);
  const resumed = new Trainer(config, inMemoryShards(config, data, namesTask.example), createMemoryRing(1).rings[0]!);
  await applyCheckpoint(resumed, captured);
  assert.equal(await resumed.weightsHash(), await trainers[0]!.weightsHash());
  assert.deepEqual(resumed.dataCursor, trainers[0]!.dataCursor);
  for (const t of [...trainers, resumed]) await t.dispose();
});
