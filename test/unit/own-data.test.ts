/**
 * Training on the class's own examples (shared/data/own-data.ts): each device trains
 * only its own, the update weighs every example alike, every example of an epoch is trained
 * once whatever the class does, and a device with nothing changes nothing.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { mnistSubset } from '../support/mnist';
import { createMemoryRing } from '../support/memory-ring';
import { Trainer } from '../../shared/training/trainer';
import { OwnDataSource } from '../../shared/data/own-data';
import { EpochLine } from '../../shared/data/epoch-roster';
import { HOLDOUT_FRACTION, MemoryOwnExamples, isHeldOut, type OwnExamples } from '../../shared/data/own-examples';
import type { DataSource, EpochRoster } from '../../shared/data/data-source';
import { cutBatch, type GlobalBatch } from '../../shared/data/batch-plan';
import { type StartConfig } from '../../shared/protocol';
import { DIGIT_CLASSES } from '../../shared/tasks/mnist/format';
import type { LoadedDataset } from '../../shared/tasks/task';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import { InMemoryShards } from '../../shared/data/data-source';
import { mnistTask } from '../../shared/tasks/mnist/task';

const PIXEL_SCALE = mnistTask.example.byteScale;
import { WebringError } from '../../shared/protocol/errors';

let dataset: LoadedDataset;

before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

/** A store of `count` MNIST training digits from `from`, each of a digit in `digits`. */
function storeOf(key: number, digits: readonly number[], count: number, from = 0): MemoryOwnExamples {
  const store = new MemoryOwnExamples(key);
  for (let i = from; store.examples.length < count && i < dataset.train.count; i++) {
    const label = dataset.train.labels[i]!;
    if (!digits.includes(label)) continue;
    const pixels = new Float32Array(MNIST_PIXELS);
    for (let p = 0; p < MNIST_PIXELS; p++) pixels[p] = dataset.train.features[i * MNIST_PIXELS + p]! / 255;
    store.add(String(label), pixels);
  }
  return store;
}

/** Records, per step, which examples (store key and seq) a source handed its trainer, and their pixels. */
class Recording {
  readonly steps: Array<Array<{ key: number; seq: number; pixels: Float32Array; label: number }>> = [];

  /** Examples not in `store` are looked up among `digits` (the server's, in mnist+own), as key 0. */
  wrap(source: OwnDataSource, store: OwnExamples | null, digits: LoadedDataset | null = null): OwnDataSource {
    const read = source.readShard.bind(source);
    source.readShard = async (batch: GlobalBatch, rank: number, images: Float32Array, labels: Int32Array) => {
      const n = await read(batch, rank, images, labels);
      const step = (this.steps[this.stepIndex(batch)] ??= []);
      for (let i = 0; i < n; i++) {
        const pixels = images.slice(i * MNIST_PIXELS, (i + 1) * MNIST_PIXELS);
        const example = store?.examples.find((e) => e.pixels !== null && e.pixels.every((v, p) => v === pixels[p]));
        if (example) {
          step.push({ key: store!.key, seq: example.seq, pixels, label: labels[i]! });
          continue;
        }
        const index = Array.from({ length: digits!.train.count }, (_, d) => d).find((d) => pixels.every((v, p) => v === Math.fround(digits!.train.features[d * MNIST_PIXELS + p]! * PIXEL_SCALE)));
        assert.ok(index !== undefined, 'an example read is either this device\'s own or one of the server\'s digits');
        step.push({ key: 0, seq: index, pixels, label: labels[i]! });
      }
      return n;
    };
    return source;
  }

  private readonly keys = new Map<string, number>();
  private stepIndex(batch: GlobalBatch): number {
    const id = `${batch.epoch}/${batch.offset}`;
    if (!this.keys.has(id)) this.keys.set(id, this.keys.size);
    return this.keys.get(id)!;
  }
}

