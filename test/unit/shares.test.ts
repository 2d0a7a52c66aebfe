/**
 * Shares sized to speed (shared/training/share-balancer.ts): weighted shards tile every
 * global batch exactly; the balancer moves work from a slow rank to fast ones and ignores
 * noise (hysteresis); and trainers with unequal, changing shares stay exact: the same model
 * as one worker on the same global batches, every example of an epoch trained once through
 * a leave and a join, and every replica bit-identical.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';

import type { LoadedDataset } from '../../shared/tasks/task';
import { InMemoryShards } from '../../shared/data/data-source';
import { mnistShards } from '../support/mnist';
import { mnistTask } from '../../shared/tasks/mnist/task';
import { ShareBalancer, REBALANCE_EVERY_STEPS, explainShare } from '../../shared/training/share-balancer';
import { MAX_SHARE_FACTOR, MIN_SHARE_FACTOR, maxShareOf } from '../../shared/data/batch-plan';
import { advance, cutBatch, shardOf, withoutRanksFrom, type GlobalBatch } from '../../shared/data/batch-plan';
import { Trainer } from '../../shared/training/trainer';
import { mulberry32 } from '../../shared/util/random';
import type { Clock } from '../../shared/util/clock';
import { createMemoryRing } from '../support/memory-ring';
import { mnist } from '../support/checkpoint-fixture';

let dataset: LoadedDataset;
before(async () => {
  await tf.setBackend('cpu');
  dataset = await mnist();
});

/** `worldSize` random shares summing to 1, none below a small floor. */
function randomWeights(rand: () => number, worldSize: number): number[] {
  const raw = Array.from({ length: worldSize }, () => 0.05 + rand());
  const sum = raw.reduce((a, b) => a + b, 0);
  return raw.map((w) => w / sum);
}

test('weighted shards tile every global batch exactly, in rank order, whatever the weights', () => {
  const rand = mulberry32(9);
  for (let trial = 0; trial < 500; trial++) {
    const worldSize = 1 + Math.floor(rand() * 8);
    const weights = randomWeights(rand, worldSize);
    const size = 1 + Math.floor(rand() * 300);
    const batch = cutBatch({ epoch: 0, offset: 1000 }, size, worldSize, weights);
    let next = 1000;
    for (let r = 0; r < worldSize; r++) {
      const { start, count } = shardOf(batch, r);
      assert.equal(start, next, `trial ${trial} rank ${r} starts where rank ${r - 1} ended`);
      assert.ok(count >= 0);
      next = start + count;
    }
    assert.equal(next, 1000 + size, `trial ${trial}: the parts cover the batch`);
  }
  // Equal weights cut as the unweighted rule does.
  const even = cutBatch({ epoch: 0, offset: 0 }, 97, 4, [0.25, 0.25, 0.25, 0.25]);
  for (let r = 0; r < 4; r++) assert.deepEqual(shardOf(even, r), shardOf(cutBatch({ epoch: 0, offset: 0 }, 97, 4, null), r));
});

test('ranks sitting a step out: the others keep their slices exactly, the batch ends where the first idle one began, the cursor loses nothing', () => {
  const rand = mulberry32(17);
  for (let trial = 0; trial < 500; trial++) {
    const worldSize = 2 + Math.floor(rand() * 7);
    const shares = randomWeights(rand, worldSize);
    const weights = rand() < 0.5 ? shares : null;
    const whole = cutBatch({ epoch: 0, offset: 500 }, 1 + Math.floor(rand() * 300), worldSize, weights);
    const firstIdle = 1 + Math.floor(rand() * (worldSize - 1));
    const cut = withoutRanksFrom(whole, firstIdle);
    const ownBefore = shardOf(whole, firstIdle).start - whole.offset;
    if (ownBefore === 0) {
      assert.equal(cut, whole, `trial ${trial}: nobody before rank ${firstIdle} has examples, so nobody sits out`);
      continue;
    }
    for (let r = 0; r < firstIdle; r++) assert.deepEqual(shardOf(cut, r), shardOf(whole, r), `trial ${trial}: rank ${r} keeps its slice`);
    for (let r = firstIdle; r < worldSize; r++) assert.equal(shardOf(cut, r).count, 0, `trial ${trial}: rank ${r} sits out`);
    assert.equal(cut.size, ownBefore, `trial ${trial}: the batch counts what was trained`);
    // The next batch starts at the first idle rank's examples: none skipped, none twice.
    assert.deepEqual(advance(cut, 10_000), { epoch: 0, offset: shardOf(whole, firstIdle).start });
  }
  const whole = cutBatch({ epoch: 0, offset: 0 }, 96, 4);
  assert.equal(withoutRanksFrom(whole, 0), whole, 'rank 0 always trains');
  assert.equal(withoutRanksFrom(whole, 4), whole, 'a rank past the ring changes nothing');
});

