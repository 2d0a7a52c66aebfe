/**
 * Scores checkpoints on the test split of the lab's full dataset (shared/tasks/
 * lab-workloads.ts: 10,000 examples, read and decoded as the data service reads them) for
 * the lab's time-to-accuracy rows. A child process of the harness, started at idle priority (lab/tta-rows.ts), so
 * that it takes only CPU that the capped devices and the server leave unused.
 *
 * Each checkpoint is loaded with tf.loadLayersModel from its model.json and
 * model.weights.bin, as anyone adopting the class's model would. Requests and replies are
 * in lab/checkpoint-eval-protocol.ts; `screen` is every 10th test example (1,000), `full` all
 * 10,000. The process ends when stdin closes.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import * as tf from '@tensorflow/tfjs';
import { loadDataset } from '../signaling-server/data/datasets';
import { LAB_DATASETS, LAB_TASK } from '../shared/tasks/lab-workloads';
import { featureCount, type ExampleFormat } from '../shared/tasks/task';
import { READY_LINE, REPLY_PREFIX, SCREEN_STRIDE, type ScoreReply, type ScoreRequest } from './checkpoint-eval-protocol';

/** Test examples per forward pass. */
const BATCH = 500;
/** What one example is: the lab's task's. */
const FORMAT: ExampleFormat = LAB_TASK.example;
const F = featureCount(FORMAT);

interface Split {
  features: Float32Array;
  labels: Int32Array;
  count: number;
}

function toSplit(bytes: Uint8Array, labels: Uint8Array, indices: number[]): Split {
  const features = new Float32Array(indices.length * F);
  const out = new Int32Array(indices.length);
  indices.forEach((idx, k) => {
    for (let p = 0; p < F; p++) features[k * F + p] = bytes[idx * F + p]! * FORMAT.byteScale;
    out[k] = labels[idx]!;
  });
  return { features, labels: out, count: indices.length };
}

async function loadCheckpoint(dir: string): Promise<tf.LayersModel> {
  const modelJson = JSON.parse(readFileSync(path.join(dir, 'model.json'), 'utf8')) as { modelTopology: object; weightsManifest: Array<{ weights: tf.io.WeightsManifestEntry[] }> };
  const bytes = readFileSync(path.join(dir, 'model.weights.bin'));
  const weightData = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return tf.loadLayersModel(tf.io.fromMemory({ modelTopology: modelJson.modelTopology, weightSpecs: modelJson.weightsManifest.flatMap((g) => g.weights), weightData }));
}

async function score(model: tf.LayersModel, split: Split): Promise<number> {
  let correct = 0;
  for (let start = 0; start < split.count; start += BATCH) {
    const n = Math.min(BATCH, split.count - start);
    const hits = tf.tidy(() => {
      const logits = model.predict(tf.tensor(split.features.subarray(start * F, (start + n) * F), [n, ...FORMAT.shape])) as tf.Tensor2D;
      return tf.sum(tf.cast(tf.equal(tf.argMax(logits, -1), tf.tensor1d(split.labels.subarray(start, start + n), 'int32')), 'float32'));
    });
    correct += (await hits.data())[0]!;
    hits.dispose();
  }
  return correct;
}

async function main(): Promise<void> {
  await tf.setBackend('cpu');
  const { test } = await loadDataset(LAB_DATASETS.full);
  const all = Array.from({ length: test.count }, (_, i) => i);
  const splits = {
    full: toSplit(test.features, test.labels, all),
    screen: toSplit(test.features, test.labels, all.filter((i) => i % SCREEN_STRIDE === 0)),
  };
  const reply = (body: ScoreReply) => process.stdout.write(`${REPLY_PREFIX}${JSON.stringify(body)}\n`);
  process.stdout.write(`${READY_LINE}\n`);
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    try {
      const req = JSON.parse(line) as ScoreRequest;
      const split = splits[req.split];
      if (!split) throw new Error(`unknown split ${JSON.stringify(req.split)}`);
      const model = await loadCheckpoint(req.dir);
      try {
        const correct = await score(model, split);
        const cpu = process.cpuUsage(cpu0);
        reply({ accuracy: correct / split.count, correct, examples: split.count, ms: performance.now() - t0, cpuMs: (cpu.user + cpu.system) / 1000 });
      } finally {
        model.dispose();
      }
    } catch (err) {
      reply({ error: (err as Error).message });
    }
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`checkpoint-eval: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
