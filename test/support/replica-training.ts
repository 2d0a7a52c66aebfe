/**
 * Replicas of the trainer on the digits over given collectives, for unit tests of what a
 * collective does to training (PowerSGD, quantized sums): they must stay bit-identical after
 * every turn and leak no tensor.
 */
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { Trainer } from '../../shared/training/trainer';
import type { Collective } from '../../shared/collectives/collective';
import type { StartConfig } from '../../shared/protocol';
import { mnistShards, mnistSubset } from './mnist';

export interface Trained {
  losses: number[];
  bytes: number;
}

/** `turns` turns of three replicas over `collectives`; asserts the replicas agree after every one. */
export async function train(config: StartConfig, collectives: readonly Collective[], bytesOf: () => number, turns: number): Promise<Trained> {
  const trainers = collectives.map((c) => new Trainer(config, mnistShards(config, mnistSubset()), c));
  await Promise.all(trainers.map((t) => t.syncState()));
  const bytes0 = bytesOf();
  const losses: number[] = [];
  let tensors = 0;
  for (let turn = 0; turn < turns; turn++) {
    const results = await Promise.all(trainers.map((t) => t.trainStep()));
    assert.equal(new Set(await Promise.all(trainers.map((t) => t.weightsHash()))).size, 1, `turn ${turn}: the replicas differ`);
    assert.ok(results.every((r) => !r.hashMismatch));
    losses.push(results[0]!.loss);
    if (turn === 0) tensors = tf.memory().numTensors;
  }
  assert.equal(tf.memory().numTensors, tensors, 'no tensor leaks across sums');
  const bytes = bytesOf() - bytes0;
  for (const t of trainers) await t.dispose();
  return { losses, bytes };
}