test('the balancer weighs what a rank pays whatever its share: every rank ready for the all-reduce at the same moment', () => {
  const balancer = new ShareBalancer(true);
  balancer.reset(4);
  const rand = mulberry32(5);
  const noisy = (ms: number) => ms * (0.95 + 0.1 * rand());
  // All four compute 12.5 ms per example; rank 3 also spends 100 ms between steps (a slow
  // device's optimizer update and event loop). Ready together: 100 + 12.5 n3 = 12.5 n, with
  // 3n + n3 = 32, so n = 10 and n3 = 2.
  const overhead = [5, 5, 5, 100];
  let counts = [8, 8, 8, 8];
  for (let step = 0; step < 60; step++) {
    const w = balancer.current!;
    balancer.observe(counts.map((c) => noisy(12.5 * c)), counts, overhead.map(noisy));
    counts = [...w].map((x) => Math.round(x * 32));
  }
  const w = [...balancer.current!];
  assert.ok(Math.abs(w[3]! * 32 - 2.3) < 0.8, `rank 3 takes about 2 of 32 examples, not a quarter: ${w.map((x) => (x * 32).toFixed(2))}`);
  assert.ok(w.slice(0, 3).every((x) => Math.abs(x * 32 - 9.9) < 0.8), `the others about 10 each: ${w.map((x) => (x * 32).toFixed(2))}`);
  const ready = w.map((x, r) => overhead[r]! + 12.5 * x * 32);
  assert.ok(Math.max(...ready) - Math.min(...ready) < 20, `every rank ready within 20 ms of the others: ${ready.map((x) => x.toFixed(0))}`);
  // Without overheads the same devices split by speed alone: equal shares.
  const bySpeed = new ShareBalancer(true);
  bySpeed.reset(4);
  for (let step = 0; step < 20; step++) bySpeed.observe([100, 100, 100, 100], [8, 8, 8, 8]);
  assert.deepEqual([...bySpeed.current!], [0.25, 0.25, 0.25, 0.25]);
});

test('the balancer gives a slow rank less, within bounds, and noise does not make shares flap', () => {
  const balancer = new ShareBalancer(true);
  balancer.reset(4);
  const rand = mulberry32(4);
  const noisy = (ms: number) => ms * (0.92 + 0.16 * rand());
  const changes: number[] = [];
  // Equal devices with ±8% noise: shares stay equal.
  for (let step = 0; step < 60; step++) if (balancer.observe([noisy(100), noisy(100), noisy(100), noisy(100)], [8, 8, 8, 8])) changes.push(step);
  assert.equal(changes.length, 0, 'noise alone moves nothing');
  assert.deepEqual([...balancer.current!], [0.25, 0.25, 0.25, 0.25]);
  // Rank 3 becomes a phone, four times slower per example.
  let counts = [8, 8, 8, 8];
  for (let step = 60; step < 120; step++) {
    const w = balancer.current!;
    const times = [0, 1, 2, 3].map((r) => noisy((r === 3 ? 4 : 1) * 12.5 * counts[r]!));
    if (balancer.observe(times, counts)) changes.push(step);
    counts = [...w].map((x) => Math.round(x * 32));
  }
  const w = [...balancer.current!];
  assert.ok(changes.length >= 1 && changes.length <= 3, `it settled within a few re-balancings, not on every one: ${changes}`);
  assert.ok(w[3]! < 0.25 / 2.5 && w[3]! >= MIN_SHARE_FACTOR / 4, `the phone takes about a quarter of a laptop's share: ${w}`);
  assert.ok(Math.abs(w[0]! - w[1]!) < 0.05 && w[0]! <= MAX_SHARE_FACTOR / 4, `the laptops share the rest alike: ${w}`);
  assert.ok(Math.abs(w.reduce((a, b) => a + b, 0) - 1) < 1e-12);
  assert.ok(balancer.speedVsMedian(3) < 0.35 && balancer.speedVsMedian(0) > 0.9, `${balancer.speedVsMedian(3)} ${balancer.speedVsMedian(0)}`);
  assert.equal(explainShare(2, 2), '2.0× the class median: 2.0 shares');
  assert.equal(explainShare(1, 1), '1.0× the class median: 1.0 share');
  assert.equal(explainShare(0, 1), '');
  // Off: shares stay equal by rule.
  const off = new ShareBalancer(false);
  off.reset(2);
  for (let step = 0; step < 20; step++) off.observe([100, 400], [8, 8]);
  assert.equal(off.current, null);
  assert.equal(maxShareOf({ batchSizePerWorker: 16, balanceShares: true }), 16 * MAX_SHARE_FACTOR + 1);
});

/** Time that passes `msPerCall` at every reading: a rank with a larger one looks slower, deterministically. */
function tickingClock(msPerCall: number): Clock {
  let t = 0;
  return { now: () => (t += msPerCall), setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>) };
}

