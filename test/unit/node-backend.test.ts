/**
 * The Node worker's backend choice (node-worker/node-backend.ts) on a machine whose Vulkan
 * loader finds no device, as on a lab PC or a CI runner without a GPU: WebGPU is out, with
 * the reason, and the worker trains on WebAssembly, not the CPU backend; `--backend cpu`
 * still gets the CPU. Every task's model trains on each backend in task-models.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { selectNodeBackend } from '../../node-worker/node-backend';

test('without a GPU a Node worker trains on WebAssembly and says why WebGPU is out; --backend cpu gets the CPU', async () => {
  // No Vulkan driver at all: Dawn has no adapter to offer.
  process.env.VK_ICD_FILENAMES = '/nonexistent/no-vulkan-driver.json';
  const choice = await selectNodeBackend(null);
  assert.equal(choice.backend, 'wasm', JSON.stringify(choice));
  assert.equal(tf.getBackend(), 'wasm');
  assert.match(choice.adapter ?? '', /^WebAssembly/);
  assert.ok(choice.webgpuUnavailable && choice.webgpuUnavailable.length > 0, 'the reason WebGPU is out');
  const cpu = await selectNodeBackend('cpu');
  assert.equal(cpu.backend, 'cpu');
  assert.equal(tf.getBackend(), 'cpu');
});
