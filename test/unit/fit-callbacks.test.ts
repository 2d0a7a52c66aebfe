/**
 * fitDataset's History (shared/library/fit-callbacks.ts) from the member's statuses. Two
 * members of one run must report the same epochs whichever attempts of a step they saw:
 * when the room goes back to a checkpoint after a failure and trains steps again, the
 * History holds the steps that stand. One member here saw step 5 of the first attempt
 * before the failure, the other did not; both end with the same epoch loss. End to end:
 * test/class/example-node.test.ts (three processes, a kill -9) and test/server/fit-dataset.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { FitCallbacks } from '../../shared/library/fit-callbacks';
import type { WorkerStatus } from '../../shared/training/worker-status';

const status = (step: number, loss: number | null, epoch = 0, extra: Partial<WorkerStatus> = {}): WorkerStatus =>
  ({ state: 'training', step, loss, epoch, evaluatedEpoch: null, testLoss: null, epochs: [], ...extra }) as WorkerStatus;

function member(): FitCallbacks {
  const model = tf.sequential({ layers: [tf.layers.dense({ units: 1, inputShape: [1] })] });
  model.compile({ optimizer: 'sgd', loss: 'meanSquaredError' });
  return new FitCallbacks(model, undefined, { epochs: 1, steps: 10, validation: false }, () => undefined);
}

test('a step trained again after a failure takes its new loss, so members that saw different attempts report the same epoch', async () => {
  const first = [1, 0.9, 0.8, 0.7, 0.6];
  const again = { 4: 0.75, 5: 0.65, 6: 0.55 };
  const a = member();
  const b = member();
  a.status(status(0, null));
  b.status(status(0, null));
  for (let step = 1; step <= 5; step++) a.status(status(step, first[step - 1]!));
  // b's step 5 failed with the ring; it heard steps 1 to 4.
  for (let step = 1; step <= 4; step++) b.status(status(step, first[step - 1]!));
  // The room went back to the checkpoint of step 3 and trained on.
  for (const m of [a, b]) for (const [step, loss] of Object.entries(again)) m.status(status(Number(step), loss));
  const [ha, hb] = await Promise.all([a.end(null), b.end(null)]);
  assert.deepEqual(ha.history.loss, hb.history.loss);
  const expected = (1 + 0.9 + 0.8 + 0.75 + 0.65 + 0.55) / 6;
  const loss = ha.history.loss![0] as number;
  assert.ok(Math.abs(loss - expected) < 1e-12, `${loss} against ${expected}`);
});

test("a member the hand-over moved past a step it never finished closes the epoch with the class's account, as the member that finished it does", async () => {
  const losses = [1, 0.9, 0.8, 0.7, 0.6, 0.5];
  const account = (step: number): WorkerStatus['epochs'] => [{ epoch: 0, examples: step * 30, meanLoss: losses.slice(0, step).reduce((a, b) => a + b, 0) / step, steps: step, whole: true }];
  const a = member();
  const b = member();
  for (const m of [a, b]) m.status(status(0, null));
  for (let step = 1; step <= 6; step++) a.status(status(step, losses[step - 1]!, 0, { epochs: account(step) }));
  // b's all-reduce of step 5 broke; the chief's state moved it to step 5 done, with its own
  // last loss still showing (the hand-over's status), then it trained step 6 with the class.
  for (let step = 1; step <= 4; step++) b.status(status(step, losses[step - 1]!, 0, { epochs: account(step) }));
  b.status(status(5, losses[3]!, 0, { epochs: account(5) }));
  b.status(status(6, losses[5]!, 0, { epochs: account(6) }));
  const [ha, hb] = await Promise.all([a.end(null), b.end(null)]);
  assert.deepEqual(hb.history.loss, ha.history.loss);
  assert.equal(ha.history.loss![0], account(6)[0]!.meanLoss);
});
