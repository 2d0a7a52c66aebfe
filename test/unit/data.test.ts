import { test } from 'node:test';
import assert from 'node:assert/strict';
import { packMnistFromPackage } from '../../signaling-server/data/mnist-pack';
import { decodeMnist, encodeMnist, MNIST_PIXELS } from '../../shared/data/mnist-format';
import { advance, cutBatch, nextBatch, shardOf } from '../../shared/data/batch-plan';
import { EpochPermutation, stepsPerEpoch } from '../../shared/data/sharding';
import { WebringError } from '../../shared/protocol/errors';

test('the packed MNIST file holds 10,000 real digits split 8,000/2,000 with every class in both', () => {
  const packed = encodeMnist(packMnistFromPackage());
  const ds = decodeMnist(packed);
  assert.equal(ds.count, 10_000);
  assert.equal(ds.trainCount, 8_000);
  assert.equal(ds.testCount, 2_000);
  const trainClasses = new Set(ds.labels.subarray(0, 8000));
  const testClasses = new Set(ds.labels.subarray(8000));
  assert.equal(trainClasses.size, 10);
  assert.equal(testClasses.size, 10);
  // Real digits: ink covers roughly 10-25% of the pixels, never none, never all.
  let ink = 0;
  for (let i = 0; i < MNIST_PIXELS * 100; i++) if (ds.pixels[i]! > 127) ink++;
  const fraction = ink / (MNIST_PIXELS * 100);
  assert.ok(fraction > 0.05 && fraction < 0.35, `ink fraction ${fraction}`);
});

test('a corrupt MNIST file is refused with ERR_BAD_DATA', () => {
  const packed = encodeMnist(packMnistFromPackage());
  assert.throws(() => decodeMnist(packed.subarray(0, packed.length - 1)), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA');
  const badLabel = packed.slice();
  badLabel[24] = 11;
  assert.throws(() => decodeMnist(badLabel), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA');
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
