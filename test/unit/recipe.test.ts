/**
 * The default recipe's learning-rate warm-up: the schedule itself, and that both optimizers
 * really take the rate it sets (a rate that is set but not read would leave a run at full
 * speed from its first step, or stuck at a tiny one).
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { buildOptimizer, learningRateAt, setLearningRate } from '../../shared/training/models';
import { DEFAULT_START_CONFIG } from '../../shared/protocol';

before(async () => {
  await tf.setBackend('cpu');
});

test('the warm-up climbs linearly to the base rate over its steps, then stays', () => {
  assert.equal(learningRateAt(0.003, 50, 0), 0.003 / 50);
  assert.equal(learningRateAt(0.003, 50, 24), (0.003 * 25) / 50);
  assert.equal(learningRateAt(0.003, 50, 49), 0.003);
  assert.equal(learningRateAt(0.003, 50, 50), 0.003);
  assert.equal(learningRateAt(0.003, 50, 10_000), 0.003);
  assert.equal(learningRateAt(0.003, 0, 0), 0.003, 'no warm-up: full rate from the first step');
  assert.deepEqual([DEFAULT_START_CONFIG.learningRate, DEFAULT_START_CONFIG.warmupSteps, DEFAULT_START_CONFIG.batchSizePerWorker], [0.003, 50, 32]);
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
