/**
 * The whole of MNIST, streamed: three tabs train on the official 60,000 digits, each
 * fetching from the data service only the examples it trains (and its shard of the 10,000
 * test digits), so the server sends each example once, not once per tab. The server's
 * byte counter shows it, and the tabs end with identical weights. The run scales its learning
 * rate with the class (scaleLearningRate): every tab applies the same scaled rate, and the
 * teacher page says why it is what it is.
 */
import { test, expect } from '@playwright/test';
import type { RoomStatus } from '../../shared/protocol';
import { EXAMPLE_BYTES } from '../support/mnist';
import { PREFETCH_STEPS } from '../../shared/data/streamed-dataset';
import { E2E_TOKEN } from '../../playwright.config';
import { asTeacher, openStudent, readStatus, status, type Student } from './helpers';

const ROOM = 'e2e-mnist-60k';
const STEPS = 24;
const PER_WORKER = 32;
const TABS = 3;

test('three tabs stream the official MNIST: every example travels once, to the tab that trains it, and the weights stay identical', async ({ browser, request }) => {
  const students: Student[] = [];
  for (const name of ['eva', 'fin', 'gus']) students.push(await openStudent(browser, ROOM, name));
  const start = await request.post(`/api/rooms/${ROOM}/start`, {
    ...asTeacher,
    // The rate scaled with the class: 3 × 32 examples against a reference of 32 is three times 0.003.
    data: { model: 'mlp', dataset: 'mnist-60k', batchSizePerWorker: PER_WORKER, maxSteps: STEPS, scaleLearningRate: true, referenceBatch: 32, warmupSteps: 0 },
  });
  expect(start.status()).toBe(200);
  const started = ((await start.json()) as { status: RoomStatus }).status;
  expect(started.config?.dataset).toBe('mnist-60k');
  expect(started.data.datasetBytes).toBe(60_000 * EXAMPLE_BYTES);

  for (const s of students) await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 180_000 });
  const finals = await Promise.all(students.map((s) => readStatus(s.page)));
  expect(finals.map((f) => f.step)).toEqual(Array(TABS).fill(String(STEPS)));
  expect(new Set(finals.map((f) => f.weightsHash)).size, JSON.stringify(finals.map((f) => f.weightsHash))).toBe(1);
  expect(finals.every((f) => Number(f.gradNorm) > 0 && f.dataWait === '')).toBe(true);

  const done = (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
  expect(done.state).toBe('done');
  // The run ended with an evaluation on the official test digits: each tab scored its third.
  expect(done.metrics.accuracy).toBeGreaterThan(0.5);
  // What had to travel: every example trained, and every test digit once. What may travel
  // beyond it: each tab's prefetch window past the last step. Nothing twice, nothing per tab.
  const trained = STEPS * PER_WORKER * TABS;
  const needed = (trained + 10_000) * EXAMPLE_BYTES;
  const window = TABS * PREFETCH_STEPS * PER_WORKER * EXAMPLE_BYTES;
  console.log(`[mnist-60k] served ${done.data.bytesServed} B: ${trained} training examples and 10,000 test digits need ${needed} B; one download per tab would be ${TABS * 70_000 * EXAMPLE_BYTES} B`);
  expect(done.data.bytesServed).toBeGreaterThanOrEqual(needed);
  expect(done.data.bytesServed).toBeLessThanOrEqual(needed + window);
  // The training split apart: the teacher's per-epoch figure counts only it (issue 39).
  expect(done.data.bytesServed - done.data.trainBytesServed).toBe(10_000 * EXAMPLE_BYTES);
  expect(done.data.trainBytesServed).toBeGreaterThanOrEqual(trained * EXAMPLE_BYTES);
  expect(done.members.map((m) => m.learningRate)).toEqual(Array(TABS).fill(Math.fround(0.009)));
  for (const m of done.members) console.log(`[mnist-60k] ${m.name}: data wait ${m.collective?.timing.dataMs.toFixed(1)} ms of a ${m.computeMs.toFixed(0)} ms step`);

  // The teacher sees it next to the training set's size.
  const teacher = await (await browser.newContext()).newPage();
  await teacher.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  await expect(teacher.getByTestId('data-served')).toContainText('of a 44.9 MiB training set');
  // Less than an epoch trained: no per-epoch figure yet, and the held-out digits named apart.
  await expect(teacher.getByTestId('data-served')).toContainText('of held-out examples');
  await expect(teacher.getByTestId('data-served')).toContainText('once an epoch is trained');
  await expect(teacher.getByTestId('learning-rate')).toHaveText('0.00900 (scaled with a global batch of 96 against 32)');
  expect(students.flatMap((s) => s.errors)).toEqual([]);
  for (const s of students) await s.context.close();
});
