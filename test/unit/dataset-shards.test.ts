/**
 * A program's tf.data.Dataset sharded across a ring whose membership changes
 * (shared/data/dataset-shards.ts): for rings of 1 to 8 workers, with joiners that start
 * mid-epoch on a fresh iterator, leavers from the middle of the ring, shares that follow
 * speed and ranks that sit a step out, every element is trained exactly once per epoch by
 * exactly one worker. Dict elements are matched by the model's names, a batched element is
 * refused with a coded error naming the cause, a dataset of the epoch gives each epoch its
 * order, validation is split once over the ranks, and reading leaks no tensor.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { DatasetShards, countElements, datasetFromFunction, type EpochDataset, type InputContext } from '../../shared/data/dataset-shards';
import { advance, type DataCursor } from '../../shared/data/batch-plan';
import { WebringError } from '../../shared/protocol/errors';

const ELEMENTS = 103;
const layout = { inputShapes: [[2]], outputShapes: [[1]], inputNames: ['x'], outputNames: ['y'] };
const ROW = 3;

before(async () => {
  await tf.setBackend('cpu');
});

/** Element i: xs [i, i/2], ys [i mod 3]. */
const numbered = (n = ELEMENTS) => tf.data.array(Array.from({ length: n }, (_, i) => i)).map((i) => ({ xs: tf.tensor1d([i as number, (i as number) / 2]), ys: tf.tensor1d([(i as number) % 3]) }));

const shards = (train: EpochDataset, batchSize: number, validation: EpochDataset | null = null) =>
  new DatasetShards({ train, trainCount: ELEMENTS, validation, validationCount: validation ? ELEMENTS : 0, batchSize, layout });

/** A seeded walk of ring sizes around `n` (1..8), so joins and leaves happen mid-epoch. */
function* sizes(n: number, seed: number): Generator<number> {
  let size = n;
  let s = seed;
  for (;;) {
    yield size;
    s = (s * 1103515245 + 12345) % 2 ** 31;
    const move = (s >> 8) % 5;
    if (move === 0) size = Math.min(8, size + 1);
    else if (move === 1) size = Math.max(1, size - 1);
  }
}

for (let n = 1; n <= 8; n++) {
  test(`a ring starting at ${n} trains every element once per epoch across joins, leaves, shares and sit-outs`, async () => {
    const dataset = numbered();
    const tensorsBefore = tf.memory().numTensors;
    // The workers in ring order; each keeps its own iterator, as each device does.
    let ring = Array.from({ length: n }, () => shards(dataset, 16));
    const trained = new Map<number, number[]>();
    let cursor: DataCursor = { epoch: 0, offset: 0 };
    const walk = sizes(n, 17 + n);
    let stepNo = 0;
    while (cursor.epoch < 3) {
      const size = walk.next().value as number;
      while (ring.length < size) ring.push(shards(dataset, 16));
      // A leaver from the middle of the ring: the ranks after it move down.
      while (ring.length > size) ring.splice(Math.floor(ring.length / 2), 1);
      const weights = stepNo % 4 === 1 && size > 1 ? ring.map((_, r) => (r + 1) / ((size * (size + 1)) / 2)) : null;
      const sitOutFrom = stepNo % 7 === 3 && size > 1 ? size - 1 : null;
      const batch = ring[0]!.nextBatch(cursor, size, { weights, sitOutFrom });
      for (const [rank, worker] of ring.entries()) {
        const rows = new Float32Array(16 * ROW);
        const count = await worker.readShard(batch, rank, rows);
        const seen = trained.get(batch.epoch) ?? [];
        for (let i = 0; i < count; i++) {
          seen.push(rows[i * ROW]!);
          assert.equal(rows[i * ROW + 2], rows[i * ROW]! % 3, 'the target travels with its inputs');
        }
        trained.set(batch.epoch, seen);
      }
      cursor = advance(batch, ELEMENTS);
      stepNo++;
    }
    for (const epoch of [0, 1, 2]) {
      assert.deepEqual([...trained.get(epoch)!].sort((a, b) => a - b), Array.from({ length: ELEMENTS }, (_, i) => i), `epoch ${epoch}: each element once`);
    }
    assert.ok(tf.memory().numTensors <= tensorsBefore + ring.length * 2, 'elements read or skipped are disposed');
  });
}

