/**
 * examples/node-own-model as a user runs it (`npm run example:node`, on the CPU here): three
 * Node processes fit a two-input model with mean squared error through the built package,
 * one is killed with SIGKILL mid-run, the other two finish with the same History, the loss
 * falls, the replicas never disagree, and the chief's file:// save holds a loadable model.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { registerFileModels } from '../../node-worker/file-models';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface ExampleResult {
  ok: boolean;
  saved: string;
  killed: string;
  steps: number;
  consistency: { checks: number; mismatches: number };
  histories: Array<{ name: string; epochs: number[]; loss: number[]; val_loss: number[] }>;
}

test('the Node example trains three processes through a kill -9 and saves the model with file://', async () => {
  const { stdout } = await promisify(execFile)('npm', ['run', '--silent', 'example:node'], { cwd: ROOT, env: { ...process.env, WEBRING_BACKEND: 'cpu' }, timeout: 240_000, maxBuffer: 16 << 20 });
  const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
  assert.ok(line, stdout.slice(-3000));
  const result = JSON.parse(line.slice('RESULT '.length)) as ExampleResult;
  assert.equal(result.ok, true, line);
  assert.match(stdout, /kill -9 w2 at step \d+/);
  assert.deepEqual(result.histories.map((h) => h.name).sort(), ['w0', 'w1']);
  const [a, b] = result.histories;
  assert.deepEqual(a!.loss, b!.loss, 'both survivors heard the same epochs');
  assert.deepEqual(a!.epochs, [0, 1, 2, 3]);
  assert.ok(a!.loss[3]! < a!.loss[0]! / 10, `the loss falls: ${a!.loss.join(', ')}`);
  assert.ok(a!.val_loss[3]! < a!.val_loss[0]!, 'so does the held-out loss');
  assert.ok(result.consistency.checks > 0 && result.consistency.mismatches === 0);
  registerFileModels();
  const model = await tf.loadLayersModel(`file://${result.saved}/model.json`);
  assert.deepEqual(model.inputNames, ['sensors', 'settings']);
  await rm(path.dirname(result.saved), { recursive: true, force: true });
});
