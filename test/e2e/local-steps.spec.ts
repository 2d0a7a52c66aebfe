/**
 * Local steps in real tabs: three students train the MLP on WebGPU in local-steps mode on
 * the defaults (10 local steps of plain SGD, Nesterov outside), each round's sum in 8-bit
 * words, picked in the teacher's form; then the same class trains every step on the same
 * number of examples. Local steps reach its test accuracy less at most a point, send a
 * twentieth of the bytes or less, and the pages show the mode, the round and the advice.
 */
import { test, expect } from '@playwright/test';
import { E2E_TOKEN } from '../../playwright.config';
import type { RoomMetrics, RoomStatus } from '../../shared/protocol';
import { asTeacher, openStudent, readStatus, status, type Student, openAdvanced } from './helpers';

const ROOM = 'e2e-local-steps';
/** Two epochs of mnist-10k's 8,000 training digits at 3 × 32: the second ends at step 167. */
const STEPS = 160;

async function roomNow(request: import('@playwright/test').APIRequestContext): Promise<RoomStatus> {
  return (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
}

/**
 * Waits until every tab has finished the run whose last round is `lastRound`. The round tells
 * the runs apart: right after the teacher starts a second run a tab may still show the first
 * one's 'done' (rounds 17, then 160), and reading it then would mix two runs' weights.
 */
async function untilDone(students: Student[], lastRound: number): Promise<Array<Record<string, string>>> {
  for (const s of students) {
    await expect(status(s.page)).toHaveAttribute('data-round', String(lastRound), { timeout: 240_000 });
    await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  }
  const finals = await Promise.all(students.map((s) => readStatus(s.page)));
  expect(new Set(finals.map((f) => f.weightsHash)).size, 'the replicas end bit-identical').toBe(1);
  return finals;
}

test('three tabs in local-steps mode, rounds in 8-bit words, reach every-step accuracy (less at most a point) on the same examples, sending a twentieth of the bytes or less', async ({ browser, request }) => {
  test.setTimeout(600_000);
  const students: Student[] = [];
  for (const name of ['lia', 'max', 'noa']) students.push(await openStudent(browser, ROOM, name));

  const teacherContext = await browser.newContext();
  const teacher = await teacherContext.newPage();
  await teacher.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  await expect(teacher.getByTestId('members').locator('tr')).toHaveCount(3);
  // The form's defaults are the protocol's: every step, and 10 local steps once chosen.
  await expect(teacher.locator('select[name=sync]')).toHaveValue('every-step');
  await expect(teacher.locator('input[name=localSteps]')).toHaveValue('10');
  await expect(teacher.locator('select[name=wire]')).toHaveValue('auto');
  await expect(teacher.locator('select[name=sumWordBits]')).toHaveValue('0');
  await openAdvanced(teacher);
  await teacher.locator('select[name=sync]').selectOption('local-steps');
  await teacher.locator('select[name=sumWordBits]').selectOption('8');
  await teacher.locator('select[name=dataset]').selectOption('mnist-10k');
  await teacher.locator('input[name=maxSteps]').fill(String(STEPS));
  await teacher.locator('input[name=startFresh]').check();
  await teacher.getByRole('button', { name: 'Start' }).click();

  // While it trains: the pages say which mode and which round.
  await expect.poll(async () => Number((await readStatus(students[0]!.page)).round), { timeout: 120_000 }).toBeGreaterThanOrEqual(2);
  await expect(students[0]!.page.locator('#s-step')).toContainText('round');
  await expect(teacher.getByTestId('sync-state')).toHaveAttribute('data-sync', 'local-steps');
  await expect(teacher.getByTestId('sync-state')).toContainText('kB per example');
  await expect(teacher.getByTestId('sync-advice')).toHaveAttribute('data-suggest', /^(every-step|local-steps)$/);

  const localFinals = await untilDone(students, 17);
  const local = await roomNow(request);
  expect(local.config).toMatchObject({ sync: 'local-steps', localSteps: 10, localOptimizer: 'sgd', localLearningRate: 0.3, outerOptimizer: 'nesterov', outerLearningRate: 0.7, outerMomentum: 0.9, wire: 'fp16', sumWordBits: 8, powerSgdRank: 0 });
  expect(local.step).toBe(STEPS);
  // Rounds of 10, one cut short by the first epoch's end at step 84 and one by maxSteps: 17 outer steps.
  expect(local.round).toBe(17);
  expect(localFinals.map((f) => f.round)).toEqual(['17', '17', '17']);
  const localMetrics = (await (await request.get(`/api/rooms/${ROOM}/metrics`, asTeacher)).json()) as RoomMetrics;
  expect(localMetrics.history.map((p) => p.step)).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 84, 94, 104, 114, 124, 134, 144, 154, 160]);
  expect(local.bytesSentPerRound).toBeGreaterThan(0);
  const localAccuracy = local.metrics.accuracy!;
  const localPerExample = local.bytesSentPerExample!;

  // The same class, the same examples, every step.
  expect((await request.post(`/api/rooms/${ROOM}/start`, { ...asTeacher, data: { model: 'mlp', dataset: 'mnist-10k', maxSteps: STEPS, resumeFrom: 'none' } })).status()).toBe(200);
  await expect.poll(async () => (await roomNow(request)).run).toBe(local.run + 1);
  await untilDone(students, STEPS);
  const sync = await roomNow(request);
  expect(sync.config).toMatchObject({ sync: 'every-step', wire: 'fp32' });
  expect(sync.round).toBe(STEPS);
  const syncAccuracy = sync.metrics.accuracy!;
  const syncPerExample = sync.bytesSentPerExample!;
  console.log(
    `[local-steps] test accuracy after ${STEPS} steps of 96: local steps ${(localAccuracy * 100).toFixed(2)} %, every step ${(syncAccuracy * 100).toFixed(2)} %; ` +
      `bytes sent per example trained: ${(localPerExample / 1000).toFixed(2)} kB against ${(syncPerExample / 1000).toFixed(2)} kB`,
  );
  // No worse than a point below every step (in-process, seeds 1234 / 1 / 2: 0.85–1.2 points above).
  expect(localAccuracy).toBeGreaterThanOrEqual(syncAccuracy - 0.01);
  expect(localAccuracy).toBeGreaterThan(0.85);
  // The figure is the last turn's: a round of the 6 steps maxSteps left, in 8-bit words (a
  // quarter of float32's bytes): about 24× fewer bytes per example than a step (a whole
  // round, 40×; the same 6-step round in fp16, the default, about 12×).
  expect(syncPerExample / localPerExample).toBeGreaterThan(20);

  expect(students.flatMap((s) => s.errors)).toEqual([]);
  await teacherContext.close();
  for (const s of students) await s.context.close();
});