/** One worker replaying the union of what the ring trained, step by step: the single-worker reference. */
class UnionReplay implements DataSource {
  readonly trainCount = 1e9;
  readonly maxShardExamples = 4096;
  private step = 0;
  constructor(private readonly recording: Recording) {}
  globalBatchSize(): number {
    return this.recording.steps[this.step]?.length ?? 1;
  }
  nextBatch(): GlobalBatch {
    return cutBatch({ epoch: 0, offset: this.step }, this.globalBatchSize(), 1);
  }
  readShard(batch: GlobalBatch, _rank: number, images: Float32Array, labels: Int32Array): Promise<number> {
    const examples = this.recording.steps[batch.offset]!;
    examples.forEach((e, i) => {
      images.set(e.pixels, i * MNIST_PIXELS);
      labels[i] = e.label;
    });
    this.step++;
    return Promise.resolve(examples.length);
  }
  testShard(): { start: number; count: number } {
    return { start: 0, count: 0 };
  }
  readTest(): Promise<void> {
    return Promise.resolve();
  }
}

function ownConfig(overrides: Partial<StartConfig> = {}): StartConfig {
  return startConfigSchema.parse({ model: 'mlp', optimizer: 'adam', learningRate: 0.003, warmupSteps: 0, batchSizePerWorker: 8, seed: 5, data: 'own', ...overrides });
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i]! - b[i]!));
  return d;
}

test("the epoch's line: devices' counts sum to the places consumed, only grow, end at each device's count and stay near its proportional part", () => {
  const roster: EpochRoster = { epoch: 0, devices: [{ key: 1, examples: 37, lastSeq: 40 }, { key: 2, examples: 5, lastSeq: 6 }, { key: 3, examples: 90, lastSeq: 99 }] };
  const line = new EpochLine(roster);
  assert.equal(line.places, 132);
  for (let o = 0; o <= line.places; o++) {
    let sum = 0;
    roster.devices.forEach((d, i) => {
      const c = line.consumed(i, o);
      assert.ok(c >= (o > 0 ? line.consumed(i, o - 1) : 0), 'a device never goes back');
      sum += c;
    });
    assert.equal(sum, o);
  }
  roster.devices.forEach((d, i) => assert.equal(line.consumed(i, line.places), d.examples));
  // Spread evenly: every device stays near its proportional part anywhere on the line, random classes too.
  let seed = 7;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let trial = 0; trial < 50; trial++) {
    const devices = Array.from({ length: 1 + Math.floor(random() * 8) }, (_, i) => ({ key: i + 1, examples: Math.floor(random() * 150), lastSeq: 0 }));
    const l = new EpochLine({ epoch: 0, devices });
    for (let o = 0; o <= l.places; o++) {
      devices.forEach((d, i) => assert.ok(Math.abs(l.consumed(i, o) - (o * d.examples) / l.places) < 2, `device ${i} of ${JSON.stringify(devices)} at ${o}`));
    }
  }
});

test('the holdout split is fixed per example, about 1 in 5, and never trained', () => {
  const key = 0x1234abcd;
  const held = Array.from({ length: 10_000 }, (_, seq) => isHeldOut(key, seq));
  const fraction = held.filter(Boolean).length / held.length;
  assert.ok(Math.abs(fraction - HOLDOUT_FRACTION) < 0.02, `held out ${fraction}`);
  // The same answer however often it is asked, and whatever else the store holds.
  assert.deepEqual(Array.from({ length: 10_000 }, (_, seq) => isHeldOut(key, seq)), held);
  const store = storeOf(key, [0, 1, 2], 200);
  const before = store.examples.map((e) => isHeldOut(store.key, e.seq));
  store.delete(3);
  store.add('1', new Float32Array(MNIST_PIXELS));
  assert.deepEqual(store.examples.slice(0, 200).map((e) => isHeldOut(store.key, e.seq)), before);
});

