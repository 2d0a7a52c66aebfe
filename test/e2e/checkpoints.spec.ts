/**
 * BackupAndRestore in the browser: the chief alone checkpoints to the server and to its
 * IndexedDB, the server's model loads with tf.loadLayersModel, and Start resumes from it.
 */
import { test, expect, type Page } from '@playwright/test';
import * as tf from '@tensorflow/tfjs';
import { E2E_TOKEN } from '../../playwright.config';
import type { CheckpointInfo } from '../../shared/checkpoints/checkpoint';
import type { RoomMetrics } from '../../shared/protocol';
import { mnistSubset } from '../support/mnist';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import { asTeacher, openStudent, readStatus, status } from './helpers';

const ROOM = 'e2e-ckpt';
const teacher = { authorization: `Bearer ${E2E_TOKEN}` };

/** Keys of tfjs's IndexedDB model store in this tab, read with the raw IndexedDB API. */
function indexedDbModels(page: Page): Promise<string[]> {
  return page.evaluate(
    () =>
      new Promise<string[]>((resolve, reject) => {
        const open = indexedDB.open('tensorflowjs');
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const db = open.result;
          if (!db.objectStoreNames.contains('model_info_store')) return resolve([]);
          const keys = db.transaction('model_info_store').objectStore('model_info_store').getAllKeys();
          keys.onsuccess = () => resolve(keys.result.map(String));
          keys.onerror = () => reject(keys.error);
        };
      }),
  );
}

async function testAccuracy(modelUrl: string): Promise<number> {
  await tf.setBackend('cpu');
  const model = await tf.loadLayersModel(modelUrl, { requestInit: asTeacher });
  const ds = mnistSubset();
  const n = ds.test.count;
  const images = new Float32Array(n * MNIST_PIXELS);
  for (let i = 0; i < images.length; i++) images[i] = ds.test.features[i]! / 255;
  const predicted = tf.tidy(() => (model.predict(tf.tensor4d(images, [n, 28, 28, 1])) as tf.Tensor).argMax(-1));
  const labels = await predicted.data();
  predicted.dispose();
  model.dispose();
  let correct = 0;
  for (let i = 0; i < n; i++) if (labels[i] === ds.test.labels[i]) correct++;
  return correct / n;
}

