/**
 * The learning rate of every step (shared/training/lr-schedule.ts): the recipe's warm-up,
 * linear scaling with the global batch, a resize that moves the rate over 20 steps instead
 * of jumping, and the ramp travelling with the state hand-over and the checkpoints, so a
 * joiner and a resumed class apply exactly the chief's rate. And that both optimizers
 * really take the rate that is set (one that is set but not read would leave a run at full
 * speed from its first step, or stuck at a tiny one).
 */
import { DEFAULT_START_CONFIG, startConfigSchema } from '../../shared/tasks/start-config';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { buildOptimizer, setLearningRate } from '../../shared/compute/models';
import { LearningRateSchedule, RESCALE_RAMP_STEPS } from '../../shared/training/lr-schedule';

import { Trainer } from '../../shared/training/trainer';
import { mnistShards } from '../support/mnist';
import { applyCheckpoint } from '../../shared/checkpoints/checkpoint-io';
import { createMemoryRing } from '../support/memory-ring';
import { capture, mnist } from '../support/checkpoint-fixture';
import type { LoadedDataset } from '../../shared/tasks/task';

let dataset: LoadedDataset;
before(async () => {
  await tf.setBackend('cpu');
  dataset = await mnist();
});

const f = Math.fround;

test('the warm-up climbs linearly to the base rate over its steps, then stays; without scaling the class size does not matter', () => {
  const schedule = new LearningRateSchedule({ learningRate: 0.003, warmupSteps: 50, scaleLearningRate: false, referenceBatch: 32 });
  assert.equal(schedule.rateAt(0, 32), (f(0.003) * 1) / 50);
  assert.equal(schedule.rateAt(24, 32), (f(0.003) * 25) / 50);
  assert.equal(schedule.rateAt(49, 32), f(0.003));
  assert.equal(schedule.rateAt(50, 256), f(0.003), 'eight times the batch, the same rate');
  assert.equal(schedule.rateAt(10_000, 32), f(0.003));
  assert.deepEqual([DEFAULT_START_CONFIG.learningRate, DEFAULT_START_CONFIG.warmupSteps, DEFAULT_START_CONFIG.batchSizePerWorker, DEFAULT_START_CONFIG.scaleLearningRate], [0.003, 50, 32, false]);
});

test('with scaling, the rate follows the global batch, and a resize moves it over 20 steps without a jump', () => {
  const schedule = new LearningRateSchedule({ learningRate: 0.001, warmupSteps: 0, scaleLearningRate: true, referenceBatch: 32 });
  assert.equal(schedule.rateAt(0, 128), f(0.004), '4 workers × 32 against a reference of 32');
  assert.equal(schedule.rateAt(199, 128), f(0.004));
  // Four more students join at step 200: 256 examples a step, so the target doubles.
  const rates: number[] = [];
  for (let step = 200; step <= 200 + RESCALE_RAMP_STEPS; step++) rates.push(schedule.rateAt(step, 256));
  assert.equal(rates[0], f(0.004), 'the step of the resize still applies the old rate');
  assert.equal(rates.at(-1), f(0.008), 'after 20 steps the new one');
  for (let i = 1; i < rates.length; i++) {
    const rise = rates[i]! - rates[i - 1]!;
    assert.ok(rise > 0 && rise <= f(0.004) / RESCALE_RAMP_STEPS + 1e-12, `step ${200 + i}: +${rise}`);
  }
  // Half of a growing class leaves mid-ramp: the rate turns from where it is, not from either end.
  const again = new LearningRateSchedule({ learningRate: 0.001, warmupSteps: 0, scaleLearningRate: true, referenceBatch: 32 });
  again.rateAt(0, 128);
  again.rateAt(10, 256);
  assert.ok(Math.abs(again.rateAt(15, 256) - 0.005) < 1e-9, 'a quarter of the way from 0.004 to 0.008');
  const turned = again.rateAt(16, 64);
  assert.ok(Math.abs(turned - 0.0052) < 1e-9, `the turn starts at the ramp's 0.0052, got ${turned}`);
  assert.equal(again.rateAt(16 + RESCALE_RAMP_STEPS, 64), f(0.002));
});

test('a joiner mid-ramp receives the ramp with the state and applies the same rates; a checkpoint carries it too', async () => {
  const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'adam', learningRate: 0.001, warmupSteps: 0, scaleLearningRate: true, referenceBatch: 8, batchSizePerWorker: 8, seed: 5 });
  const first = createMemoryRing(2, { generation: 1 });
  const pair = first.rings.map((ring) => new Trainer(config, mnistShards(config, dataset), ring));
  for (let s = 0; s < 3; s++) await Promise.all(pair.map((t) => t.trainStep()));
  // A third replica joins: the global batch goes from 16 to 24 and the rate starts to move.
  const joiner = new Trainer(config, mnistShards(config, dataset), createMemoryRing(1).rings[0]!);
  const trio = [...pair, joiner];
  const second = createMemoryRing(3, { generation: 2 });
  trio.forEach((t, r) => t.setCollective(second.rings[r]!));
  assert.deepEqual(await Promise.all(trio.map((t) => t.syncState())), [1, 1, 1], 'the joiner alone took the state');
  assert.deepEqual(joiner.schedule.state, pair[0]!.schedule.state, 'the ramp came with the state');
  const seen: number[][] = [];
  for (let s = 0; s < 4; s++) seen.push((await Promise.all(trio.map((t) => t.trainStep()))).map((r) => r.learningRate));
  for (const rates of seen) assert.equal(new Set(rates).size, 1, `every replica applies one rate: ${rates}`);
  assert.ok(seen[0]![0]! < seen[3]![0]! && seen[3]![0]! < f(0.003), `the rate climbs from 0.002 toward 0.003: ${seen.map((r) => r[0])}`);
  const hashes = new Set(await Promise.all(trio.map((t) => t.weightsHash())));
  assert.equal(hashes.size, 1);

  // The chief's checkpoint holds the ramp; a replica restored from it applies the chief's next rate.
  const checkpoint = await capture(trio[0]!, 'ramp-room');
  assert.deepEqual(checkpoint.metadata.learningRateRamp, trio[0]!.schedule.state);
  const restored = new Trainer(config, mnistShards(config, dataset), createMemoryRing(1).rings[0]!);
  await applyCheckpoint(restored, checkpoint);
  assert.deepEqual(restored.schedule.state, trio[0]!.schedule.state);
  assert.equal(restored.schedule.rateAt(restored.step, 24), trio[0]!.schedule.rateAt(trio[0]!.step, 24));
  for (const t of [...trio, restored]) t.dispose();
});

test('SGD and Adam both update with the rate set between steps', () => {
  for (const kind of ['sgd', 'adam'] as const) {
    const optimizer = buildOptimizer(kind, 1);
    const w = tf.variable(tf.scalar(0));
    const step = (rate: number): number => {
      setLearningRate(optimizer, rate);
      const before = w.dataSync()[0]!;
      optimizer.applyGradients({ [w.name]: tf.scalar(1) });
      return before - w.dataSync()[0]!;
    };
    // SGD moves by rate × gradient; Adam's update is about the rate for a steady gradient.
    assert.ok(Math.abs(step(0.01) - 0.01) < 1e-4, `${kind} at 0.01`);
    assert.ok(Math.abs(step(0.5) - 0.5) < 1e-3, `${kind} at 0.5`);
    optimizer.dispose();
    w.dispose();
  }
});
