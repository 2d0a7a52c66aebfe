/**
 * A lesson on the class's own labels, as a teacher runs it: the teacher opens collecting for
 * "cat, house, sun"; two students draw examples on their pads through the Collect panel; the
 * teacher starts a run on the class's own data, which masks every gradient (secure
 * aggregation, the default for own data), so the two wait, told why, until a third student
 * joins (with no drawings of their own); the model learns the three shapes from the
 * examples each tab kept to itself, the pad answers in those labels, and the checkpoint
 * loads with tf.loadLayersModel with its metadata naming the classes.
 */
import { test, expect, type Page } from '@playwright/test';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { E2E_TOKEN } from '../../playwright.config';
import type { CheckpointInfo, CheckpointMetadata } from '../../shared/checkpoints/checkpoint';
import type { RoomStatus } from '../../shared/protocol';
import { asTeacher, draw, openStudent, status } from './helpers';

const ROOM = 'e2e-own-labels';
const CLASSES = ['cat', 'house', 'sun'];
const PER_CLASS = 7;
const teacher = { authorization: `Bearer ${E2E_TOKEN}` };

/** Each class a shape the MLP can tell apart; `d` shifts it a little between drawings. */
const SHAPES: Record<string, (d: number) => Array<[number, number]>> = {
  cat: (d) => [[0.15, 0.45 + d], [0.85, 0.5 + d]],
  house: (d) => [[0.45 + d, 0.15], [0.5 + d, 0.85]],
  sun: (d) => [[0.3 + d, 0.3], [0.7 + d, 0.3], [0.7 + d, 0.7], [0.3 + d, 0.7], [0.3 + d, 0.32]],
};

async function collect(page: Page, label: string, d: number, expected: number): Promise<void> {
  await page.getByTestId('collect-class').selectOption(label);
  await draw(page, 'digit-pad-canvas', SHAPES[label]!(d));
  await page.getByTestId('collect-add').click();
  await expect(page.locator(`[data-testid="collect-count"][data-class="${label}"]`)).toHaveAttribute('data-count', String(expected));
}

