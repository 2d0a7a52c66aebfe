/**
 * A peer's roster entries (shared/data/own-data.ts) are range-checked where they are
 * read: the agreement every step carries (each rank's store key, count and last seq) and the
 * roster a hand-over's state carries. A count of 1e10 or −5 used to reach EpochLine and throw
 * a RangeError on every replica; now every replica refuses it with ERR_BAD_DATA, alike.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { createMemoryRing } from '../support/memory-ring';
import { Trainer } from '../../shared/training/trainer';
import { OwnDataSource } from '../../shared/data/own-data';
import { MemoryOwnExamples } from '../../shared/data/own-examples';
import { MAX_ROOM_MEMBERS, type StartConfig } from '../../shared/protocol';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import { WebringError } from '../../shared/protocol/errors';

before(async () => {
  await tf.setBackend('cpu');
});

const config: StartConfig = startConfigSchema.parse({ model: 'mlp', optimizer: 'adam', learningRate: 0.003, warmupSteps: 0, batchSizePerWorker: 4, seed: 5, data: 'own', classes: ['a', 'b'] });

/** A store of `count` examples, alternating between the two classes. */
function storeOf(key: number, count: number): MemoryOwnExamples {
  const store = new MemoryOwnExamples(key);
  for (let i = 0; i < count; i++) store.add(i % 2 ? 'a' : 'b', new Float32Array(MNIST_PIXELS).fill(i / count));
  return store;
}

/** A peer that writes `entry` (key high word, low word, count, last seq + 1) as its holding. */
class LyingSource extends OwnDataSource {
  constructor(private readonly entry: readonly number[]) {
    super(config, storeOf(99, 10));
  }

  override writeOwn(out: Float32Array, at: number): void {
    out.set(this.entry, at);
  }
}

const isBadData = (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA';

for (const [what, entry] of [
  ['a count of 1e10', [0, 9, 1e10, 1]],
  ['a count of -5', [0, 9, -5, 1]],
  ['a fractional count', [0, 9, 2.5, 1]],
  ['a key word beyond 16 bits', [70_000, 9, 3, 3]],
  ['a last seq beyond what a store holds', [0, 9, 3, 2 ** 25]],
] as const) {
  test(`a peer's holding with ${what} is refused by every replica with ERR_BAD_DATA, and nothing throws a RangeError`, async () => {
    const { rings } = createMemoryRing(3);
    const sources = [new OwnDataSource(config, storeOf(1, 12)), new LyingSource(entry), new OwnDataSource(config, storeOf(2, 12))];
    const trainers = rings.map((ring, r) => new Trainer(config, sources[r]!, ring));
    // The hand-over's agreement is the first place the holdings arrive; every replica reads the same sum.
    const synced = await Promise.allSettled(trainers.map((t) => t.syncState()));
    assert.deepEqual(synced.map((s) => s.status), ['rejected', 'rejected', 'rejected']);
    for (const s of synced) assert.ok(s.status === 'rejected' && isBadData(s.reason), String(s.status === 'rejected' ? s.reason : ''));
    trainers.forEach((t) => t.dispose());
  });
}

test("an honest ring's holdings pass, and a step trains", async () => {
  const { rings } = createMemoryRing(2);
  const trainers = rings.map((ring, r) => new Trainer(config, new OwnDataSource(config, storeOf(r + 1, 12)), ring));
  await Promise.all(trainers.map((t) => t.syncState()));
  const steps = await Promise.all(trainers.map((t) => t.trainStep()));
  assert.ok(steps.every((s) => Number.isFinite(s.loss)));
  trainers.forEach((t) => t.dispose());
});

test("a hand-over's roster out of range is refused with ERR_BAD_DATA; an honest one round-trips", () => {
  const source = new OwnDataSource(config, storeOf(1, 12));
  const state = new Float32Array(source.stateFloats);
  const honest = { epoch: 2, devices: [{ key: 1, examples: 10, lastSeq: 11 }, { key: 0x1234_5678, examples: 7, lastSeq: 6 }] };
  const writer = new OwnDataSource(config, null);
  writer.restore(honest);
  writer.writeState(state, 0);
  source.readState(state, 0);
  assert.deepEqual(source.roster, honest);

  const forged = (change: (s: Float32Array) => void) => {
    const s = state.slice();
    change(s);
    return s;
  };
  const cases: Array<[string, Float32Array]> = [
    ['a count of 1e10', forged((s) => (s[2 + 2] = 1e10))],
    ['a count of -5', forged((s) => (s[2 + 4 + 2] = -5))],
    ['more devices than a room holds', forged((s) => (s[1] = MAX_ROOM_MEMBERS + 1))],
    ['a negative device count', forged((s) => (s[1] = -1))],
    ['two devices of 2^24 examples (the line could not place them exactly)', forged((s) => ((s[2 + 2] = 2 ** 24), (s[2 + 4 + 2] = 2 ** 24)))],
  ];
  for (const [what, s] of cases) {
    assert.throws(() => source.readState(s, 0), isBadData, what);
    assert.deepEqual(source.roster, honest, `${what}: the roster held stays`);
  }
});
