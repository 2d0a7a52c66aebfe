/**
 * The class's account of each epoch (shared/training/epoch-tally.ts): examples trained and
 * the mean step loss, part of the replicated state and of checkpoints, so that every replica
 * (a joiner, a survivor a hand-over moved past a step) and a resumed run report the same
 * epoch. End to end: test/class/names.test.ts (a kill -9: every epoch exactly the split)
 * and test/class/example-node.test.ts (both survivors' History equal).
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { EPOCH_TALLY_FLOATS, EpochTally } from '../../shared/training/epoch-tally';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { Trainer } from '../../shared/training/trainer';
import { applyCheckpoint, captureCheckpoint } from '../../shared/checkpoints/checkpoint-io';
import { checkpointMetadataSchema } from '../../shared/checkpoints/checkpoint';
import { createMemoryRing } from '../support/memory-ring';
import { mnistShards, mnistSubset } from '../support/mnist';

before(async () => {
  await tf.setBackend('cpu');
});

test('an account is whole from the epoch\'s first example or from the end of the one before; its mean is the float32 mean of the steps that trained something', () => {
  const resumed = new EpochTally();
  resumed.add(0, 96, 32, 1.5);
  resumed.add(0, 128, 32, 0.1);
  assert.deepEqual(resumed.of(0), { epoch: 0, examples: 64, meanLoss: Math.fround(Math.fround(Math.fround(1.5) + Math.fround(0.1)) / 2), steps: 2, whole: false });
  resumed.add(1, 0, 10, 0.5);
  // A step in which nobody trained anything (every example deleted) counts no loss.
  resumed.add(1, 10, 0, 0);
  assert.deepEqual(resumed.of(1), { epoch: 1, examples: 10, meanLoss: 0.5, steps: 1, whole: true });
  assert.equal(resumed.of(0)!.examples, 64, 'the epoch before stays readable');
  assert.deepEqual(resumed.recent().map((c) => c.epoch), [1, 0]);
  assert.equal(resumed.of(3), null);
  resumed.add(2, 20, 5, 0.25);
  assert.equal(resumed.of(2)!.whole, true, 'the account of epoch 1 was open when epoch 2 began');
  assert.equal(resumed.of(0), null, 'only the open epoch and the one before are kept');
});

test('the hand-over carries the accounts bit-exact, and a checkpoint\'s accounts restore them', () => {
  const chief = new EpochTally();
  for (let i = 0; i < 7; i++) chief.add(0, i * 30, 30, 2.302585 - i * 0.1234567);
  chief.add(1, 0, 30, 0.7);
  const state = new Float32Array(3 + EPOCH_TALLY_FLOATS);
  chief.write(state, 3);
  const taker = new EpochTally();
  taker.add(0, 60, 30, 9); // its own, partial view: replaced
  taker.read(state, 3);
  assert.deepEqual(taker.recent(), chief.recent());
  assert.deepEqual(taker.accounts(), chief.accounts());
  // Summing on from the taken state gives the chief's sums, bit for bit.
  for (const t of [chief, taker]) t.add(1, 30, 30, 0.3333333);
  assert.deepEqual(taker.of(1), chief.of(1));
  const restored = new EpochTally();
  restored.restore(JSON.parse(JSON.stringify(chief.accounts())));
  assert.deepEqual(restored.recent(), chief.recent(), 'through JSON, as a checkpoint keeps them');
  restored.restore([]);
  assert.deepEqual(restored.recent(), []);
});

test('a joiner takes the class\'s account with the state, and a run resumed from a checkpoint mid-epoch counts the epoch whole with the same mean loss', async () => {
  const dataset = mnistSubset();
  const config = startConfigSchema.parse({ model: 'mlp', batchSizePerWorker: 400, warmupSteps: 0, epochs: 1, seed: 5 });
  const first = createMemoryRing(2, { generation: 1 });
  const pair = first.rings.map((ring) => new Trainer(config, mnistShards(config, dataset), ring));
  await Promise.all(pair.map((t) => t.syncState()));
  for (let s = 0; s < 3; s++) await Promise.all(pair.map((t) => t.trainStep()));
  assert.deepEqual(pair[0]!.tally.of(0), { ...pair[0]!.tally.of(0)!, examples: 2_400, steps: 3, whole: true });

  const joiner = new Trainer(config, mnistShards(config, dataset), createMemoryRing(1).rings[0]!);
  const ring = [...pair, joiner];
  const second = createMemoryRing(3, { generation: 2 });
  ring.forEach((t, r) => t.setCollective(second.rings[r]!));
  await Promise.all(ring.map((t) => t.syncState()));
  assert.deepEqual(joiner.tally.accounts(), pair[0]!.tally.accounts(), 'the joiner counts the epoch from its start');

  const captured = await captureCheckpoint(pair[0]!, { room: 'r', run: 1, backend: 'cpu', members: [] });
  assert.deepEqual(checkpointMetadataSchema.parse(captured.metadata).epochTally, pair[0]!.tally.accounts(), 'the metadata keeps the accounts and passes the edge');
  const resumed = new Trainer(config, mnistShards(config, dataset), createMemoryRing(1).rings[0]!);
  await applyCheckpoint(resumed, captured);
  assert.deepEqual(resumed.tally.accounts(), pair[0]!.tally.accounts());
  // Nothing before the accounts: a run resumed from such a checkpoint counts from where it resumed.
  const { epochTally: _dropped, ...older } = captured.metadata;
  const fromOlder = new Trainer(config, mnistShards(config, dataset), createMemoryRing(1).rings[0]!);
  await applyCheckpoint(fromOlder, { ...captured, metadata: older });
  assert.deepEqual(fromOlder.tally.accounts(), []);

  while (!ring[0]!.finished) await Promise.all(ring.map((t) => t.trainStep()));
  const epoch = ring.map((t) => t.tally.of(0));
  assert.equal(new Set(epoch.map((c) => JSON.stringify(c))).size, 1, 'every replica holds the same account');
  assert.deepEqual([epoch[0]!.examples, epoch[0]!.whole], [dataset.train.count, true], 'each example once, counted whole on the joiner too');
  for (const t of [...ring, resumed, fromOlder]) t.dispose();
});