/**
 * The full training set's epoch end, one step into a round, in a class of every backend: at
 * 3 × 128 the official 60,000 digits make 157 steps an epoch (156 whole and one of 96), so
 * with rounds of 6 the epoch ends with a round of one short step (625 = 6 · 104 + 1 at 3 × 32
 * is the same shape). One tab trains its rounds on WebGPU, one on WebGL (both on the device)
 * and one on the CPU (on the host); the class crosses the epoch's end, scores it, trains the
 * next round and finishes.
 */
const FULL_ROOM = 'e2e-local-steps-60k';
const FULL_EPOCH_STEPS = 157;

test('three tabs on WebGPU, WebGL and the CPU cross the full dataset’s epoch end one step into a round, score it and finish', async ({ browser, request }) => {
  test.setTimeout(600_000);
  const students: Student[] = [];
  for (const [name, backend] of [['ivy', 'webgpu'], ['jon', 'webgl'], ['kim', 'cpu']] as const) students.push(await openStudent(browser, FULL_ROOM, name, `&backend=${backend}`));
  expect(await Promise.all(students.map(async (s) => (await readStatus(s.page)).backend))).toEqual(['webgpu', 'webgl', 'cpu']);
  const maxSteps = FULL_EPOCH_STEPS + 6;
  const started = await request.post(`/api/rooms/${FULL_ROOM}/start`, { ...asTeacher, data: { model: 'mlp', dataset: 'mnist-60k', sync: 'local-steps', localSteps: 6, batchSizePerWorker: 128, maxSteps, resumeFrom: 'none' } });
  expect(started.status()).toBe(200);
  for (const s of students) await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 480_000 });
  const done = (await (await request.get(`/api/rooms/${FULL_ROOM}`, asTeacher)).json()) as RoomStatus;
  expect(done.step).toBe(maxSteps);
  expect(done.lastError).toBeNull();
  expect(done.data.refused).toEqual([]);
  const metrics = (await (await request.get(`/api/rooms/${FULL_ROOM}/metrics`, asTeacher)).json()) as RoomMetrics;
  // Rounds of 6 to step 156, the round of one step that ends the epoch, and the next epoch's first round.
  expect(metrics.history.map((p) => p.step).slice(-3)).toEqual([156, FULL_EPOCH_STEPS, maxSteps]);
  expect(metrics.evaluations.map((e) => [e.epoch, e.step])).toEqual([[0, FULL_EPOCH_STEPS], [1, maxSteps]]);
  expect(metrics.evaluations[0]!.accuracy!).toBeGreaterThan(0.9);
  const finals = await Promise.all(students.map((s) => readStatus(s.page)));
  expect(new Set(finals.map((f) => f.weightsHash)).size, 'the replicas end bit-identical').toBe(1);
  console.log(`[local-steps] the full set's epoch end one step into a round, on WebGPU, WebGL and the CPU: held out after epoch 1 ${(metrics.evaluations[0]!.accuracy! * 100).toFixed(2)} %`);
  expect(students.flatMap((s) => s.errors)).toEqual([]);
  for (const s of students) await s.context.close();
});
