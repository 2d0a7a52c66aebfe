/**
 * An epoch's end one step into a round (mnist-60k at 3 × 32: 625 = 6 · 104 + 1), on every
 * backend's round path in Node: the round of one short step, the evaluation that closes the
 * epoch and the next epoch's first round give the step-by-step path's weights
 * (test/support/round-check.ts; the same check runs in a tab on WebGPU, WebGL, WebAssembly
 * and the CPU: test/e2e/round-backends.spec.ts). Real MNIST digits.
 *
 * WebAssembly comes last, and these checks have a process of their own: when a process
 * started WebGPU, then the WASM backend, then selected WebGPU again, Dawn in Node (the
 * `webgpu` package) deadlocked in InstanceBase::ProcessEvents, or aborted the process, in
 * 5 of 6 runs (2026-12-07); in the order below, 11 of 11 runs passed.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import * as tf from '@tensorflow/tfjs';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { replicaRecipe } from '../../shared/protocol';
import { LocalReplica } from '../../shared/compute/local-replica';
import type { RoundPlace } from '../../shared/compute/replica';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import { selectNodeBackend } from '../../node-worker/node-backend';
import { mnistSubset } from '../support/mnist';
import { acrossEpochEnd, digitsFrom, type Digits } from '../support/round-check';
import { skipUnless, swiftShaderNeeds } from '../support/requirements';

/** Chromium's SwiftShader Vulkan driver: Dawn's adapter on a machine without a GPU. */
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const SHARE = 16;
let digits: Digits;

before(async () => {
  await tf.setBackend('cpu');
  const { train } = mnistSubset();
  digits = digitsFrom(train.features, train.labels, SHARE, MNIST_PIXELS);
});

/** Two replicas of a local-steps run with inner `optimizer`, `a` on `place` (null: the backend's own); the check across the epoch's end, on the backend in use. */
async function check(optimizer: 'sgd' | 'adam', place: RoundPlace | null, tolerance: number): Promise<void> {
  const config = startConfigSchema.parse({ sync: 'local-steps', localOptimizer: optimizer, localLearningRate: optimizer === 'adam' ? 0.001 : 0.1, seed: 4 });
  const spec = { config: { ...config, ...replicaRecipe(config) } };
  const a = new LocalReplica(place ? { ...spec, roundPlace: place } : spec);
  const b = new LocalReplica(spec);
  const report = await acrossEpochEnd(a, b, digits, tolerance, async () => tf.memory().numTensors);
  assert.equal(report.tensorsLeft, 0, 'no tensor left behind');
  await a.dispose();
  await b.dispose();
}

for (const place of ['host', 'device'] as const) {
  test(`on the CPU (the ${place} round), the round of one short step at an epoch's end, the evaluation and the next round give the step-by-step path's weights${place === 'host' ? ', bit for bit' : ''}`, async () => {
    await check('sgd', place, place === 'host' ? 0 : 1e-5);
  });
}

test("on WebGPU (Dawn over SwiftShader), the device round of one short step at an epoch's end, the evaluation and the next round give the step-by-step path's weights (1e-4)", { timeout: 300_000, skip: skipUnless(swiftShaderNeeds()) }, async () => {
  process.env.VK_ICD_FILENAMES ??= SWIFTSHADER_ICD;
  // SwiftShader's Vulkan driver wants a runtime directory; without one it complains on stderr and works.
  process.env.XDG_RUNTIME_DIR ??= tmpdir();
  assert.equal((await selectNodeBackend('webgpu')).backend, 'webgpu');
  try {
    await check('adam', null, 1e-4);
  } finally {
    await tf.setBackend('cpu');
  }
});

test("on WebAssembly (the host round), the round of one short step at an epoch's end, the evaluation and the next round give the step-by-step path's weights, bit for bit", async () => {
  assert.equal((await selectNodeBackend('wasm')).backend, 'wasm');
  try {
    await check('adam', null, 0);
  } finally {
    await tf.setBackend('cpu');
  }
});
