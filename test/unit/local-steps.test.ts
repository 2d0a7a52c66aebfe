/**
 * Local steps (shared/training/local-rounds.ts): a round of H steps each rank trains alone,
 * then one outer step on the examples-weighted mean change in weights. Real trainers, real
 * MNIST digits, the in-memory ring.
 */
import { startConfigSchema, storedConfigSchema } from '../../shared/tasks/start-config';
import { DriftCorrection } from '../../shared/training/drift-correction';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { mnistShards, mnistSubset } from '../support/mnist';
import { createMemoryRing } from '../support/memory-ring';
import { Trainer } from '../../shared/training/trainer';
import type { DataSource } from '../../shared/data/data-source';
import { shardOf, type GlobalBatch } from '../../shared/data/batch-plan';
import { EpochPermutation } from '../../shared/data/sharding';
import { replicaRecipe, type StartConfig } from '../../shared/protocol';
import type { LoadedDataset } from '../../shared/tasks/task';
import { OuterOptimizer } from '../../shared/training/outer-optimizer';
import { applyCheckpoint, captureCheckpoint, splitOuterMomentum } from '../../shared/checkpoints/checkpoint-io';
import { checkpointMetadataSchema } from '../../shared/checkpoints/checkpoint';

let dataset: LoadedDataset;

before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

/** The first `trainCount` training digits alone: an epoch in a few dozen steps. */
function smallDataset(trainCount: number): LoadedDataset {
  const train = { count: trainCount, labels: dataset.train.labels.subarray(0, trainCount), features: dataset.train.features.subarray(0, trainCount * 784) };
  return { train, test: { count: 0, labels: new Uint8Array(0), features: new Uint8Array(0) } };
}

function trainersOn(config: StartConfig, n: number, data: LoadedDataset = dataset, ring = createMemoryRing(n)): Trainer[] {
  return ring.rings.map((r) => new Trainer(config, mnistShards(config, data), r));
}

async function maxDiff(a: Trainer, b: Trainer): Promise<number> {
  const [x, y] = await Promise.all([a.readWeights(), b.readWeights()]);
  let d = 0;
  for (let i = 0; i < x.length; i++) d = Math.max(d, Math.abs(x[i]! - y[i]!));
  return d;
}

test('with inner SGD, H = 1 and an outer SGD at rate 1 without momentum, local steps equal every-step sync (1e-6 per weight)', async () => {
  const common = { optimizer: 'sgd', learningRate: 0.1, batchSizePerWorker: 16, seed: 11, wire: 'fp32' } as const;
  const sync = startConfigSchema.parse({ ...common, sync: 'every-step' });
  const local = startConfigSchema.parse({ ...common, sync: 'local-steps', localSteps: 1, localOptimizer: 'sgd', localLearningRate: 0.1, outerOptimizer: 'sgd', outerLearningRate: 1, outerMomentum: 0 });
  const a = trainersOn(sync, 3);
  const b = trainersOn(local, 3);
  for (let s = 0; s < 6; s++) {
    const [ra, rb] = await Promise.all([Promise.all(a.map((t) => t.trainStep())), Promise.all(b.map((t) => t.trainStep()))]);
    assert.equal(rb[0]!.steps, 1);
    assert.equal(rb[0]!.round, s + 1);
    assert.ok(Math.abs(ra[0]!.loss - rb[0]!.loss) < 1e-5, `step ${s}: loss ${ra[0]!.loss} against ${rb[0]!.loss}`);
  }
  for (let r = 0; r < 3; r++) {
    const d = await maxDiff(a[r]!, b[r]!);
    assert.ok(d <= 1e-6, `rank ${r}: the weights differ by up to ${d}`);
  }
  assert.deepEqual(a.map((t) => t.dataCursor), b.map((t) => t.dataCursor));
  for (const t of [...a, ...b]) await t.dispose();
});

