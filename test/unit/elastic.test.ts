/**
 * The elastic ring's bookkeeping, without browsers: the data cursor through joins, leaves
 * and aborted steps, and the hand-over of a live replica's whole state to survivors and
 * joiners of a new generation.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { mnistShards } from '../support/mnist';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { mnistSubset } from '../support/mnist';
import { advance, nextBatch, type DataCursor } from '../../shared/data/batch-plan';
import { EpochPermutation } from '../../shared/data/sharding';
import { Trainer } from '../../shared/training/trainer';

import type { LoadedDataset } from '../../shared/tasks/task';
import { mulberry32 } from '../../shared/util/random';
import { createMemoryRing } from '../support/memory-ring';
import type { FaultInjector } from '../../shared/training/faults';

/** Nudges the weights once, just before `step`: numeric drift between backends. */
const driftBefore = (at: number): FaultInjector => ({ driftBefore: (step) => step === at });

let dataset: LoadedDataset;

before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

test('through joins, leaves and aborted steps, every example of an epoch is trained exactly once', () => {
  const trainCount = 997; // prime: no world size divides it, so every epoch ends short
  const perWorker = 5;
  const perm = new EpochPermutation(trainCount, 9);
  const random = mulberry32(2024);
  const out = new Uint32Array(perWorker);
  // The shared state every generation starts from: the chief's cursor.
  let cursor: DataCursor = { epoch: 0, offset: 0 };
  let worldSize = 3;
  const applied = new Map<number, number[]>(); // epoch -> how often each example was applied
  let aborted = 0;
  let changes = 0;
  while (cursor.epoch < 4) {
    const batch = nextBatch(cursor, perWorker, worldSize, trainCount);
    const used: number[] = [];
    for (let r = 0; r < worldSize; r++) used.push(...perm.sliceInto(out, batch, r));
    const roll = random();
    if (roll < 0.15) {
      // A member vanished mid-all-reduce. Some replicas may have applied the step; the
      // survivors adopt the new chief's state, which either includes it or does not.
      aborted++;
      const chiefApplied = random() < 0.5;
      if (chiefApplied) record(applied, batch.epoch, used, trainCount);
      if (chiefApplied) cursor = advance(batch, trainCount);
      worldSize = Math.max(1, worldSize - 1);
      changes++;
      continue;
    }
    record(applied, batch.epoch, used, trainCount);
    cursor = advance(batch, trainCount);
    if (roll > 0.9) {
      // Joiners admitted at the step boundary (several at once, up to the room's cap).
      worldSize = Math.min(32, worldSize + 1 + Math.floor(random() * 3));
      changes++;
    }
  }
  assert.ok(aborted > 5 && changes > 20, `exercised ${aborted} aborted steps and ${changes} membership changes`);
  for (const [epoch, counts] of applied) {
    const wrong = counts.map((c, i) => [i, c]).filter(([, c]) => c !== 1);
    assert.deepEqual(wrong, [], `epoch ${epoch}: examples trained other than exactly once`);
  }
  assert.deepEqual([...applied.keys()], [0, 1, 2, 3]);
});

/** Adam's β powers and moments, concatenated: the replica's state between its weights and its iteration count. */
async function optimizerState(t: Trainer): Promise<Float32Array> {
  return (await t.replica.readState()).slice(t.parameterCount, t.replica.stateLength - 1);
}

/** The optimizer's iteration count: the last float of the replica's state. */
async function iterations(t: Trainer): Promise<number> {
  return (await t.replica.readState())[t.replica.stateLength - 1]!;
}

function record(applied: Map<number, number[]>, epoch: number, used: number[], trainCount: number): void {
  let counts = applied.get(epoch);
  if (!counts) applied.set(epoch, (counts = new Array<number>(trainCount).fill(0)));
  for (const i of used) counts[i]!++;
}