test('3 devices of unequal data (one with none) equal 1 worker on the union, and each trains only its own, each once an epoch', async () => {
  const config = ownConfig({ epochs: 1 });
  const stores = [storeOf(11, [0, 1, 2, 3], 50), null, storeOf(22, [4, 5, 6, 7, 8, 9], 120, 500)];
  const recording = new Recording();
  const { rings } = createMemoryRing(3);
  const trainers = rings.map((ring, r) => new Trainer(config, recording.wrap(new OwnDataSource(config, stores[r]!), stores[r]!), ring));
  await Promise.all(trainers.map((t) => t.syncState()));
  let steps = 0;
  const shares: number[][] = [];
  while (!trainers[0]!.finished) {
    const results = await Promise.all(trainers.map((t) => t.trainStep()));
    assert.equal(new Set(results.map((r) => r.loss)).size, 1, 'every replica agrees on the loss');
    shares.push(results.map((r) => r.examples));
    steps++;
  }
  // Training examples: not held out. Each once in the epoch, by the device that holds it.
  const trained = recording.steps.flat().map((e) => `${e.key}/${e.seq}`);
  const expected = stores.flatMap((s) => (s ? s.examples.filter((e) => !isHeldOut(s.key, e.seq)).map((e) => `${s.key}/${e.seq}`) : []));
  assert.deepEqual([...trained].sort(), [...expected].sort());
  assert.equal(new Set(trained).size, trained.length, 'no example twice');
  assert.ok(shares.every((s) => s[1] === 0), 'the device with no examples trains none');
  // Shares follow the data: the device with 2.4x the examples trains about 2.4x as many a step.
  const [a, , b] = shares.reduce((sum, s) => sum.map((v, i) => v + s[i]!), [0, 0, 0]);
  assert.equal(a! + b!, expected.length);
  assert.ok(shares.slice(0, -1).every((s) => s[0]! + s[2]! === 16), 'a global batch is 8 per device holding examples: the empty one adds none');

  const single = new Trainer(config, new UnionReplay(recording), createMemoryRing(1).rings[0]!);
  for (let s = 0; s < steps; s++) await single.trainStep();
  const want = await single.readWeights();
  const hashes = new Set<string>();
  for (const t of trainers) {
    assert.ok(maxDiff(await t.readWeights(), want) <= 1e-5);
    hashes.add(await t.weightsHash());
  }
  assert.equal(hashes.size, 1, 'replicas are bit-identical');
  for (const t of [...trainers, single]) t.dispose();
});

test('a device with no examples changes nothing: the same weights, bit for bit, as the class without it', async () => {
  const config = ownConfig({ maxSteps: 6 });
  const run = async (stores: Array<MemoryOwnExamples | null>) => {
    const { rings } = createMemoryRing(stores.length);
    const trainers = rings.map((ring, r) => new Trainer(config, new OwnDataSource(config, stores[r]!), ring));
    await Promise.all(trainers.map((t) => t.syncState()));
    while (!trainers[0]!.finished) await Promise.all(trainers.map((t) => t.trainStep()));
    const hash = await trainers[0]!.weightsHash();
    trainers.forEach((t) => t.dispose());
    return hash;
  };
  const alone = await run([storeOf(1, [0, 1, 2], 60), storeOf(2, [3, 4, 5], 40, 300)]);
  const withEmpty = await run([storeOf(1, [0, 1, 2], 60), null, storeOf(2, [3, 4, 5], 40, 300)]);
  assert.equal(withEmpty, alone);
});

test('a class with no examples at all fails with ERR_NO_EXAMPLES, not a division by zero', async () => {
  const config = ownConfig();
  const { rings } = createMemoryRing(2);
  const trainers = rings.map((ring) => new Trainer(config, new OwnDataSource(config, new MemoryOwnExamples(7)), ring));
  await Promise.all(trainers.map((t) => t.syncState()));
  await assert.rejects(trainers[0]!.trainStep(), (e: unknown) => e instanceof WebringError && e.code === 'ERR_NO_EXAMPLES');
  trainers.forEach((t) => t.dispose());
});