test('dict elements are matched by the model names; a batched element is refused naming the cause', async () => {
  const dict = tf.data.array([0, 1, 2, 3]).map((i) => ({ xs: { x: tf.tensor1d([i as number, 0]) }, ys: { y: tf.tensor1d([1]) } }));
  const rows = new Float32Array(4 * ROW);
  const source = new DatasetShards({ train: dict, trainCount: 4, validation: null, validationCount: 0, batchSize: 4, layout });
  assert.equal(await source.readShard(source.nextBatch({ epoch: 0, offset: 0 }, 1), 0, rows), 4);
  assert.deepEqual([...rows], [0, 0, 1, 1, 0, 1, 2, 0, 1, 3, 0, 1]);
  const batched = numbered(8).batch(4);
  const wrong = new DatasetShards({ train: batched, trainCount: 2, validation: null, validationCount: 0, batchSize: 2, layout });
  await assert.rejects(wrong.readShard(wrong.nextBatch({ epoch: 0, offset: 0 }, 1), 0, new Float32Array(2 * ROW)), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA' && /single examples, not batches/.test(e.message));
  const missing = tf.data.array([0]).map(() => ({ xs: { z: tf.tensor1d([1, 2]) }, ys: tf.tensor1d([1]) }));
  const noName = new DatasetShards({ train: missing, trainCount: 1, validation: null, validationCount: 0, batchSize: 1, layout });
  await assert.rejects(noName.readShard(noName.nextBatch({ epoch: 0, offset: 0 }, 1), 0, new Float32Array(ROW)), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA' && /no tensor for x/.test(e.message));
});

test('a dataset of the epoch gives each epoch its own order, the same on every worker; validation is split once over the ranks', async () => {
  const ofEpoch = (epoch: number) => numbered().shuffle(ELEMENTS, `seed-${epoch}`, false);
  const [a, b] = [shards(ofEpoch, ELEMENTS, numbered()), shards(ofEpoch, ELEMENTS, numbered())];
  const orders: number[][] = [];
  for (const epoch of [0, 1]) {
    const batch = a.nextBatch({ epoch, offset: 0 }, 2);
    const rowsA = new Float32Array(ELEMENTS * ROW);
    const rowsB = new Float32Array(ELEMENTS * ROW);
    const [na, nb] = [await a.readShard(batch, 0, rowsA), await b.readShard(batch, 1, rowsB)];
    orders.push([...Array.from({ length: na }, (_, i) => rowsA[i * ROW]!), ...Array.from({ length: nb }, (_, i) => rowsB[i * ROW]!)]);
    // A second worker reading rank 0's slice sees the same elements: one order everywhere.
    const again = new Float32Array(ELEMENTS * ROW);
    await b.readShard(batch, 0, again);
    assert.deepEqual(again.subarray(0, na * ROW), rowsA.subarray(0, na * ROW));
  }
  assert.notDeepEqual(orders[0], orders[1], 'each epoch its own order');
  for (const order of orders) assert.deepEqual([...order].sort((x, y) => x - y), Array.from({ length: ELEMENTS }, (_, i) => i));
  const validated: number[] = [];
  for (let rank = 0; rank < 3; rank++) {
    const { start, count } = a.testShard(rank, 3);
    const rows = new Float32Array(count * ROW);
    await a.readTest(start, count, rows);
    for (let i = 0; i < count; i++) validated.push(rows[i * ROW]!);
  }
  assert.deepEqual(validated, Array.from({ length: ELEMENTS }, (_, i) => i));
  assert.equal(await countElements(numbered().filter(() => true)), ELEMENTS, 'a dataset of unknown size is counted in one pass');
});

test('each member\'s own shard (datasetFromFunction): a rank reads its stream in order, told its rank, the ring\'s size and the epoch; the stream opens again when they change, and starts over when it runs out', async () => {
  const contexts: InputContext[] = [];
  /** Shard element i: xs [shardIndex·1000 + i, shardCount], ys [epoch]; shard 2 holds only 3 elements. */
  const own = datasetFromFunction((context) => {
    contexts.push(context);
    const length = context.shardIndex === 2 ? 3 : 50;
    return tf.data.array(Array.from({ length }, (_, i) => i)).map((i) => ({ xs: tf.tensor1d([context.shardIndex * 1000 + (i as number), context.shardCount]), ys: tf.tensor1d([context.epoch]) }));
  });
  const BATCH = 12;
  // One source per member, as each member has its own; member m holds rank m throughout.
  const members = [0, 1, 2].map(() => new DatasetShards({ train: own, trainCount: 5 * BATCH, validation: null, validationCount: 0, batchSize: BATCH, layout }));
  const before = tf.memory().numTensors;
  const read = async (cursor: DataCursor, size: number) => {
    const batch = members[0]!.nextBatch(cursor, size);
    const byRank: number[][][] = [];
    for (let rank = 0; rank < size; rank++) {
      const rows = new Float32Array(BATCH * ROW);
      const n = await members[rank]!.readShard(batch, rank, rows);
      byRank.push(Array.from({ length: n }, (_, i) => [rows[i * ROW]!, rows[i * ROW + 1]!, rows[i * ROW + 2]!]));
    }
    return { batch, byRank };
  };
  // Two steps of a ring of three: each rank goes on in its own stream; shard 2 (3 elements) starts over.
  const first = await read({ epoch: 0, offset: 0 }, 3);
  const second = await read(advance(first.batch, 5 * BATCH), 3);
  assert.deepEqual(first.byRank[0]!.map((r) => r[0]), [0, 1, 2, 3]);
  assert.deepEqual(second.byRank[0]!.map((r) => r[0]), [4, 5, 6, 7], 'rank 0 goes on where it stopped');
  assert.deepEqual([...first.byRank[2]!, ...second.byRank[2]!].map((r) => r[0]), [2000, 2001, 2002, 2000, 2001, 2002, 2000, 2001], 'a shard smaller than its share starts over');
  assert.ok(first.byRank.flat().every((r) => r[1] === 3 && r[2] === 0), 'every element knows the ring of 3 and epoch 0');
  // The third member leaves: the other two's streams open again, as shards 0 and 1 of 2.
  const shrunk = await read(advance(second.batch, 5 * BATCH), 2);
  assert.deepEqual(shrunk.byRank[1]!.map((r) => r[0]), [1000, 1001, 1002, 1003, 1004, 1005]);
  assert.ok(shrunk.byRank.flat().every((r) => r[1] === 2), 'told the new size');
  // The next epoch opens every stream again.
  const nextEpoch = await read({ epoch: 1, offset: 0 }, 2);
  assert.deepEqual(nextEpoch.byRank[0]!.map((r) => r[0]), [0, 1, 2, 3, 4, 5]);
  assert.ok(nextEpoch.byRank.flat().every((r) => r[2] === 1), 'told epoch 1');
  assert.deepEqual(
    contexts.map((c) => `${c.epoch}/${c.shardIndex}/${c.shardCount}`),
    ['0/0/3', '0/1/3', '0/2/3', '0/2/3', '0/2/3', '0/0/2', '0/1/2', '1/0/2', '1/1/2'],
    'the function is asked again only for a new rank, size or epoch, or an exhausted stream',
  );
  assert.equal(tf.memory().numTensors, before, 'reading leaks no tensor');
  const empty = new DatasetShards({ train: datasetFromFunction(() => tf.data.array<tf.TensorContainer>([])), trainCount: BATCH, validation: null, validationCount: 0, batchSize: BATCH, layout });
  await assert.rejects(empty.readShard(empty.nextBatch({ epoch: 0, offset: 0 }, 1), 0, new Float32Array(BATCH * ROW)), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA');
});
