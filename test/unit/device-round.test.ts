/**
 * A local-steps round in the replica's thread (shared/compute/device-round.ts,
 * Replica.trainRound), on the device (tfjs's kernels) and on the host (the fused update):
 * the step-by-step path's weights, nothing crossing to the network thread until the round
 * ends, the class's state untouched meanwhile, and legs that add up to the same round.
 * Real MNIST digits, the CPU backend, real worker threads.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { replicaRecipe, type StartConfig } from '../../shared/protocol';
import { LocalReplica } from '../../shared/compute/local-replica';
import { ModelReplica } from '../../shared/compute/model-replica';
import { describeModel } from '../../shared/compute/program-model';
import type { Replica } from '../../shared/compute/replica';
import { ThreadCompute } from '../../shared/compute/thread-compute';
import { openNodeCompute } from '../../node-worker/node-compute';
import { RoundLegs } from '../../shared/training/round-legs';
import { digitsFrom, maxDiff, stepByStep, trainRound, type Digits } from '../support/round-check';
import { Trainer } from '../../shared/training/trainer';
import { WebringError } from '../../shared/protocol/errors';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import { mnistShards, mnistSubset } from '../support/mnist';
import { createMemoryRing } from '../support/memory-ring';
import type { LoadedDataset } from '../../shared/tasks/task';
import { tmpdir } from 'node:os';
import { selectNodeBackend } from '../../node-worker/node-backend';
import { skipUnless, swiftShaderNeeds } from '../support/requirements';

/** Chromium's SwiftShader Vulkan driver: Dawn's adapter on a machine without a GPU. */
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

const SHARE = 16;
const STEPS = 6;
let dataset: LoadedDataset;
let thread: ThreadCompute;

before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
  thread = (await openNodeCompute('cpu', 'thread')) as ThreadCompute;
});
after(async () => {
  await thread.close();
});

/** Step s's digits: SHARE real training examples from s·SHARE, scaled to [0, 1] as the data sources do. */
const DIGITS = (): Digits => digitsFrom(dataset.train.features, dataset.train.labels, SHARE, MNIST_PIXELS);
const digits = (s: number, n = SHARE) => DIGITS().of(s, n);
const deviceRound = (replica: Replica, counts: number[], rate: number, perLeg = counts.length, drift: Float32Array | null = null) => trainRound(replica, DIGITS(), counts, rate, perLeg, drift);
const stepwise = (replica: Replica, counts: number[], rate: number, drift: Float32Array | null = null) => stepByStep(replica, DIGITS(), counts, rate, drift);

function taskConfig(optimizer: 'sgd' | 'adam'): StartConfig {
  return startConfigSchema.parse({ sync: 'local-steps', localOptimizer: optimizer, localLearningRate: optimizer === 'adam' ? 0.001 : 0.1, seed: 4 });
}

for (const place of ['device', 'host'] as const) {
  for (const optimizer of ['sgd', 'adam'] as const) {
    test(`a round of inner ${optimizer} on the ${place} trains the weights the step-by-step path trains (${place === 'host' ? 'bit for bit' : '1e-5 per weight'}), with the same loss and count, and leaves the class's state as it was`, async () => {
      const config = taskConfig(optimizer);
      const recipe = replicaRecipe(config);
      assert.equal(recipe.optimizer, optimizer);
      const a = new LocalReplica({ config: { ...config, ...recipe }, roundPlace: place });
      const b = new LocalReplica({ config: { ...config, ...recipe } });
      // A state with history (Adam's moments), so that the round's start is not the blank one.
      await stepwise(a, [SHARE], recipe.learningRate);
      const history = await a.readState();
      await a.applyGradients(Float32Array.from({ length: a.parameterCount }, (_, i) => Math.sin(i) * 0.01), 0.01);
      const state = await a.readState();
      assert.notDeepEqual(state, history);
      await b.writeState(state.slice());
      const hash = await a.weightsHash();
      const counts = [SHARE, 9, 0, SHARE, 12, SHARE];
      const inRound = await deviceRound(a, counts, recipe.learningRate);
      const byStep = await stepwise(b, counts, recipe.learningRate);
      const d = maxDiff(inRound.weights, byStep.weights);
      if (place === 'host') assert.deepEqual(inRound.weights, byStep.weights, 'the fused update on the host: the same bits');
      assert.ok(d <= 1e-5, `the local weights differ by ${d}`);
      assert.ok(maxDiff(inRound.weights, state.subarray(0, a.parameterCount)) > 1e-3, 'the round moved the weights');
      assert.ok(Math.abs(inRound.loss - byStep.loss) <= 1e-3 * byStep.loss, `loss ${inRound.loss} against ${byStep.loss}`);
      assert.equal(inRound.correct, byStep.correct);
      // The class's state is the round start's: weights, optimizer state and iterations, and so the hash.
      assert.deepEqual(await a.readState(), state);
      assert.equal(await a.weightsHash(), hash);
      // And so are the variables the device computes with: both replicas score alike.
      const [sa, sb] = [await a.score({ ...digits(7), n: SHARE }), await b.score({ ...digits(7), n: SHARE })];
      assert.deepEqual([sa.loss, sa.correct], [sb.loss, sb.correct]);
      // tfjs's optimizer slots trained during the round, but a checkpoint reads the class's state.
      const snapshots = await Promise.all([a.snapshot(), b.snapshot()]);
      assert.deepEqual(snapshots[0].optimizerData, snapshots[1].optimizerData);
      await a.dispose();
      await b.dispose();
    });
  }
}