test('a new generation adopts the chief state: survivors and joiners end bit-identical with weights, Adam state and cursor', async () => {
  const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'adam', learningRate: 0.001, batchSizePerWorker: 8, seed: 3 });
  const first = createMemoryRing(3, { generation: 1 });
  // Rank 1 drifts in its second step (as a WebGL replica might against WebGPU).
  const trainers = first.rings.map((ring, r) => new Trainer(config, mnistShards(config, dataset), ring, r === 1 ? { faults: driftBefore(1) } : {}));
  // Same seed, same weights: the agreement check finds nothing to send.
  assert.deepEqual(await Promise.all(trainers.map((t) => t.syncState())), [0, 0, 0]);
  for (let s = 0; s < 2; s++) await Promise.all(trainers.map((t) => t.trainStep()));

  // Rank 2 leaves; rank 1 has drifted. Two joiners arrive with fresh models and optimizers.
  // The new ring: survivors in order, then joiners.
  assert.notEqual(await trainers[1]!.weightsHash(), await trainers[0]!.weightsHash(), 'rank 1 drifted');
  const leaver = trainers.pop()!;
  leaver.dispose();
  const joiners = [0, 1].map(() => new Trainer(config, mnistShards(config, dataset), createMemoryRing(1).rings[0]!));
  const ring = [...trainers, ...joiners];
  const second = createMemoryRing(ring.length, { generation: 2 });
  ring.forEach((t, r) => t.setCollective(second.rings[r]!));
  const chiefHash = await trainers[0]!.weightsHash();
  const chiefOptimizer = await optimizerState(trainers[0]!);
  const fresh = await optimizerState(joiners[0]!);
  assert.ok(chiefOptimizer.slice(2).some((x) => x !== 0) && fresh.slice(2).every((x) => x === 0), 'the joiner starts with empty moments');
  // One joiner rehearses a step first (as a joiner does while the class votes it in): the hand-over replaces all of it.
  await joiners[0]!.rehearse();
  assert.equal(await iterations(joiners[0]!), 1);
  const tensorsBefore = tf.memory().numTensors;
  assert.deepEqual(await Promise.all(ring.map((t) => t.syncState())), [3, 3, 3, 3], 'the drifted rank and both joiners took the state');
  assert.equal(tf.memory().numTensors, tensorsBefore, 'the hand-over leaks no tensors');
  assert.deepEqual(await Promise.all(ring.map((t) => t.weightsHash())), ring.map(() => chiefHash));
  assert.deepEqual(ring.map((t) => t.step), [2, 2, 2, 2]);
  assert.deepEqual(ring.map((t) => t.dataCursor), ring.map(() => ({ epoch: 0, offset: 48 })));
  assert.deepEqual(await Promise.all(ring.map(iterations)), [2, 2, 2, 2]);
  for (const t of ring) assert.ok(Buffer.from((await optimizerState(t)).buffer).equals(Buffer.from(chiefOptimizer.buffer)), 'Adam moments and beta powers came along');

  // Training on stays bit-identical (the optimizer state came along), and the hash check passes.
  const results = [];
  for (let s = 0; s < 9; s++) results.push(await Promise.all(ring.map((t) => t.trainStep())));
  const hashes = new Set(await Promise.all(ring.map((t) => t.weightsHash())));
  assert.equal(hashes.size, 1);
  const checked = results.flat().filter((r) => r.hashChecked);
  assert.ok(checked.length === 4 && checked.every((r) => !r.hashMismatch), 'step 10 compared hashes and found them equal');
  for (const t of ring) t.dispose();
});

test('the ring agrees on drift and on admission: a drifted replica is caught at the next check and resynced', async () => {
  const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'sgd', learningRate: 0.1, batchSizePerWorker: 4, seed: 5 });
  const { rings } = createMemoryRing(3, { generation: 7 });
  // Rank 2 drifts just before step 3, after the admission votes.
  const ring = rings.map((r, rank) => new Trainer(config, mnistShards(config, dataset), r, rank === 2 ? { faults: driftBefore(3) } : {}));
  await Promise.all(ring.map((t) => t.syncState()));
  // Admission needs every replica ready for the same generation.
  const split = await Promise.all(ring.map((t, r) => t.trainStep({ readyFor: r === 2 ? null : 8 })));
  assert.ok(split.every((s) => !s.admit));
  const mixed = await Promise.all(ring.map((t, r) => t.trainStep({ readyFor: r === 2 ? 9 : 8 })));
  assert.ok(mixed.every((s) => !s.admit));
  const agreed = await Promise.all(ring.map((t) => t.trainStep({ readyFor: 8 })));
  assert.ok(agreed.every((s) => s.admit));

  let results = await Promise.all(ring.map((t) => t.trainStep()));
  while (!results[0]!.hashChecked) results = await Promise.all(ring.map((t) => t.trainStep()));
  assert.deepEqual(results.map((r) => [r.step, r.hashMismatch]), ring.map(() => [10, true]), 'every replica saw the mismatch at step 10');
  // Every rank reports every rank's compute time.
  assert.ok(results.every((r) => r.computeMs.length === 3 && r.computeMs.every((ms) => ms > 0)));
  assert.deepEqual(results[1]!.computeMs, results[0]!.computeMs);
  await Promise.all(ring.map((t) => t.syncState(t.step)));
  assert.equal(new Set(await Promise.all(ring.map((t) => t.weightsHash()))).size, 1);
  for (const t of ring) t.dispose();
});