/** In-memory shards that record which permutation positions each step trained. */
class RecordingShards extends InMemoryShards {
  readonly trained: Array<{ epoch: number; start: number; count: number }> = [];

  override readShard(batch: GlobalBatch, rank: number, images: Float32Array, labels: Int32Array): Promise<number> {
    this.trained.push({ epoch: batch.epoch, ...shardOf(batch, rank) });
    return super.readShard(batch, rank, images, labels);
  }
}

test('unequal, changing shares stay exact: one worker on the same global batches, every example once through a leave and a join, replicas identical', async () => {
  const PER_WORKER = 8;
  const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'sgd', learningRate: 0.05, warmupSteps: 0, batchSizePerWorker: PER_WORKER, seed: 7, balanceShares: true, dataset: 'mnist-10k' });
  const shards = () => new RecordingShards(dataset, mnistTask.example, PER_WORKER, config.seed, maxShareOf(config));
  // Rank 2 reads the clock three times slower: it looks like a device a third as fast.
  const speeds = [1, 1, 3];
  const first = createMemoryRing(3, { generation: 1 });
  const sources = speeds.map(() => shards());
  const ring = first.rings.map((r, i) => new Trainer(config, sources[i]!, r, { clock: tickingClock(speeds[i]!) }));
  const single = new Trainer({ ...config, batchSizePerWorker: PER_WORKER * 3, balanceShares: false }, mnistShards({ ...config, batchSizePerWorker: PER_WORKER * 3, balanceShares: false }, dataset), createMemoryRing(1).rings[0]!);
  const STEPS = 4 * REBALANCE_EVERY_STEPS;
  const sharesSeen: number[] = [];
  for (let s = 0; s < STEPS; s++) {
    const results = await Promise.all(ring.map((t) => t.trainStep()));
    await single.trainStep();
    sharesSeen.push(results[2]!.examples);
  }
  assert.ok(sharesSeen.at(-1)! < PER_WORKER / 2, `the slow rank's share fell: ${sharesSeen}`);
  const reference = await single.readWeights();
  for (const t of ring) {
    const w = await t.readWeights();
    let worst = 0;
    for (let i = 0; i < w.length; i++) worst = Math.max(worst, Math.abs(w[i]! - reference[i]!));
    assert.ok(worst <= 1e-5, `the same model as one worker on the same global batches (max |Δ| ${worst})`);
  }
  assert.equal(new Set(await Promise.all(ring.map((t) => t.weightsHash()))).size, 1);

  // Rank 1 leaves; then a fresh joiner arrives. Shares restart equal each time and re-balance.
  const survivors = [ring[0]!, ring[2]!];
  ring[1]!.dispose();
  const second = createMemoryRing(2, { generation: 2 });
  survivors.forEach((t, r) => t.setCollective(second.rings[r]!));
  await Promise.all(survivors.map((t) => t.syncState()));
  for (let s = 0; s < 2 * REBALANCE_EVERY_STEPS; s++) await Promise.all(survivors.map((t) => t.trainStep()));
  const joinerSource = shards();
  const joiner = new Trainer(config, joinerSource, createMemoryRing(1).rings[0]!, { clock: tickingClock(1) });
  const third = [...survivors, joiner];
  const gen3 = createMemoryRing(3, { generation: 3 });
  third.forEach((t, r) => t.setCollective(gen3.rings[r]!));
  await Promise.all(third.map((t) => t.syncState()));
  // The joiner sits its first step out while the state reaches it, and so does rank 1, which sent it; rank 0 trains its usual slice.
  const firstStep = await Promise.all(third.map((t) => t.trainStep()));
  assert.deepEqual(firstStep.map((r) => r.examples > 0), [true, false, false], 'the sender and the joiner train nothing in the first step');
  assert.equal(firstStep[0]!.globalBatchSize, firstStep[0]!.examples, 'the step trained rank 0\'s slice only');
  assert.ok(firstStep.every((r) => r.globalBatchSize === firstStep[0]!.globalBatchSize && r.loss === firstStep[0]!.loss), 'every replica saw the same batch and loss');
  const secondStep = await Promise.all(third.map((t) => t.trainStep()));
  assert.ok(secondStep[2]!.examples > 0, 'the joiner trains from its second step');
  // On to the end of the epoch: 8,000 examples.
  while (third[0]!.epoch === 0) await Promise.all(third.map((t) => t.trainStep()));
  assert.equal(new Set(await Promise.all(third.map((t) => t.weightsHash()))).size, 1, 'replicas bit-identical');

  const positions = new Array<number>(8_000).fill(0);
  for (const source of [...sources, joinerSource]) for (const part of source.trained) if (part.epoch === 0) for (let p = part.start; p < part.start + part.count; p++) positions[p]!++;
  assert.deepEqual([...new Set(positions)], [1], 'every example of the epoch trained exactly once');
  for (const t of [...third, single]) t.dispose();
});