test('a leave, a join, a deletion and a resume mid-epoch: still no example twice, and the joiner waits for the next epoch', async () => {
  const config = ownConfig({ epochs: 2 });
  const a = storeOf(31, [0, 1, 2], 60);
  const b = storeOf(32, [3, 4, 5], 60, 200);
  const c = storeOf(33, [6, 7], 40, 400);
  const joiner = storeOf(34, [8, 9], 30, 600);
  const recording = new Recording();
  const source = (store: MemoryOwnExamples) => recording.wrap(new OwnDataSource(config, store), store);

  // Three devices train 3 steps of epoch 0.
  let ring = createMemoryRing(3).rings;
  let trainers = [a, b, c].map((s, r) => new Trainer(config, source(s), ring[r]!));
  await Promise.all(trainers.map((t) => t.syncState()));
  for (let s = 0; s < 3; s++) await Promise.all(trainers.map((t) => t.trainStep()));
  // b deletes an example it has not trained yet; the class checkpoints.
  const trainedSoFar = new Set(recording.steps.flat().map((e) => `${e.key}/${e.seq}`));
  const deleted = b.examples.find((e) => !isHeldOut(b.key, e.seq) && !trainedSoFar.has(`${b.key}/${e.seq}`))!;
  b.delete(deleted.seq);
  const roster = trainers[0]!.dataRoster!;
  const position = { step: trainers[0]!.step, cursor: trainers[0]!.dataCursor };
  const state = await trainers[0]!.replica.readState();
  trainers.forEach((t) => t.dispose());

  // Resumed without c (it left) and with a joiner: a, b and the joiner, from the checkpoint's position.
  ring = createMemoryRing(3).rings;
  trainers = [a, b, joiner].map((s, r) => new Trainer(config, source(s), ring[r]!));
  for (const t of trainers) {
    await t.replica.writeState(state.slice());
    t.setPosition(position.step, position.cursor, roster);
  }
  await Promise.all(trainers.map((t) => t.syncState()));
  const epochOf: number[] = [];
  while (!trainers[0]!.finished) {
    const results = await Promise.all(trainers.map((t) => t.trainStep()));
    if (results[0]!.epoch === 0) assert.equal(results[2]!.examples, 0, 'the joiner trains nothing in the epoch it joined');
    epochOf.push(results[0]!.epoch);
  }
  const byEpoch = (epoch: number) => recording.steps.filter((_, i) => (i < 3 ? 0 : epochOf[i - 3]) === epoch).flat().map((e) => `${e.key}/${e.seq}`);
  const first = byEpoch(0);
  assert.equal(new Set(first).size, first.length, 'epoch 0: no example twice across the resume');
  assert.ok(!first.includes(`${b.key}/${deleted.seq}`), 'the deleted example is skipped');
  const trainable = (s: MemoryOwnExamples) => s.examples.filter((e) => e.pixels !== null && !isHeldOut(s.key, e.seq)).map((e) => `${s.key}/${e.seq}`);
  for (const s of [a, b]) for (const id of trainable(s)) assert.ok(first.includes(id), `epoch 0 trained ${id} of a device that stayed`);
  assert.ok(first.every((id) => !id.startsWith(`${joiner.key}/`)));
  // Epoch 1's roster is the class as it then was: a, b and the joiner, each example once.
  const second = byEpoch(1);
  assert.deepEqual([...second].sort(), [...trainable(a), ...trainable(b), ...trainable(joiner)].sort());
  trainers.forEach((t) => t.dispose());
});

test('custom classes: the model has one output per class, and the holdout is scored across the ring (counts only)', async () => {
  const classes = ['cat', 'house', 'sun'];
  const config = ownConfig({ classes, maxSteps: 3 });
  const stores = [new MemoryOwnExamples(41), new MemoryOwnExamples(42)];
  const dot = (at: number) => Float32Array.from({ length: MNIST_PIXELS }, (_, p) => (p === at ? 1 : 0));
  for (let i = 0; i < 40; i++) stores[i % 2]!.add(classes[i % 3]!, dot((i * 37) % MNIST_PIXELS));
  const { rings } = createMemoryRing(2);
  const trainers = rings.map((ring, r) => new Trainer(config, new OwnDataSource(config, stores[r]!), ring));
  // The MLP 784-128-3: one output (weights and a bias) per class.
  assert.equal(trainers[0]!.parameterCount, MNIST_PIXELS * 128 + 128 + 128 * 3 + 3);
  await Promise.all(trainers.map((t) => t.syncState()));
  while (!trainers[0]!.finished) await Promise.all(trainers.map((t) => t.trainStep()));
  const held = stores.reduce((n, s) => n + s.examples.filter((e) => isHeldOut(s.key, e.seq)).length, 0);
  assert.ok(held > 0, 'some examples are held out');
  const scores = await Promise.all(trainers.map((t) => t.evaluate()));
  const accuracies = scores.map((s) => s?.accuracy ?? null);
  assert.equal(new Set(accuracies).size, 1);
  assert.ok(accuracies[0] !== null && accuracies[0]! >= 0 && accuracies[0]! <= 1);
  trainers.forEach((t) => t.dispose());
});