for (const place of ['device', 'host'] as const) {
  test(`on the ${place}, a round in legs trains the same bits as in one leg; between legs the hash and a state read see the round start; tensors stay flat`, async () => {
    const config = taskConfig('sgd');
    const spec = { config: { ...config, ...replicaRecipe(config) }, roundPlace: place };
    const one = new LocalReplica(spec);
    const legged = new LocalReplica(spec);
    const counts = Array.from({ length: STEPS }, () => SHARE);
    const start = await one.readState();
    const hash = await one.weightsHash();
    const whole = await deviceRound(one, counts, 0.1);
    const before = tf.memory().numTensors;
    // Two steps a leg: three crossings.
    const legs = new RoundLegs(legged.parameterCount, MNIST_PIXELS, SHARE, STEPS, 2 * SHARE * MNIST_PIXELS * 4);
    for (let from = 0; from < STEPS; from += 2) {
      for (let j = 0; j < 2; j++) {
        const slot = legs.slot(j);
        const d = digits(from + j);
        slot.features.set(d.features);
        slot.labels.set(d.labels);
        legs.set(j, SHARE, 0.1);
      }
      await legs.train(legged, 2, { first: from === 0, last: from + 2 >= STEPS, drift: null });
      if (from + 2 < STEPS) {
        assert.equal(await legged.weightsHash(), hash, 'between legs the hash is the round start');
        assert.deepEqual(await legged.readState(), start, 'and so is the state');
      }
    }
    assert.deepEqual(legs.weights, whole.weights, 'three legs of two steps: the one leg bits');
    assert.equal(await legged.weightsHash(), hash);
    await deviceRound(one, counts, 0.1);
    assert.equal(tf.memory().numTensors, before, 'a round leaves no tensor behind');
    await one.dispose();
    await legged.dispose();
  });
}

for (const place of ['device', 'host'] as const) {
  test(`the drift is added after every trained step of the round, on the ${place}`, async () => {
    const config = taskConfig('sgd');
    const spec = { config: { ...config, ...replicaRecipe(config) }, roundPlace: place };
    const a = new LocalReplica(spec);
    const b = new LocalReplica(spec);
    const drift = Float32Array.from({ length: a.parameterCount }, (_, i) => ((i % 7) - 3) * 1e-4);
    const counts = [SHARE, 0, SHARE];
    const inRound = await deviceRound(a, counts, 0.1, 3, drift.slice());
    const byStep = await stepwise(b, counts, 0.1, drift);
    const plain = await deviceRound(a, counts, 0.1);
    assert.ok(maxDiff(inRound.weights, byStep.weights) <= 1e-5, `${maxDiff(inRound.weights, byStep.weights)}`);
    assert.ok(maxDiff(inRound.weights, plain.weights) > 1e-4, 'the drift moved the weights');
    await a.dispose();
    await b.dispose();
  });
}

