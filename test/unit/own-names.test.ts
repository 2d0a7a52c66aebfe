/**
 * Names of the class's own (shared/tasks/names/own-names.ts through shared/data/own-data.ts):
 * a typed name is kept as its symbols and gives its examples exactly as a dataset name does;
 * every training name's characters are trained once an epoch, a name is held out or trained
 * whole, a deleted name is skipped without moving the others, and three devices with names
 * of their own train the names model under secure aggregation to identical replicas. (Tabs
 * typing names and the teacher's form: e2e/names.spec.ts; a Node worker's names folder:
 * the folder test below.)
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { namesTask } from '../../shared/tasks/names/task';
import { FIRST_NAMES, NAME_FILES, namesSplitOf } from '../../shared/tasks/names/datasets';
import { CONTEXT, namesToExamples, type NamesSplit } from '../../shared/tasks/names/names-text';
import { OWN_NAMES, MAX_OWN_NAME_CHARS } from '../../shared/tasks/names/own-names';
import { readOwnNames } from '../../shared/tasks/names/own-folder';
import { inMemoryShards, type DataSource } from '../../shared/data/data-source';
import { OwnDataSource } from '../../shared/data/own-data';
import { MemoryOwnExamples, isHeldOut, countByLabel } from '../../shared/data/own-examples';
import type { LoadedDataset } from '../../shared/tasks/task';
import { loadDataset, packageFilePath } from '../../signaling-server/data/datasets';
import { Trainer } from '../../shared/training/trainer';
import { createSecureMesh } from '../support/secure-ring';
import { WebringError } from '../../shared/protocol/errors';
import type { StartConfig } from '../../shared/protocol';

let split: NamesSplit;
let data: LoadedDataset;

before(async () => {
  await tf.setBackend('cpu');
  split = namesSplitOf(NAME_FILES.map((file) => readFileSync(packageFilePath(file), 'utf8')));
  data = await loadDataset(FIRST_NAMES);
});

/** A device's store of `names`, typed as a student types them. */
function storeOf(key: number, names: readonly string[]): MemoryOwnExamples {
  const store = new MemoryOwnExamples(key);
  for (const name of names) store.add(OWN_NAMES.label, OWN_NAMES.encode(name));
  return store;
}

/** One example as text: its context's symbols and its target, so a multiset of them compares. */
const exampleKey = (context: ArrayLike<number>, target: number) => `${Array.from(context).join(',')}>${target}`;

/** Every example `names` give, as exampleKey strings. */
function examplesOf(names: readonly string[]): string[] {
  const e = namesToExamples(names, CONTEXT);
  return Array.from({ length: e.count }, (_, i) => exampleKey(e.features.subarray(i * CONTEXT, (i + 1) * CONTEXT), e.targets[i]!));
}

/**
 * Runs the sources of one ring through epoch 0 as the trainer does (agree, cut, read),
 * calling `between` after each step; returns what each step trained, as exampleKey strings.
 */
async function epochOf(sources: OwnDataSource[], between: (step: number) => void = () => {}): Promise<string[][]> {
  const n = sources.length;
  const agreed = new Float32Array(n * sources[0]!.floatsPerRank);
  const steps: string[][] = [];
  let cursor = { epoch: 0, offset: 0 };
  const features = new Float32Array(sources[0]!.maxShardExamples * CONTEXT);
  const labels = new Int32Array(sources[0]!.maxShardExamples);
  for (;;) {
    sources.forEach((s, r) => s.writeOwn(agreed, r * s.floatsPerRank));
    for (const s of sources) s.agree(agreed, n);
    const batches = sources.map((s) => s.nextBatch(cursor, n));
    const batch = batches[0]!;
    assert.ok(batches.every((b) => JSON.stringify(b) === JSON.stringify(batch)), 'every rank cuts the same step');
    if (batch.epoch !== 0) return steps;
    const step: string[] = [];
    for (let r = 0; r < n; r++) {
      const read = await sources[r]!.readShard(batch, r, features, labels);
      for (let i = 0; i < read; i++) step.push(exampleKey(features.subarray(i * CONTEXT, (i + 1) * CONTEXT), labels[i]!));
    }
    steps.push(step);
    cursor = { epoch: batch.epoch, offset: batch.offset + batch.span };
    between(steps.length);
  }
}