test('on the defaults (plain SGD inside, Nesterov outside, fp16) the replicas are bit-identical after every outer step, and tensors stay flat', async () => {
  const config = startConfigSchema.parse({ sync: 'local-steps', localSteps: 5, batchSizePerWorker: 16, seed: 3 });
  assert.equal(config.wire, 'fp16', 'a local-steps run sends its round in fp16 by default');
  assert.equal(startConfigSchema.parse({ sync: 'local-steps', data: 'own', classes: ['a', 'b'] }).wire, 'fp32', 'a secure one in fp32');
  const trainers = trainersOn(config, 3);
  let tensors = 0;
  const losses: number[] = [];
  for (let round = 0; round < 6; round++) {
    const results = await Promise.all(trainers.map((t) => t.trainStep()));
    const hashes = new Set(await Promise.all(trainers.map((t) => t.weightsHash())));
    assert.equal(hashes.size, 1, `round ${round}: replicas differ`);
    for (const r of results) {
      assert.equal(r.steps, 5);
      assert.equal(r.round, round + 1);
      assert.ok(r.hashChecked && !r.hashMismatch, 'every round compares the hashes, and they agree');
    }
    assert.equal(results[0]!.globalBatchSize, 5 * 48, 'the round trained five global batches');
    assert.deepEqual(trainers.map((t) => t.step), [5, 5, 5].map((h) => h * (round + 1)));
    losses.push(results[0]!.loss);
    if (round === 0) tensors = tf.memory().numTensors;
  }
  assert.equal(tf.memory().numTensors, tensors, 'no tensor leaks across rounds');
  assert.ok(losses.at(-1)! < losses[0]! * 0.6, `the loss fell: ${losses.map((l) => l.toFixed(3)).join(', ')}`);
  // The outer momentum is the same on every replica too.
  const m0 = trainers[0]!.outer!.momentum;
  for (const t of trainers) assert.ok(Buffer.from(t.outer!.momentum.buffer).equals(Buffer.from(m0.buffer)));
  assert.ok(m0.some((x) => x !== 0));
  for (const t of trainers) await t.dispose();
});

test("the inner optimizer: plain SGD at the task's rate by default, the run's own optimizer every step, a teacher's choice kept, and an old stored run read as it trained", () => {
  const local = startConfigSchema.parse({ sync: 'local-steps' });
  assert.deepEqual([local.optimizer, local.localOptimizer, local.localLearningRate], ['adam', 'sgd', 0.3]);
  assert.deepEqual(replicaRecipe(local).optimizer, 'sgd', 'the replica of a local-steps run is built with the inner optimizer');
  assert.equal(replicaRecipe(local).learningRate, 0.3);
  const sync = startConfigSchema.parse({});
  assert.deepEqual([replicaRecipe(sync).optimizer, replicaRecipe(sync).learningRate], ['adam', 0.003], 'every step trains with the run\'s optimizer');
  const chosen = startConfigSchema.parse({ sync: 'local-steps', localOptimizer: 'adam', localLearningRate: 0.001 });
  assert.deepEqual([replicaRecipe(chosen).optimizer, replicaRecipe(chosen).learningRate], ['adam', 0.001]);
  // A room.json or checkpoint written before the field: its rounds trained with Adam, and its checkpoints hold Adam's state.
  const { localOptimizer, localLearningRate, localCorrection, ...old } = local;
  assert.ok(localOptimizer && localLearningRate && localCorrection);
  const stored = storedConfigSchema.parse(old);
  assert.deepEqual([stored.localOptimizer, stored.localLearningRate], ['adam', 0.003]);
  assert.equal(startConfigSchema.safeParse({ sync: 'local-steps', localOptimizer: 'lion' }).success, false, 'an unknown optimizer is refused at the edge');
});

test('the drift correction: after a round, each local step adds (own change − class change) / own steps; nothing before a pair, or after a round that trained nothing here', () => {
  const c = new DriftCorrection(3);
  assert.equal(c.drift(), null, 'no round yet');
  c.trained([1, 1, 1], [0.8, 1.2, 1], 4); // own change d = (0.2, −0.2, 0)
  assert.equal(c.drift(), null, 'the class\'s change has not arrived');
  c.summed([0.05, 0.05, -0.1], 2); // Δ = (0.1, 0.1, −0.2)
  const drift = c.drift()!;
  const want = [(0.2 - 0.1) / 4, (-0.2 - 0.1) / 4, (0 + 0.2) / 4];
  want.forEach((w, i) => assert.ok(Math.abs(drift[i]! - w) < 1e-7, `weight ${i}: ${drift[i]} against ${w}`));
  c.reset();
  assert.equal(c.drift(), null, 'a round that trained nothing here forgets the pair');
  c.summed([1, 1, 1], 1);
  assert.equal(c.drift(), null, 'a sum without a trained round of this device makes no pair');
});

