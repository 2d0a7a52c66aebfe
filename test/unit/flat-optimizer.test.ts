/**
 * The fused update (shared/compute/flat-optimizer.ts) against tfjs's own optimizers on the
 * CPU backend: the same bits, step after step, for Adam and SGD; and a replica on it keeps
 * its state through a hand-over and a checkpoint.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { flatOptimizer } from '../../shared/compute/flat-optimizer';
import { createOptimizerSlots, optimizerStateVariables } from '../../shared/compute/optimizer-state';
import { LocalReplica } from '../../shared/compute/local-replica';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { featureCount } from '../../shared/tasks/task';
import { LAB_WORKLOADS, labWorkloadOf } from '../../shared/tasks/lab-workloads';
import { mulberry32 } from '../../shared/util/random';

await tf.setBackend('cpu');

const SHAPES = [[7, 5], [5], [5, 3], [3]];
const STEPS = 6;
/** Rates as a warm-up and a decay give them, none a round float32. */
const RATES = [0.003, 0.0017, 0.01, 0.0029, 1e-4, 0.3];

function gaussian(random: () => number, n: number, scale: number): Float32Array {
  return Float32Array.from({ length: n }, () => (random() - 0.5) * scale);
}

for (const kind of ['adam', 'sgd'] as const) {
  test(`the fused ${kind} update gives tfjs's CPU ${kind} bit for bit, weights and state, over ${STEPS} steps`, async () => {
    const random = mulberry32(7);
    const sizes = SHAPES.map((s) => s.reduce((a, b) => a * b, 1));
    const count = sizes.reduce((a, b) => a + b, 0);
    const initial = gaussian(random, count, 2);
    let at = 0;
    const variables = SHAPES.map((shape, i) => {
      const v = tf.variable(tf.tensor(initial.slice(at, at + sizes[i]!), shape), true, `w${kind}${i}`);
      at += sizes[i]!;
      return v;
    });
    const reference: tf.Optimizer = kind === 'adam' ? tf.train.adam(RATES[0]) : tf.train.sgd(RATES[0]!);
    createOptimizerSlots(kind, reference, variables);
    const fused = flatOptimizer(kind, count);
    const weights = initial.slice();
    for (let step = 0; step < STEPS; step++) {
      // Gradients across many magnitudes, zeros among them, as real ones are.
      const gradient = gaussian(random, count, 10 ** (step - 3));
      gradient[step] = 0;
      const rate = RATES[step]!;
      (reference as unknown as { learningRate: number }).learningRate = rate;
      if (kind === 'sgd') (reference as tf.SGDOptimizer).setLearningRate(rate);
      at = 0;
      const named: tf.NamedTensorMap = {};
      variables.forEach((v, i) => {
        named[v.name] = tf.tensor(gradient.slice(at, at + sizes[i]!), v.shape);
        at += sizes[i]!;
      });
      reference.applyGradients(named);
      tf.dispose(Object.values(named));
      fused.apply(weights, gradient, rate);
      const expected = new Float32Array(count);
      at = 0;
      for (const v of variables) {
        expected.set(v.dataSync(), at);
        at += v.size;
      }
      assert.deepEqual(new Uint32Array(weights.buffer), new Uint32Array(expected.buffer), `weights differ at step ${step}`);
    }
    const state = new Float32Array(fused.stateLength);
    fused.readState(state, 0);
    const expectedState = new Float32Array(fused.stateLength);
    at = 0;
    for (const v of optimizerStateVariables(kind, reference)) {
      expectedState.set(v.dataSync(), at);
      at += v.size;
    }
    assert.deepEqual(new Uint32Array(state.buffer), new Uint32Array(expectedState.buffer), 'the optimizer state differs');
    assert.equal(fused.iterations, reference.iterations);
    reference.dispose();
    tf.dispose(variables);
  });
}

test("a replica on the fused update: a hand-over's state and a checkpoint carry the optimizer's state, so the next steps match bit for bit, and no tensor leaks", async () => {
  const w = labWorkloadOf(LAB_WORKLOADS.dense.model);
  const config = startConfigSchema.parse({ ...w.config, batchSizePerWorker: 8 });
  const random = mulberry32(3);
  const n = 8;
  const batch = () => ({ features: Float32Array.from({ length: n * featureCount(w.task.example) }, random), labels: Int32Array.from({ length: n }, () => Math.floor(random() * 10)), n });
  const step = async (r: LocalReplica, examples: ReturnType<typeof batch>) => {
    const g = await r.computeGradients(examples, new Float32Array(r.parameterCount));
    return (await r.applyGradients(g.flat, 0.003)).weightsHash;
  };
  const a = new LocalReplica({ config });
  for (let s = 0; s < 3; s++) await step(a, batch());
  const tensors = tf.memory().numTensors;
  const b = new LocalReplica({ config });
  await b.writeState(await a.readState());
  const c = new LocalReplica({ config });
  await c.load(await a.snapshot());
  assert.equal(await b.weightsHash(), await a.weightsHash());
  assert.equal(await c.weightsHash(), await a.weightsHash());
  for (let s = 0; s < 3; s++) {
    const examples = batch();
    const [ha, hb, hc] = [await step(a, examples), await step(b, examples), await step(c, examples)];
    assert.equal(hb, ha, `the handed-over replica differs at step ${s}`);
    assert.equal(hc, ha, `the restored replica differs at step ${s}`);
  }
  // c's hash is read from its device after the load; a's step reports it from the update's own copy.
  await Promise.all([b.dispose(), c.dispose()]);
  for (let s = 0; s < 3; s++) await step(a, batch());
  assert.equal(tf.memory().numTensors, tensors, 'tensors leaked across steps');
  await a.dispose();
});

test('an update handed over without waiting (as the trainer does) reaches the weights before the next backprop, the score and the snapshot read them', async () => {
  const w = labWorkloadOf(LAB_WORKLOADS.dense.model);
  const config = startConfigSchema.parse({ ...w.config, batchSizePerWorker: 8 });
  const random = mulberry32(11);
  const n = 8;
  const batches = Array.from({ length: 4 }, () => ({ features: Float32Array.from({ length: n * featureCount(w.task.example) }, random), labels: Int32Array.from({ length: n }, () => Math.floor(random() * 10)), n }));
  const run = async (wait: boolean) => {
    const r = new LocalReplica({ config });
    const losses: number[] = [];
    for (const examples of batches) {
      const g = await r.computeGradients(examples, new Float32Array(r.parameterCount));
      losses.push(g.loss);
      const applied = r.applyGradients(g.flat, 0.003);
      if (wait) await applied;
    }
    const scored = await r.score(batches[0]!);
    const snapshot = await r.snapshot();
    await r.dispose();
    return { losses, score: scored.loss, weights: Array.from(snapshot.weights) };
  };
  const [waited, pipelined] = [await run(true), await run(false)];
  assert.deepEqual(pipelined.losses, waited.losses, 'every backprop saw the update before it');
  assert.equal(pipelined.score, waited.score);
  assert.deepEqual(pipelined.weights, waited.weights);
});