test("config: custom classes need the class's own data; labels are checked", () => {
  assert.throws(() => startConfigSchema.parse({ classes: ['cat', 'dog'] }));
  assert.deepEqual(startConfigSchema.parse({ data: 'own', classes: [' cat ', 'dog'] }).classes, ['cat', 'dog']);
  assert.throws(() => startConfigSchema.parse({ data: 'own', classes: ['cat', 'cat'] }));
  assert.throws(() => startConfigSchema.parse({ data: 'own', classes: ['cat'] }));
  assert.throws(() => startConfigSchema.parse({ data: 'own', classes: ['x'.repeat(25), 'dog'] }));
  assert.deepEqual(startConfigSchema.parse({}).classes, [...DIGIT_CLASSES]);
});

test('mnist+own: the server\'s digits and the devices\' own examples make one epoch, each trained once, equal to 1 worker on the union', async () => {
  // A small slice of the digits keeps the epoch short: 90 to train, 10 to test.
  const digits: LoadedDataset = {
    train: { count: 90, labels: dataset.train.labels.subarray(0, 90), features: dataset.train.features.subarray(0, 90 * MNIST_PIXELS) },
    test: { count: 10, labels: dataset.train.labels.subarray(90, 100), features: dataset.train.features.subarray(90 * MNIST_PIXELS, 100 * MNIST_PIXELS) },
  };
  const config = ownConfig({ data: 'dataset+own', epochs: 1 });
  const stores = [storeOf(51, [0, 1, 2, 3], 40, 1_000), null, storeOf(52, [4, 5, 6, 7, 8, 9], 30, 2_000)];
  const recording = new Recording();
  const { rings } = createMemoryRing(3);
  const trainers = rings.map((ring, r) => {
    const shared = new InMemoryShards(digits, mnistTask.example, config.batchSizePerWorker, config.seed, 64);
    return new Trainer(config, recording.wrap(new OwnDataSource(config, stores[r]!, shared, shared), stores[r]!, digits), ring);
  });
  await Promise.all(trainers.map((t) => t.syncState()));
  let steps = 0;
  while (!trainers[0]!.finished) {
    const results = await Promise.all(trainers.map((t) => t.trainStep()));
    assert.ok(results[1]!.examples > 0 || results[0]!.globalBatchSize < 24, 'the rank without a store trains digits');
    steps++;
  }
  const trained = recording.steps.flat().map((e) => `${e.key}/${e.seq}`);
  // The dataset's held-out split scores the run, so no device holds any of its own out.
  const own = stores.flatMap((s) => (s ? s.examples.map((e) => `${s.key}/${e.seq}`) : []));
  const served = Array.from({ length: digits.train.count }, (_, i) => `0/${i}`);
  assert.deepEqual([...trained].sort(), [...own, ...served].sort(), 'every digit and every own example once, none held out');
  const single = new Trainer(config, new UnionReplay(recording), createMemoryRing(1).rings[0]!);
  for (let s = 0; s < steps; s++) await single.trainStep();
  const want = await single.readWeights();
  for (const t of trainers) assert.ok(maxDiff(await t.readWeights(), want) <= 1e-5);
  assert.equal(new Set(await Promise.all(trainers.map((t) => t.weightsHash()))).size, 1);
  for (const t of [...trainers, single]) t.dispose();
});
