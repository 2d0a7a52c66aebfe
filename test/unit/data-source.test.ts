/**
 * The data-source seam: the trainer takes whatever examples its DataSource hands it, in
 * whatever share of the global batch. Two replicas splitting every global batch 3:1 train
 * the same model as one worker on the whole batch, with the loop untouched.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { mnistSubset } from '../support/mnist';

import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import type { LoadedDataset } from '../../shared/tasks/task';
import { Trainer } from '../../shared/training/trainer';
import type { DataSource } from '../../shared/data/data-source';
import { mnistShards } from '../support/mnist';
import type { InMemoryShards } from '../../shared/data/data-source';
import { batchOfSlices, nextBatch, type DataCursor, type GlobalBatch } from '../../shared/data/batch-plan';
import { EpochPermutation } from '../../shared/data/sharding';
import { createMemoryRing } from '../support/memory-ring';

let dataset: LoadedDataset;
/** As the in-memory shards scale: the same floats, so the same batches. */
const PIXEL_SCALE = 1 / 255;

before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

/** The MNIST permutation's global batches of `batchSize`, cut between the ranks in proportion to `weights`. */
class WeightedShards implements DataSource {
  private readonly permutation: EpochPermutation;
  private readonly cumulative: number[];
  /** The evaluation stays on MNIST's test split. */
  private readonly pixels: InMemoryShards;

  constructor(
    private readonly data: LoadedDataset,
    private readonly batchSize: number,
    weights: number[],
    seed: number,
  ) {
    this.permutation = new EpochPermutation(data.train.count, seed);
    const total = weights.reduce((a, b) => a + b, 0);
    let sum = 0;
    this.cumulative = [0, ...weights.map((w) => (sum += w) / total)];
    this.pixels = mnistShards({ batchSizePerWorker: 1, seed, balanceShares: false }, data);
  }

  get trainCount(): number {
    return this.data.train.count;
  }

  get maxShardExamples(): number {
    return this.batchSize;
  }

  globalBatchSize(): number {
    return this.batchSize;
  }

  nextBatch(cursor: DataCursor, worldSize: number): GlobalBatch {
    const whole = nextBatch(cursor, this.batchSize, 1, this.data.train.count);
    const slices = Array.from({ length: worldSize }, (_, rank) => {
      const [from, to] = this.range(whole, rank);
      return to - from;
    });
    return batchOfSlices(whole, whole.size, slices);
  }

  private range(batch: { size: number }, rank: number): [number, number] {
    return [Math.floor(batch.size * this.cumulative[rank]!), Math.floor(batch.size * this.cumulative[rank + 1]!)];
  }

  async readShard(batch: GlobalBatch, rank: number, images: Float32Array, labels: Int32Array): Promise<number> {
    const order = this.permutation.forEpoch(batch.epoch);
    const [from, to] = this.range(batch, rank);
    for (let i = from; i < to; i++) {
      const idx = order[batch.offset + i]!;
      const dst = (i - from) * MNIST_PIXELS;
      for (let p = 0; p < MNIST_PIXELS; p++) images[dst + p] = this.data.train.features[idx * MNIST_PIXELS + p]! * PIXEL_SCALE;
      labels[i - from] = this.data.train.labels[idx]!;
    }
    return to - from;
  }

  testShard(rank: number, worldSize: number): { start: number; count: number } {
    return this.pixels.testShard(rank, worldSize);
  }

  readTest(start: number, count: number, images: Float32Array, labels: Int32Array): Promise<void> {
    return this.pixels.readTest(start, count, images, labels);
  }
}

test('replicas with unequal shares (3:1) train what one worker trains on the whole global batch', async () => {
  const BATCH = 16;
  const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'sgd', learningRate: 0.1, batchSizePerWorker: BATCH, seed: 4 });
  const { rings } = createMemoryRing(2);
  const replicas = rings.map((ring) => new Trainer(config, new WeightedShards(dataset, BATCH, [3, 1], config.seed), ring));
  const single = new Trainer(config, mnistShards(config, dataset), createMemoryRing(1).rings[0]!);
  for (let s = 0; s < 4; s++) {
    const results = await Promise.all(replicas.map((t) => t.trainStep()));
    const reference = await single.trainStep();
    assert.deepEqual(results.map((r) => r.examples), [12, 4], 'a 3:1 split of every global batch');
    for (const r of results) {
      assert.equal(r.globalBatchSize, BATCH);
      assert.ok(Math.abs(r.loss - reference.loss) < 1e-5, `loss ${r.loss} vs ${reference.loss}`);
      assert.equal(r.trainAccuracy, reference.trainAccuracy);
    }
  }
  const want = await single.readWeights();
  for (const t of replicas) {
    const got = await t.readWeights();
    let maxDiff = 0;
    for (let i = 0; i < want.length; i++) maxDiff = Math.max(maxDiff, Math.abs(got[i]! - want[i]!));
    assert.ok(maxDiff <= 1e-5, `max abs difference ${maxDiff}`);
  }
  assert.equal(await replicas[0]!.weightsHash(), await replicas[1]!.weightsHash());
  for (const t of [...replicas, single]) t.dispose();
});