test('the chief checkpoints to the server and its IndexedDB, and Start resumes from the latest', async ({ browser, request, baseURL }) => {
  const chief = await openStudent(browser, ROOM, 'chief');
  const other = await openStudent(browser, ROOM, 'other');
  await expect(status(chief.page)).toHaveAttribute('data-chief', 'true');

  // Run 1: one epoch of the 10k subset (8,000 digits / 64 per global batch = 125 steps), saving every 10.
  // Every run of this room trains on the subset: a checkpoint resumes only on the dataset it trained.
  const first = await request.post(`/api/rooms/${ROOM}/start`, {
    headers: teacher,
    data: { model: 'mlp', dataset: 'mnist-10k', epochs: 1, saveEverySteps: 10, maxToKeep: 3, resumeFrom: 'none' },
  });
  expect(first.status()).toBe(200);
  for (const s of [chief, other]) await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 240_000 });
  expect((await readStatus(chief.page)).step).toBe('125');

  const list = (await (await request.get(`/api/rooms/${ROOM}/checkpoints`, asTeacher)).json()) as CheckpointInfo[];
  const chiefId = (await readStatus(chief.page)).memberId;
  expect(list.map((c) => c.step)).toEqual([125, 120, 110]);
  expect(list.every((c) => c.writer === chiefId)).toBe(true);
  expect(list[0]!.weightsHash).toBe((await readStatus(chief.page)).weightsHash);

  // Only the chief wrote to IndexedDB, and it kept maxToKeep entries.
  const chiefKeys = await indexedDbModels(chief.page);
  expect(chiefKeys.filter((k) => k.startsWith(`webring/${ROOM}/`)).sort()).toEqual(
    [110, 120, 125].map((s) => `webring/${ROOM}/${String(s).padStart(10, '0')}`),
  );
  expect(await indexedDbModels(other.page)).toEqual([]);

  // The server's latest model loads in Node with tf.loadLayersModel and has learned MNIST.
  const accuracy = await testAccuracy(`${baseURL}/api/rooms/${ROOM}/checkpoints/latest/model.json`);
  expect(accuracy, `test accuracy ${accuracy}`).toBeGreaterThanOrEqual(0.85);

  // Run 2: Start again; every tab restores the latest checkpoint and goes on from step 125.
  const second = await request.post(`/api/rooms/${ROOM}/start`, { headers: teacher, data: { model: 'mlp', dataset: 'mnist-10k', epochs: 2, maxSteps: 130, saveEverySteps: 10 } });
  expect(second.status()).toBe(200);
  for (const s of [chief, other]) {
    await expect(status(s.page)).toHaveAttribute('data-resumed-from', list[0]!.id, { timeout: 60_000 });
    await expect(status(s.page)).toHaveAttribute('data-resumed-hash', list[0]!.weightsHash);
    await expect(status(s.page)).toHaveAttribute('data-step', '130', { timeout: 60_000 });
    await expect(status(s.page)).toHaveAttribute('data-state', 'done');
  }
  const metrics = (await (await request.get(`/api/rooms/${ROOM}/metrics`, asTeacher)).json()) as RoomMetrics;
  expect(metrics.history.map((p) => p.step)).toEqual([126, 127, 128, 129, 130]);
  const after = (await (await request.get(`/api/rooms/${ROOM}/checkpoints`, asTeacher)).json()) as CheckpointInfo[];
  expect(after[0]!.step).toBe(130);

  // Run 3 is stopped by the teacher: the stop step is saved, and run 4 resumes exactly there.
  const third = await request.post(`/api/rooms/${ROOM}/start`, { headers: teacher, data: { model: 'mlp', dataset: 'mnist-10k', epochs: 2, saveEverySteps: 50 } });
  expect(third.status()).toBe(200);
  await expect.poll(async () => Number((await readStatus(chief.page)).step), { timeout: 60_000 }).toBeGreaterThanOrEqual(133);
  expect((await request.post(`/api/rooms/${ROOM}/stop`, { headers: teacher })).status()).toBe(200);
  for (const s of [chief, other]) await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  const stoppedAt = await readStatus(chief.page);
  const saved = ((await (await request.get(`/api/rooms/${ROOM}/checkpoints`, asTeacher)).json()) as CheckpointInfo[])[0]!;
  expect(saved.step).toBe(Number(stoppedAt.step));
  expect(saved.weightsHash).toBe(stoppedAt.weightsHash);
  const fourth = await request.post(`/api/rooms/${ROOM}/start`, { headers: teacher, data: { model: 'mlp', dataset: 'mnist-10k', epochs: 2, maxSteps: saved.step + 2 } });
  expect(fourth.status()).toBe(200);
  for (const s of [chief, other]) {
    await expect(status(s.page)).toHaveAttribute('data-resumed-from', saved.id, { timeout: 60_000 });
    await expect(status(s.page)).toHaveAttribute('data-resumed-hash', saved.weightsHash);
    await expect(status(s.page)).toHaveAttribute('data-step', String(saved.step + 2), { timeout: 60_000 });
  }

  expect([...chief.errors, ...other.errors]).toEqual([]);
  await chief.context.close();
  await other.context.close();
});

test('when the chief leaves, the next-lowest index becomes chief, the run goes on to its end and the saves are its', async ({ browser, request }) => {
  const room = 'e2e-chief-leaves';
  const tabs = [];
  for (const name of ['una', 'vic', 'wes']) tabs.push(await openStudent(browser, room, name));
  const [oldChief, heir, third] = tabs as [(typeof tabs)[0], (typeof tabs)[0], (typeof tabs)[0]];
  await expect(status(oldChief.page)).toHaveAttribute('data-chief', 'true');
  const heirId = (await readStatus(heir.page)).memberId;

  const steps = 40;
  const start = await request.post(`/api/rooms/${room}/start`, { headers: teacher, data: { model: 'mlp', saveEverySteps: 5, maxSteps: steps, resumeFrom: 'none' } });
  expect(start.status()).toBe(200);
  await expect.poll(async () => ((await (await request.get(`/api/rooms/${room}/checkpoints`, asTeacher)).json()) as CheckpointInfo[]).length, { timeout: 120_000 }).toBeGreaterThan(0);
  await oldChief.context.close();

  await expect(status(heir.page)).toHaveAttribute('data-chief', 'true', { timeout: 15_000 });
  for (const s of [heir, third]) {
    await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 120_000 });
    await expect(status(s.page)).toHaveAttribute('data-step', String(steps));
    // The survivors went on from the live state, not back to a checkpoint.
    await expect(status(s.page)).toHaveAttribute('data-resumed-from', '');
  }
  const finals = await Promise.all([heir, third].map((s) => readStatus(s.page)));
  expect(finals[0]!.weightsHash).toBe(finals[1]!.weightsHash);
  const list = (await (await request.get(`/api/rooms/${room}/checkpoints`, asTeacher)).json()) as CheckpointInfo[];
  expect(list[0]!.step).toBe(steps);
  expect(list[0]!.writer).toBe(heirId);
  expect([...heir.errors, ...third.errors]).toEqual([]);
  for (const s of [heir, third]) await s.context.close();
});