test("'scaffold' corrects the local steps (the weights leave the uncorrected path from the second round) and the replicas stay bit-identical every round", async () => {
  const common = { sync: 'local-steps', localSteps: 4, batchSizePerWorker: 16, seed: 5 } as const;
  const plain = trainersOn(startConfigSchema.parse(common), 3);
  const corrected = trainersOn(startConfigSchema.parse({ ...common, localCorrection: 'scaffold' }), 3);
  const diffs: number[] = [];
  for (let round = 0; round < 3; round++) {
    await Promise.all([...plain, ...corrected].map((t) => t.trainStep()));
    const hashes = new Set(await Promise.all(corrected.map((t) => t.weightsHash())));
    assert.equal(hashes.size, 1, `round ${round}: the corrected replicas differ`);
    diffs.push(await maxDiff(plain[0]!, corrected[0]!));
  }
  assert.equal(diffs[0], 0, 'the first round has no correction yet');
  assert.ok(diffs[1]! > 1e-4 && diffs[2]! > 1e-4, `the correction moved the weights: ${diffs.join(', ')}`);
  for (const t of [...plain, ...corrected]) await t.dispose();
});

test('the outer optimizer: Nesterov and heavy-ball momentum by their formulas, and FedAvg at rate 1 without momentum', () => {
  const nesterov = new OuterOptimizer({ outerOptimizer: 'nesterov', outerLearningRate: 0.5, outerMomentum: 0.9 }, 2);
  const w = new Float32Array([1, 2]);
  nesterov.step(w, new Float32Array([0.1, -0.2]));
  // m = Δ; w − η(Δ + μm) = w − 0.5 · 1.9Δ
  assert.ok(Math.abs(w[0]! - (1 - 0.5 * 1.9 * 0.1)) < 1e-6 && Math.abs(w[1]! - (2 + 0.5 * 1.9 * 0.2)) < 1e-6);
  nesterov.step(w, new Float32Array([0.1, -0.2]));
  // m = 1.9Δ; w − η(Δ + 0.9 · 1.9Δ)
  assert.ok(Math.abs(w[0]! - (1 - 0.5 * 1.9 * 0.1 - 0.5 * (1 + 0.9 * 1.9) * 0.1)) < 1e-6);
  const heavy = new OuterOptimizer({ outerOptimizer: 'sgd', outerLearningRate: 1, outerMomentum: 0.5 }, 1);
  const v = new Float32Array([0]);
  heavy.step(v, new Float32Array([1]));
  heavy.step(v, new Float32Array([1]));
  assert.ok(Math.abs(v[0]! - -(1 + 1.5)) < 1e-6);
  const fedAvg = new OuterOptimizer({ outerOptimizer: 'nesterov', outerLearningRate: 1, outerMomentum: 0 }, 1);
  const u = new Float32Array([3]);
  fedAvg.step(u, new Float32Array([3 - 2.5]));
  assert.equal(u[0], 2.5, 'the weights become the mean of the local weights');
  assert.throws(() => fedAvg.restore(new Float32Array(2)), /outer momentum of 2 floats/);
});