test('students draw their own classes on the Collect panel; the class model learns them; the pad and the checkpoint speak those labels', async ({ browser, request, baseURL }) => {
  test.setTimeout(300_000);
  const tabs = [await openStudent(browser, ROOM, 'ida', '&backend=cpu'), await openStudent(browser, ROOM, 'jon', '&backend=cpu')];
  // Nothing to collect before the teacher says what: the panel is hidden and the page API refuses.
  await expect(tabs[0]!.page.getByTestId('collect-panel')).toBeHidden();
  await expect(tabs[0]!.page.evaluate(() => window.webringOwnData!.add('cat', new Array(784).fill(0)))).rejects.toThrow(/not collecting/);

  expect((await request.put(`/api/rooms/${ROOM}/collect`, { headers: teacher, data: { classes: CLASSES } })).status()).toBe(200);
  for (const { page } of tabs) {
    await expect(page.getByTestId('collect-panel')).toBeVisible();
    await expect(page.getByTestId('collect-class').locator('option')).toHaveText(CLASSES);
  }
  for (const [t, { page }] of tabs.entries()) {
    for (let i = 0; i < PER_CLASS; i++) for (const label of CLASSES) await collect(page, label, (i - 3) * 0.02 + t * 0.01, i + 1);
  }
  // A student takes one back; a label outside the lesson is refused, naming the classes.
  await tabs[1]!.page.locator('[data-testid="collect-count"][data-class="sun"] button').click();
  await expect(tabs[1]!.page.locator('[data-testid="collect-count"][data-class="sun"]')).toHaveAttribute('data-count', String(PER_CLASS - 1));
  await expect(tabs[1]!.page.evaluate(() => window.webringOwnData!.add('dog', new Array(784).fill(0)))).rejects.toThrow(/cat, house, sun/);

  // The teacher sees counts only, live.
  const counts = async () => ((await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus).members.map((m) => [m.name, m.ownExamples]);
  await expect.poll(counts, { timeout: 10_000 }).toEqual([
    ['ida', { cat: PER_CLASS, house: PER_CLASS, sun: PER_CLASS }],
    ['jon', { cat: PER_CLASS, house: PER_CLASS, sun: PER_CLASS - 1 }],
  ]);

  // For the teachers' docs (docs/own-data.md): the Collect panel, and the counts the teacher sees.
  await tabs[0]!.page.getByTestId('collect-panel').screenshot({ path: path.join('test-results', 'screenshots', 'collect-panel.png') });
  const teacherPage = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await teacherPage.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  await expect(teacherPage.locator('tr', { hasText: 'jon' }).getByTestId('member-own-examples')).toHaveText(`${3 * PER_CLASS - 1} own: cat ${PER_CLASS} · house ${PER_CLASS} · sun ${PER_CLASS - 1}`);
  await teacherPage.getByTestId('members').screenshot({ path: path.join('test-results', 'screenshots', 'teacher-own-counts.png') });
  await teacherPage.close();

  // A start on the class's own data trains the collected classes.
  const start = await request.post(`/api/rooms/${ROOM}/start`, { headers: teacher, data: { model: 'mlp', data: 'own', epochs: 40, batchSizePerWorker: 8, saveEverySteps: 20, resumeFrom: 'none' } });
  expect(start.status()).toBe(200);
  // Two would each learn the other's gradient from their sum: they wait for a third, and say so.
  for (const { page } of tabs) await expect(page.getByTestId('state-banner')).toHaveAttribute('data-state', 'secure-wait');
  await expect(tabs[0]!.page.getByTestId('state-banner')).toContainText('Waiting for a third classmate');
  expect((await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json() as RoomStatus).step).toBe(0);
  tabs.push(await openStudent(browser, ROOM, 'kim', '&backend=cpu'));
  for (const { page } of tabs) await expect(status(page)).toHaveAttribute('data-state', 'done', { timeout: 180_000 });
  await expect(tabs[2]!.page.getByTestId('privacy')).toContainText("Only the class's sum of updates leaves this device, masked");
  const done = (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
  expect(done.config?.classes).toEqual(CLASSES);
  const history = ((await (await request.get(`/api/rooms/${ROOM}/metrics`, asTeacher)).json()) as { history: Array<{ loss: number }> }).history;
  console.log(`[own-labels] loss ${history[0]!.loss.toFixed(3)} → ${history.at(-1)!.loss.toFixed(3)}; held-out accuracy ${done.metrics.accuracy}`);
  expect(history.at(-1)!.loss).toBeLessThan(history[0]!.loss / 2);
  // Scored on the examples each tab held out, summed through the ring (counts only); chance is 1/3.
  expect(done.metrics.accuracy).toBeGreaterThanOrEqual(0.6);

  // The pad answers in the lesson's labels.
  const page = tabs[0]!.page;
  await expect(page.getByTestId('digit-pad').first().locator('[data-class]')).toHaveCount(CLASSES.length);
  await draw(page, 'digit-pad-canvas', SHAPES.house!(0));
  await expect(page.getByTestId('digit-prediction').first()).toHaveAttribute('data-predicted', /^(cat|house|sun)$/);

  // The checkpoint loads as any adopter would load it, and says what its outputs mean.
  const [newest] = (await (await request.get(`/api/rooms/${ROOM}/checkpoints`, asTeacher)).json()) as CheckpointInfo[];
  expect(newest?.classes).toEqual(CLASSES);
  const meta = (await (await request.get(`/api/rooms/${ROOM}/checkpoints/${newest!.id}/metadata.json`, asTeacher)).json()) as CheckpointMetadata;
  expect(meta.config.classes).toEqual(CLASSES);
  expect(meta.config.data).toBe('own');
  await tf.setBackend('cpu');
  const model = await tf.loadLayersModel(`${baseURL!}/api/rooms/${ROOM}/checkpoints/${newest!.id}/model.json`, { requestInit: asTeacher });
  expect(model.outputs[0]!.shape).toEqual([null, CLASSES.length]);
  model.dispose();
  expect(tabs.flatMap((t) => t.errors)).toEqual([]);
  for (const t of tabs) await t.context.close();
});