for (const place of ['device', 'host'] as const) {
  test(`on the ${place}, a failed leg leaves the class state; a leg without its round, or with too many examples, is refused with a code`, async () => {
    const config = taskConfig('adam');
    const replica = new LocalReplica({ config: { ...config, ...replicaRecipe(config) }, roundPlace: place });
    const start = await replica.readState();
    const legs = new RoundLegs(replica.parameterCount, MNIST_PIXELS, SHARE, 2);
    legs.set(0, SHARE, 0.1);
    legs.set(1, SHARE + 1, 0.1);
    await assert.rejects(legs.train(replica, 2, { first: true, last: true, drift: null }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA');
    assert.deepEqual(await replica.readState(), start);
    legs.set(1, SHARE, 0.1);
    await assert.rejects(legs.train(replica, 2, { first: false, last: true, drift: null }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_STATE');
    // A state written between legs ends the round: its next leg is refused, and the state written stands.
    await legs.train(replica, 1, { first: true, last: false, drift: null });
    await replica.writeState(start.slice());
    await assert.rejects(legs.train(replica, 1, { first: false, last: true, drift: null }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_STATE');
    assert.deepEqual(await replica.readState(), start);
    await replica.dispose();
  });
}

test("a program's own model trains its round on the device too, and its optimizer's slots come back to the round start", async () => {
  const model = tf.sequential({ layers: [tf.layers.dense({ inputShape: [3], units: 4, activation: 'tanh', kernelInitializer: tf.initializers.glorotUniform({ seed: 2 }) }), tf.layers.dense({ units: 1, kernelInitializer: tf.initializers.glorotUniform({ seed: 3 }) })] });
  model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
  const program = await describeModel(model, []);
  model.dispose();
  const a = await ModelReplica.build(program);
  const b = await ModelReplica.build(program);
  const rows = (s: number) => Float32Array.from({ length: 8 * 4 }, (_, i) => (i % 4 === 3 ? Math.cos(s + i) : Math.sin(s * 3 + i)));
  const legs = new RoundLegs(a.parameterCount, 4, 8, 3);
  for (let s = 0; s < 3; s++) {
    legs.slot(s).features.set(rows(s));
    legs.set(s, 8, 0.01);
  }
  const start = await a.readState();
  const done = await legs.train(a, 3, { first: true, last: true, drift: null });
  assert.ok(done.loss > 0);
  assert.deepEqual(await a.readState(), start, "weights, Adam's slots, β powers and iterations as they were");
  for (let s = 0; s < 3; s++) {
    const { flat } = await b.computeGradients({ features: rows(s), labels: new Int32Array(8), n: 8 }, new Float32Array(b.parameterCount));
    for (let i = 0; i < flat.length; i++) flat[i] = flat[i]! / 8;
    await b.applyGradients(flat, 0.01);
  }
  const d = maxDiff(legs.weights, await b.readWeights());
  assert.ok(d <= 1e-5, `the local weights differ from the step-by-step path's by ${d}`);
  await a.dispose();
  await b.dispose();
});

test('in a compute thread, a local-steps round is one call there and one answer back: no gradient crosses, no update waits', async () => {
  const config = startConfigSchema.parse({ sync: 'local-steps', localSteps: 10, batchSizePerWorker: SHARE, seed: 6 });
  const calls: string[] = [];
  let recording = false;
  const request = thread.request.bind(thread);
  thread.request = (body, transfer) => {
    if (recording && body.op === 'call') calls.push(body.method);
    return request(body, transfer);
  };
  const ring = createMemoryRing(2);
  const trainers = [
    new Trainer(config, mnistShards(config, dataset), ring.rings[0]!, { replica: await thread.createReplica({ config: { ...config, ...replicaRecipe(config) } }) }),
    new Trainer(config, mnistShards(config, dataset), ring.rings[1]!),
  ];
  await Promise.all(trainers.map((t) => t.syncState()));
  for (let round = 0; round < 3; round++) {
    recording = true;
    const results = await Promise.all(trainers.map((t) => t.trainStep()));
    recording = false;
    assert.equal(results[0]!.steps, 10);
    assert.equal(new Set(await Promise.all(trainers.map((t) => t.weightsHash()))).size, 1, `round ${round}: the thread's replica and this thread's agree`);
  }
  const count = (m: string) => calls.filter((c) => c === m).length;
  assert.equal(count('trainRound'), 3, `one leg a round: ${calls.join(', ')}`);
  assert.equal(count('computeGradients') + count('applyGradients'), 0, 'no step crosses on its own');
  // The rest of a round's calls: the hash compared before it, the state read at its start, the outer step's write.
  assert.deepEqual(calls.slice(0, 4), ['weightsHash', 'readState', 'trainRound', 'writeState']);
  assert.equal(calls.length, 3 * 4, calls.join(', '));
  for (const t of trainers) await t.dispose();
  thread.request = request;
});

test('on WebGPU (Dawn over SwiftShader), a default round of 10 local steps stays on the device and gives the step-by-step path\'s loss, count and weights (1e-4)', { timeout: 300_000, skip: skipUnless(swiftShaderNeeds()) }, async () => {
  process.env.VK_ICD_FILENAMES ??= SWIFTSHADER_ICD;
  // SwiftShader's Vulkan driver wants a runtime directory; without one it complains on stderr and works.
  process.env.XDG_RUNTIME_DIR ??= tmpdir();
  const webgpu = await selectNodeBackend('webgpu');
  assert.equal(webgpu.backend, 'webgpu', `WebGPU in Node: ${webgpu.webgpuUnavailable} (needs Debian's libvulkan1 and chromium: npm run ensure-system-packages)`);
  try {
    const config = taskConfig('sgd');
    const spec = { config: { ...config, ...replicaRecipe(config) } };
    const a = new LocalReplica(spec);
    const b = new LocalReplica(spec);
    const counts = Array.from({ length: 10 }, (_, s) => (s === 3 ? 0 : SHARE));
    const inRound = await deviceRound(a, counts, 0.1);
    const byStep = await stepwise(b, counts, 0.1);
    assert.ok(maxDiff(inRound.weights, byStep.weights) <= 1e-4, `the local weights differ by ${maxDiff(inRound.weights, byStep.weights)}`);
    assert.ok(Math.abs(inRound.loss - byStep.loss) <= 1e-3 * byStep.loss, `loss ${inRound.loss} against ${byStep.loss}`);
    assert.equal(inRound.correct, byStep.correct);
    await a.dispose();
    await b.dispose();
  } finally {
    await tf.setBackend('cpu');
  }
});