test('every example is trained once per epoch under unequal shares, rounds end with their epoch', async () => {
  const data = smallDataset(331); // prime: every epoch ends in a short batch
  const config = startConfigSchema.parse({ sync: 'local-steps', localSteps: 4, batchSizePerWorker: 8, seed: 5, epochs: 3 });
  const perm = new EpochPermutation(data.train.count, config.seed);
  const seen = new Map<number, number[]>();
  const ring = createMemoryRing(3);
  const trainers = ring.rings.map((r, rank) => {
    const source = mnistShards(config, data);
    const read = source.readShard.bind(source);
    // Record every example each rank reads, by its index in the epoch's permutation.
    (source as DataSource).readShard = (batch: GlobalBatch, rk: number, images: Float32Array, labels: Int32Array) => {
      const indices = perm.sliceInto(new Uint32Array(batch.slices[rk]!), batch, rk);
      let counts = seen.get(batch.epoch);
      if (!counts) seen.set(batch.epoch, (counts = new Array<number>(data.train.count).fill(0)));
      for (const i of indices) counts[i]!++;
      assert.equal(shardOf(batch, rk).count, indices.length);
      return read(batch, rk, images, labels);
    };
    void rank;
    return new Trainer(config, source, r);
  });
  // Rank 2 is four times as fast as rank 0: the balancer gives it the larger slices.
  for (const t of trainers) t.seedShares([4, 2, 1]);
  let unequal = false;
  let rounds = 0;
  while (!trainers[0]!.finished) {
    const results = await Promise.all(trainers.map((t) => t.trainStep()));
    rounds++;
    if (results[2]!.examples > results[0]!.examples * 2) unequal = true;
    for (const t of trainers) if (t.pendingEvaluation !== null) t.pendingEvaluation = null;
    if (results[0]!.epochEnd) assert.equal(trainers[0]!.dataCursor.offset, 0, 'the round ended with its epoch');
  }
  assert.ok(unequal, 'the shares were unequal');
  assert.deepEqual([...seen.keys()], [0, 1, 2]);
  for (const [epoch, counts] of seen) {
    const wrong = counts.filter((c) => c !== 1).length;
    assert.equal(wrong, 0, `epoch ${epoch}: ${wrong} examples trained other than once`);
  }
  // 14 global batches of 24 per epoch (the last short): rounds of 4, 4, 4, 2.
  assert.equal(rounds, 3 * 4);
  for (const t of trainers) await t.dispose();
});

test('a member lost mid-round loses only its own round: the survivors sum what they kept, weighted by their examples', async () => {
  const config = startConfigSchema.parse({ sync: 'local-steps', localSteps: 3, batchSizePerWorker: 8, seed: 9, balanceShares: false });
  const first = createMemoryRing(3, { generation: 1, timeoutMs: 400 });
  const trainers = trainersOn(config, 3, dataset, first);
  await Promise.all(trainers.map((t) => t.trainStep()));
  const anchor = await trainers[0]!.weightsHash();
  // Round 2: rank 2 trains its local steps, then vanishes before the all-reduce; the survivors time out.
  const survivors = trainers.slice(0, 2);
  const failed = await Promise.allSettled(survivors.map((t) => t.trainStep()));
  assert.ok(failed.every((f) => f.status === 'rejected'), 'the all-reduce failed without rank 2');
  await trainers[2]!.dispose();
  // Both survivors stand at the class's state, owing the round they trained.
  assert.deepEqual(await Promise.all(survivors.map((t) => t.weightsHash())), [anchor, anchor]);
  assert.deepEqual(survivors.map((t) => t.step), [3, 3]);

  // A joiner arrives in the same new generation: it owes nothing of that round and sends zeros.
  const joiner = new Trainer(config, mnistShards(config, dataset), createMemoryRing(1).rings[0]!);
  const ring = [...survivors, joiner];
  const second = createMemoryRing(3, { generation: 2 });
  ring.forEach((t, r) => t.setCollective(second.rings[r]!));
  assert.deepEqual(await Promise.all(ring.map((t) => t.syncState())), [1, 1, 1], 'the joiner took the state, with the round owed');
  const t0 = performance.now();
  const finished = await Promise.all(ring.map((t) => t.trainStep()));
  const finishMs = performance.now() - t0;
  // Two survivors' shares of three global batches of 24: the lost member's third is not trained.
  assert.deepEqual(finished.map((r) => r.globalBatchSize), [48, 48, 48]);
  assert.deepEqual(finished.map((r) => r.examples), [24, 24, 0]);
  assert.ok(finished.every((r) => r.finishing && r.steps === 3));
  assert.deepEqual(ring.map((t) => t.step), [6, 6, 6], 'the round is not trained again');
  assert.deepEqual(ring.map((t) => t.dataCursor), ring.map(() => ({ epoch: 0, offset: 6 * 24 })));
  assert.equal(new Set(await Promise.all(ring.map((t) => t.weightsHash()))).size, 1);
  assert.notEqual(await ring[0]!.weightsHash(), anchor, 'the outer step applied the survivors’ change');
  // The next round is a normal one for all three.
  const next = await Promise.all(ring.map((t) => t.trainStep()));
  assert.deepEqual(next.map((r) => r.globalBatchSize), [72, 72, 72]);
  assert.ok(next.every((r) => !r.finishing));
  assert.equal(new Set(await Promise.all(ring.map((t) => t.weightsHash()))).size, 1);
  assert.ok(finishMs < 2000, `finishing the kept round took ${finishMs.toFixed(0)} ms`);
  for (const t of ring) await t.dispose();
});