const sorted = (a: readonly string[]) => [...a].sort();

function ownNamesConfig(overrides: Partial<StartConfig> = {}): StartConfig {
  return startConfigSchema.parse({ task: 'names', data: 'own', batchSizePerWorker: 16, seed: 3, epochs: 1, ...overrides });
}

test('a typed name is kept as its symbols and checked: letters a–z and "-", lower-cased, at most 24', () => {
  assert.deepEqual(Array.from(OWN_NAMES.encode('  Zoe ')), [27, 16, 6]);
  assert.equal(OWN_NAMES.decode(OWN_NAMES.encode('Jo-Ann')), 'jo-ann');
  for (const bad of ['', '   ', 'zoë', 'ann marie', 'x'.repeat(MAX_OWN_NAME_CHARS + 1), 'o\'neil']) {
    assert.throws(() => OWN_NAMES.encode(bad), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST' && e.field === 'name', JSON.stringify(bad));
  }
  // What a script or a peer hands a store is checked too: symbols of characters only, never the end mark.
  for (const bad of [[], [0, 3], [2.5], [28], new Array(MAX_OWN_NAME_CHARS + 1).fill(2)]) {
    assert.throws(() => OWN_NAMES.check(bad), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST');
  }
  OWN_NAMES.check([2, 15, 15]);
  // A name gives its characters and the end mark, exactly as a dataset name does.
  assert.equal(OWN_NAMES.examplesIn(3), 4);
  const out = new Float32Array(CONTEXT);
  const item = OWN_NAMES.encode('ann');
  const written = [0, 1, 2, 3].map((k) => {
    const target = OWN_NAMES.writeExample(item, k, -1, out, 0);
    return exampleKey(out, target);
  });
  assert.deepEqual(written, examplesOf(['ann']));
});

test('own names: every training name\'s characters once an epoch, a held-out name never, each name whole on one side', async () => {
  const names = [split.train.slice(0, 40), split.train.slice(40, 50), [] as string[], split.train.slice(50, 120)];
  const stores = names.map((list, i) => storeOf(1_000 + i, list));
  const config = ownNamesConfig();
  // No dataset test split beside them: each device holds out a fifth of its names to score.
  const steps = await epochOf(stores.map((s) => new OwnDataSource(config, s)));
  const training = stores.flatMap((s, i) => names[i]!.filter((_, seq) => !isHeldOut(s.key, seq)));
  const heldOut = stores.flatMap((s, i) => names[i]!.filter((_, seq) => isHeldOut(s.key, seq)));
  assert.ok(heldOut.length > 0 && training.length > 80, `${training.length} training names, ${heldOut.length} held out`);
  assert.deepEqual(sorted(steps.flat()), sorted(examplesOf(training)), 'each training name\'s examples once, no held-out name\'s');
  assert.ok(steps.length > 10, `${steps.length} steps`);

  // Scoring in place takes the held-out names whole.
  const scoring = new OwnDataSource(config, stores[0]!);
  const shard = scoring.testShard(0, 1);
  const features = new Float32Array(shard.count * CONTEXT);
  const labels = new Int32Array(shard.count);
  await scoring.readTest(shard.start, shard.count, features, labels);
  const scored = Array.from({ length: shard.count }, (_, i) => exampleKey(features.subarray(i * CONTEXT, (i + 1) * CONTEXT), labels[i]!));
  assert.deepEqual(sorted(scored), sorted(examplesOf(names[0]!.filter((_, seq) => isHeldOut(stores[0]!.key, seq)))));
});

test('own names beside the dataset\'s held-out names: none held out; deleted names are skipped and keep their places', async () => {
  const names = [split.train.slice(200, 260), split.train.slice(300, 330), split.train.slice(400, 480)];
  const config = ownNamesConfig();
  const test: DataSource = inMemoryShards(config, data, namesTask.example);
  const run = (stores: MemoryOwnExamples[]) => epochOf(stores.map((s) => new OwnDataSource(config, s, test)));
  const all = await run(names.map((list, i) => storeOf(2_000 + i, list)));
  assert.deepEqual(sorted(all.flat()), sorted(examplesOf(names.flat())), 'every name trained once: the dataset\'s held-out names score the run');

  // The student on device 2 takes back ten names: the line keeps their places (the same
  // steps), and nothing of theirs is trained.
  const stores = names.map((list, i) => storeOf(2_000 + i, list));
  for (let seq = 70; seq < 80; seq++) stores[2]!.delete(seq);
  const after = await run(stores);
  assert.deepEqual(sorted(after.flat()), sorted(examplesOf([...names[0]!, ...names[1]!, ...names[2]!.slice(0, 70)])));
  assert.equal(after.length, all.length, 'the same steps: a deleted name keeps its places');
  assert.equal(countByLabel(stores[2]!).names, 70);
  // Its tombstone keeps the name's size, which its places are counted by.
  assert.deepEqual(stores[2]!.examples.slice(70).map((e) => [e.pixels, e.size]), names[2]!.slice(70).map((n) => [null, n.length]));
});

test('three devices with names of their own train the names model under secure aggregation: bit-identical replicas, the loss falls, the dataset\'s held-out names score it', async () => {
  const config = ownNamesConfig({ epochs: 3, warmupSteps: 0, learningRate: 0.01 });
  assert.deepEqual([config.secureAggregation, config.wire, config.classes], [true, 'fp32', namesTask.outputs], 'own names are secure by default, on the fp32 wire, over the task\'s symbols');
  // Names from the whole alphabet (the split is sorted), unequal shares: 210, 140 and 70.
  const spread = (k: number, count: number) => split.train.filter((_, i) => i % 36 === k).slice(0, count);
  const stores = [storeOf(31, spread(0, 210)), storeOf(32, spread(1, 140)), storeOf(33, spread(2, 70))];
  const test: DataSource = inMemoryShards(config, data, namesTask.example);
  const mesh = createSecureMesh(3);
  const trainers = mesh.secure.map((collective, r) => new Trainer(config, new OwnDataSource(config, stores[r]!, test), collective));
  await Promise.all(trainers.map((t) => t.syncState()));
  // An evaluation sums every rank's held-out loss: all three score together.
  const before = (await Promise.all(trainers.map((t) => t.evaluate())))[0]!.loss;
  const losses: number[] = [];
  while (!trainers[0]!.finished) {
    const results = await Promise.all(trainers.map((t) => t.trainStep()));
    losses.push(results[0]!.loss);
  }
  assert.equal(new Set(await Promise.all(trainers.map((t) => t.weightsHash()))).size, 1, 'replicas end bit-identical');
  const scores = await Promise.all(trainers.map((t) => t.evaluate()));
  assert.equal(new Set(scores.map((s) => s!.loss)).size, 1);
  assert.ok(scores[0]!.loss < before - 0.4, `held out ${before} -> ${scores[0]!.loss} nats per character`);
  assert.ok(losses.at(-1)! < losses[0]!, `loss ${losses[0]} -> ${losses.at(-1)}`);
  for (const t of trainers) await t.dispose();
});

test('a Node worker\'s names folder: every .txt file, one name a line, read as typed; a bad line or file is named and the rest load', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'own-names-'));
  writeFileSync(path.join(dir, 'a.txt'), 'Ann\n\nzoë\nJo-Ann\r\n');
  writeFileSync(path.join(dir, 'b.txt'), 'bob\n');
  writeFileSync(path.join(dir, 'notes.md'), 'not names');
  mkdirSync(path.join(dir, 'c.txt'));
  const { store, errors } = readOwnNames(dir);
  assert.deepEqual(store.examples.map((e) => [e.label, OWN_NAMES.decode(e.pixels!)]), [['names', 'ann'], ['names', 'jo-ann'], ['names', 'bob']]);
  assert.equal(errors.length, 3, errors.join('\n'));
  assert.match(errors.find((e) => e.includes('a.txt:3'))!, /letters a–z/);
  assert.ok(errors.some((e) => e.includes('notes.md')) && errors.some((e) => e.includes('c.txt')));
  // The same names are the same device to a resumed run.
  assert.equal(readOwnNames(dir).store.key, store.key);
});
