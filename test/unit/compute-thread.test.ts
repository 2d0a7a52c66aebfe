/**
 * The compute thread (shared/compute/): replicas in real worker_threads train to the same
 * bits as replicas in this thread, their buffers cross by transfer, a compute that holds
 * its thread leaves the network's event loop free, and errors keep their codes.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { mnistSubset } from '../support/mnist';
import { createMemoryRing } from '../support/memory-ring';
import { Trainer } from '../../shared/training/trainer';
import { mnistShards } from '../support/mnist';

import { WebringError } from '../../shared/protocol/errors';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import type { LoadedDataset } from '../../shared/tasks/task';
import { openNodeCompute } from '../../node-worker/node-compute';
import { LocalReplica } from '../../shared/compute/local-replica';
import type { Compute } from '../../shared/compute/compute';

const WORKERS = 3;
const STEPS = 4;
let dataset: LoadedDataset;
const threads: Compute[] = [];

before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
  for (let i = 0; i < WORKERS; i++) threads.push(await openNodeCompute('cpu', 'thread'));
});

after(async () => {
  for (const t of threads) await t.close();
});

test('replicas in compute threads train a ring to the same bits as replicas in this thread', async () => {
  assert.deepEqual(
    threads.map((t) => [t.place, t.info.backend]),
    threads.map(() => ['thread', 'cpu']),
  );
  const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'adam', learningRate: 0.001, batchSizePerWorker: 16, seed: 5 });
  const threaded = await Promise.all(
    createMemoryRing(WORKERS).rings.map(async (ring, r) => new Trainer(config, mnistShards(config, dataset), ring, { replica: await threads[r]!.createReplica({ config }) })),
  );
  const local = createMemoryRing(WORKERS).rings.map((ring) => new Trainer(config, mnistShards(config, dataset), ring));
  for (const ring of [threaded, local]) await Promise.all(ring.map((t) => t.syncState()));
  for (let s = 0; s < STEPS; s++) {
    const [a, b] = await Promise.all([Promise.all(threaded.map((t) => t.trainStep())), Promise.all(local.map((t) => t.trainStep()))]);
    assert.deepEqual(
      a.map((r) => r.loss),
      b.map((r) => r.loss),
      `step ${s}: the same loss in a thread and here`,
    );
    // The thread's crossing is measured on every step.
    assert.ok(a.every((r) => Number.isFinite(r.timing.crossMs) && r.timing.crossMs >= 0));
  }
  const hashes = await Promise.all([...threaded, ...local].map((t) => t.weightsHash()));
  assert.equal(new Set(hashes).size, 1, `one set of weights: ${hashes}`);
  // The evaluation scores in the thread too, and agrees.
  const scores = await Promise.all([...threaded, ...local].slice(0, WORKERS).map((t) => t.evaluate()));
  assert.equal(new Set(scores.map((s) => s!.accuracy)).size, 1);
  assert.equal(new Set(scores.map((s) => s!.loss)).size, 1);
  // The replica's tensors stay flat across steps: the step reports the thread's count.
  const counts = threaded.map((t) => t.numTensors);
  await Promise.all(threaded.map((t) => t.trainStep()));
  assert.deepEqual(
    threaded.map((t) => t.numTensors),
    counts,
  );
  for (const t of [...threaded, ...local]) await t.dispose();
});

test("a step's buffers cross to the thread by transfer and come back as the same memory", async () => {
  const config = startConfigSchema.parse({ model: 'mlp', seed: 1 });
  const replica = await threads[0]!.createReplica({ config });
  const n = 8;
  const flat = new Float32Array(replica.parameterCount + 4);
  flat[replica.parameterCount] = 42;
  const features = new Float32Array(n * MNIST_PIXELS).fill(0.5);
  const labels = new Int32Array(n).fill(7);
  const result = await replica.computeGradients({ features, labels, n }, flat);
  // Transferred, not copied: the caller's views are detached while the thread holds them.
  assert.equal(flat.byteLength, 0);
  assert.equal(features.byteLength, 0);
  assert.equal(result.flat.length, replica.parameterCount + 4);
  assert.equal(result.flat[replica.parameterCount], 42, 'the tail past the gradients is untouched');
  assert.ok(result.flat.subarray(0, replica.parameterCount).some((g) => g !== 0));
  assert.equal(result.features[0], 0.5);
  const back = (await replica.applyGradients(result.flat, 0.1)).flat;
  assert.equal(result.flat.byteLength, 0);
  assert.equal(back.length, replica.parameterCount + 4);
  // A subarray would carry the rest of its buffer along: it is refused before anything moves.
  await assert.rejects(() => replica.computeGradients({ features: result.features, labels: result.labels, n }, back.subarray(0, 10)), RangeError);
  await replica.dispose();
});

test('a compute that holds its thread for seconds leaves the network thread free; in-process it would not', async () => {
  const config = startConfigSchema.parse({ model: 'mlp', seed: 1 });
  const HOLD_MS = 1_500;
  const n = 4;
  const examples = () => ({ features: new Float32Array(n * MNIST_PIXELS), labels: new Int32Array(n), n });
  /** Timer ticks every 10 ms while `work` runs: the event loop's answers to a ping. */
  const ticksDuring = async (work: () => Promise<unknown>): Promise<number> => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    await work();
    clearInterval(timer);
    return ticks;
  };
  const inThread = await threads[1]!.createReplica({ config, busyComputeMs: HOLD_MS });
  const threadTicks = await ticksDuring(() => inThread.computeGradients(examples(), new Float32Array(inThread.parameterCount)));
  const here = new LocalReplica({ config, busyComputeMs: HOLD_MS });
  const hereTicks = await ticksDuring(() => here.computeGradients(examples(), new Float32Array(here.parameterCount)));
  assert.ok(threadTicks >= 50, `the event loop ran ${threadTicks} times in ${HOLD_MS} ms with the maths in a thread`);
  assert.ok(hereTicks <= 1, `in-process, the held thread is the event loop's (${hereTicks} ticks)`);
  await inThread.dispose();
  await here.dispose();
});

test('errors in the thread come back with their codes, and a stopped thread fails its calls', async () => {
  const config = startConfigSchema.parse({ model: 'mlp', seed: 1 });
  const replica = await threads[2]!.createReplica({ config });
  const snapshot = await replica.snapshot();
  const cnn = await threads[2]!.createReplica({ config: { ...config, model: 'cnn' } });
  await assert.rejects(
    () => cnn.load(snapshot),
    (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_DATA' && /checkpoint has 4 weights/.test(e.message),
  );
  await cnn.dispose();
  // The snapshot loads back into the replica it came from.
  const hash = await replica.weightsHash();
  await replica.load(snapshot);
  assert.equal(await replica.weightsHash(), hash);

  const doomed = await openNodeCompute('cpu', 'thread');
  const orphan = await doomed.createReplica({ config });
  await doomed.close();
  await assert.rejects(
    () => orphan.weightsHash(),
    (e: unknown) => e instanceof WebringError && e.code === 'ERR_INTERNAL' && /compute thread stopped/.test(e.message),
  );
});