test('a checkpoint round-trips the outer state: the momentum, the weights at the last sync, the round and the cursor', async () => {
  const config = startConfigSchema.parse({ sync: 'local-steps', localSteps: 4, batchSizePerWorker: 8, seed: 21 });
  const [a] = trainersOn(config, 1);
  for (let r = 0; r < 3; r++) await a!.trainStep();
  const captured = await captureCheckpoint(a!, { room: 'lab', run: 1, backend: 'cpu', members: [] });
  assert.equal(captured.metadata.round, 3);
  assert.equal(captured.metadata.step, 12);
  assert.ok(checkpointMetadataSchema.safeParse(captured.metadata).success);
  const split = splitOuterMomentum(captured.optimizerSpecs, captured.optimizerData);
  assert.ok(split.momentum && Buffer.from(split.momentum.buffer).equals(Buffer.from(a!.outer!.momentum.buffer)), 'optimizer.bin ends with the momentum');

  const [b] = trainersOn(config, 1);
  await applyCheckpoint(b!, captured);
  assert.equal(b!.round, 3);
  assert.equal(b!.step, 12);
  assert.deepEqual(b!.dataCursor, a!.dataCursor);
  assert.equal(await b!.weightsHash(), await a!.weightsHash());
  // Resumed exactly: the next round is the same on both.
  const [ra, rb] = [await a!.trainStep(), await b!.trainStep()];
  assert.equal(ra.loss, rb.loss);
  assert.equal(await b!.weightsHash(), await a!.weightsHash());
  // The weights alone still load into a plain model, as tf.loadLayersModel does.
  const model = await tf.loadLayersModel(tf.io.fromMemory({ modelTopology: captured.artifacts.modelTopology, weightSpecs: captured.artifacts.weightSpecs, weightData: captured.weights.slice().buffer }));
  assert.equal(model.countParams(), a!.parameterCount);
  model.dispose();
  await a!.dispose();
  await b!.dispose();
});

test("a round's all-reduce waits for the slowest rank's whole round, past the engine's timeout, where every step would time out", async () => {
  const config = startConfigSchema.parse({ sync: 'local-steps', localSteps: 2, batchSizePerWorker: 8, seed: 4, balanceShares: false });
  // Rank 2's rounds take 250 ms more, then 600: longer than the engine's 400 ms, within 4× its last round.
  const slow = { slowComputeMs: (step: number) => (step === 0 ? 250 : step === 2 ? 600 : 0) };
  const ring = createMemoryRing(3, { timeoutMs: 400 });
  const trainers = ring.rings.map((r, rank) => new Trainer(config, mnistShards(config, dataset), r, rank === 2 ? { faults: slow } : {}));
  for (let round = 0; round < 2; round++) await Promise.all(trainers.map((t) => t.trainStep()));
  assert.deepEqual(trainers.map((t) => t.step), [4, 4, 4]);
  assert.equal(new Set(await Promise.all(trainers.map((t) => t.weightsHash()))).size, 1);
  for (const t of trainers) await t.dispose();
  // Every step: the same wait is past the engine's timeout.
  const sync = startConfigSchema.parse({ batchSizePerWorker: 8, seed: 4, balanceShares: false });
  const syncRing = createMemoryRing(3, { timeoutMs: 400 });
  const syncTrainers = syncRing.rings.map((r, rank) => new Trainer(sync, mnistShards(sync, dataset), r, rank === 2 ? { faults: { slowComputeMs: () => 600 } } : {}));
  const results = await Promise.allSettled(syncTrainers.map((t) => t.trainStep()));
  assert.ok(results.slice(0, 2).every((r) => r.status === 'rejected' && /timed out after 400 ms/.test(String(r.reason))));
  for (const t of syncTrainers) await t.dispose();
});

test('the advice: local steps when the all-reduce outweighs the compute, every step when it does not, with the reason in one sentence', async () => {
  const { adviseSync } = await import('../../shared/training/sync-advice');
  const timing = (computeMs: number, commMs: number) => ({ dataMs: 0, computeMs, readbackMs: 0, crossMs: 0, commMs, applyMs: 0 });
  const every = startConfigSchema.parse({});
  // A school uplink: the all-reduce takes 3× the compute. Every step: 40 ms a step; local steps: 10 + 15/10.
  const slow = adviseSync(every, timing(10, 30), 1)!;
  assert.equal(slow.suggest, 'local-steps');
  assert.ok(Math.abs(slow.speedup - 40 / 11.5) < 1e-9);
  assert.equal(slow.sentence, "On this network a step's all-reduce takes 3.0× its compute: local steps (10 per round) would train about 3.5× faster.");
  // A good network: the all-reduce is a tenth of the compute.
  const fast = adviseSync(every, timing(100, 10), 1)!;
  assert.equal(fast.suggest, 'every-step');
  assert.match(fast.sentence, /^Every step is the right choice here: a step's all-reduce takes 0\.1× its compute/);
  // In a local-steps run the turn is a round of 20 steps: its compute is per step over 20.
  const local = startConfigSchema.parse({ sync: 'local-steps' });
  const stay = adviseSync(local, timing(200, 15), 20)!;
  assert.equal(stay.suggest, 'local-steps');
  assert.match(stay.sentence, /^Local steps pay on this network/);
  const back = adviseSync(local, timing(2000, 5), 20)!;
  assert.equal(back.suggest, 'every-step');
  assert.match(back.sentence, /choose every step\.$/);
  assert.equal(adviseSync(every, timing(0, 10), 1), null, 'no advice before a compute time');
});

test("the server's checkpoint guard counts turns: a round's report one round ahead of the chief's still vouches, and an upload a round ahead is not a forgery", async () => {
  const { CheckpointGuard, newCheckpointGuard, CHECKPOINT_STEPS_AHEAD } = await import('../../signaling-server/rooms/checkpoint-guard');
  const H = 100;
  const guard = new CheckpointGuard(newCheckpointGuard(0));
  // A classmate's report of round 2 (step 200) arrives while the room still shows the chief's step 100.
  assert.deepEqual(guard.noteReport('m1', 200, '00000000000000aa', 100, 50, H), []);
  guard.admitStep(200, 100, H);
  assert.deepEqual(guard.noteCheckpoint('ck-1', 200, '00000000000000aa', 'chief', false), { state: 'vouched', by: 'm1' });
  // Every step: the same report is past the margin and is not kept; far past a round it is a forgery.
  const everyStep = new CheckpointGuard(newCheckpointGuard(0));
  everyStep.noteReport('m1', 200, '00000000000000aa', 100, 50);
  assert.equal(everyStep.noteCheckpoint('ck-2', 200, '00000000000000aa', 'chief', false).state, 'unvouched');
  assert.throws(() => guard.admitStep(100 + CHECKPOINT_STEPS_AHEAD * H + 1, 100, H), /at most/);
});

test('issue 38 (7): a member that floods future-step reports pushes out only its own, and the honest hash still vouches the next checkpoint (failed on the previous main)', async () => {
  const { CheckpointGuard, newCheckpointGuard, CHECKPOINT_STEPS_AHEAD } = await import('../../signaling-server/rooms/checkpoint-guard');
  const H = 20;
  const guard = new CheckpointGuard(newCheckpointGuard(0));
  // An honest classmate's report of round 5 (step 100), while the chief's step is 80.
  guard.noteReport('honest', 100, '00000000000000aa', 80, 100, H);
  // 400 reports of distinct steps within the margin, each with its own hash.
  for (let i = 1; i <= 400; i++) guard.noteReport('flooder', 80 + i, i.toString(16).padStart(16, '0'), 80, 100, H);
  assert.ok(400 <= CHECKPOINT_STEPS_AHEAD * H, 'every flooded step lies inside the margin');
  guard.admitStep(100, 80, H);
  assert.deepEqual(guard.noteCheckpoint('ck-100', 100, '00000000000000aa', 'chief', false), { state: 'vouched', by: 'honest' });
});
