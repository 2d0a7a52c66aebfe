/**
 * The names task in real tabs: the teacher picks it in the form and lets the students add
 * names of their own; three students type theirs (the Collect panel, and the same path by
 * script for a class's worth) and train the character model on them on WebGPU, under secure
 * aggregation, every name once an epoch, while no name reaches the server. The teacher page
 * lists ten names sampled from the latest checkpoint (seed and temperature stated, the
 * invented ones marked); a student's prefix box answers with completions and next-letter
 * probabilities from the tab's live weights; and the latest checkpoint loads in plain tfjs
 * in Node and samples names. (The dataset's names through the data service: the class test.)
 */
import { test, expect } from '@playwright/test';
import * as tf from '@tensorflow/tfjs';
import { E2E_PORT, E2E_TOKEN } from '../../playwright.config';
import type { RoomStatus } from '../../shared/protocol';
import { asTeacher, openStudent, readStatus, status, type Student, openAdvanced } from './helpers';
import { mulberry32 } from '../../shared/util/random';
import { CONTEXT, SYMBOLS, exampleCount } from '../../shared/tasks/names/names-text';
import { NAME_FILES, namesSplitOf } from '../../shared/tasks/names/datasets';
import { packageFilePath } from '../../signaling-server/data/datasets';
import { readFileSync } from 'node:fs';
import { SAMPLE_COUNT, SAMPLE_SEED, SAMPLE_TEMPERATURE, sampleNames } from '../../shared/tasks/names/sampling';

const ROOM = 'e2e-names';
const STEPS = 40;
/** What each student types by hand; the server must never see them. */
const TYPED = ['Zyxwanda', 'quorbet', 'ylvanne'];
/** Then a class's worth each by script, from the whole alphabet: about 150 names a tab. */
const NAMES_PER_TAB_STRIDE = 50;

test('three tabs train the names task on names they typed, from the teacher form; the teacher page invents names, a student completes a prefix, the checkpoint samples names in plain tfjs', async ({ browser, request }) => {
  test.setTimeout(480_000);
  const students: Student[] = [];
  for (const name of ['ada', 'bo', 'cy']) students.push(await openStudent(browser, ROOM, name));
  const epochLines: string[] = [];
  students[0]!.page.on('console', (msg) => {
    if (/^\[webring\] epoch \d+:/.test(msg.text())) epochLines.push(msg.text());
  });
  const teacher = await (await browser.newContext()).newPage();
  await teacher.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  await expect(teacher.getByTestId('members').locator('tr')).toHaveCount(3);

  // The form follows the task: its model and dataset, its recipe; no classes to name.
  await teacher.getByTestId('cfg-task').selectOption('names');
  await expect(teacher.locator('select[name=model]')).toHaveValue('char-mlp');
  await expect(teacher.locator('select[name=dataset]')).toHaveValue('names-en');
  await expect(teacher.locator('input[name=batchSizePerWorker]')).toHaveValue('64');
  await expect(teacher.locator('input[name=classes]')).toBeHidden();

  // The class adds names of its own: typed by hand, then a class's worth each by script.
  await teacher.locator('select[name=data]').selectOption('own');
  await teacher.getByTestId('collect-open').click();
  await expect(teacher.getByTestId('collect-state')).toContainText('Students are adding names');
  const split = namesSplitOf(NAME_FILES.map((file) => readFileSync(packageFilePath(file), 'utf8')));
  const added: string[] = [];
  for (const [k, s] of students.entries()) {
    const panel = s.page.getByTestId('collect-panel');
    await expect(panel).toBeVisible();
    await expect(panel.getByTestId('collect-class')).toBeHidden();
    const box = panel.getByTestId('collect-text');
    await box.fill(TYPED[k]!);
    await panel.getByTestId('collect-add').click();
    await expect(panel.getByTestId('collect-count')).toHaveAttribute('data-count', '1');
    await expect(panel.getByTestId('collect-items')).toHaveText(TYPED[k]!.toLowerCase());
    if (k === 0) {
      await box.fill('R2-D2');
      await panel.getByTestId('collect-add').click();
      await expect(s.page.locator('#collect-status')).toContainText('Not added');
    }
    const mine = split.train.filter((_, i) => i % NAMES_PER_TAB_STRIDE === k);
    const count = await s.page.evaluate(async (names) => {
      let n = 0;
      for (const name of names) n = await window.webringOwnData!.add('names', name);
      return n;
    }, mine);
    expect(count).toBe(mine.length + 1);
    added.push(TYPED[k]!.toLowerCase(), ...mine);
  }
  await expect(teacher.getByTestId('member-own-examples').first()).toContainText('names', { timeout: 10_000 });
  await openAdvanced(teacher);
  await teacher.locator('input[name=maxSteps]').fill(String(STEPS));
  await teacher.locator('input[name=saveEverySteps]').fill('20');
  await teacher.locator('input[name=startFresh]').check();
  await teacher.getByRole('button', { name: 'Start' }).click();

  for (const s of students) await expect(status(s.page)).toHaveAttribute('data-step', String(STEPS), { timeout: 300_000 });
  for (const s of students) await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  const finals = await Promise.all(students.map((s) => readStatus(s.page)));
  expect(new Set(finals.map((f) => f.weightsHash)).size, 'the replicas end bit-identical').toBe(1);
  const room = (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
  expect(room.config).toMatchObject({ task: 'names', model: 'char-mlp', dataset: 'names-en', data: 'own', secureAggregation: true });
  // Every name the class added, once an epoch (the dataset's held-out names score the run, so none is held out).
  expect(epochLines[0], epochLines.join('\n')).toContain(`epoch 0: ${exampleCount(added)} examples trained;`);
  // The server heard counts, never a name.
  const seen = JSON.stringify(room).toLowerCase();
  for (const name of TYPED) expect(seen).not.toContain(name.toLowerCase());
  expect(room.metrics.accuracy).toBeNull();
  expect(room.metrics.testLoss!, 'held-out nats per character below a uniform guess').toBeLessThan(Math.log(SYMBOLS.length));

  // The teacher page: ten names from the latest checkpoint, seed and temperature stated, new ones marked.
  const samples = teacher.getByTestId('names-samples').locator('li');
  await expect(samples).toHaveCount(SAMPLE_COUNT, { timeout: 60_000 });
  await expect(teacher.locator('#teacher-try')).toContainText(`seed ${SAMPLE_SEED}, temperature ${SAMPLE_TEMPERATURE}`);
  const sampled = await samples.evaluateAll((items) => items.map((li) => ({ name: li.firstChild?.textContent ?? '', novel: (li as HTMLElement).dataset.novel })));
  expect(sampled.every((s) => /^[a-z-]{1,20}$/.test(s.name) && (s.novel === 'true' || s.novel === 'false'))).toBe(true);

  // A student's prefix box: completions that start with it, and the next letter's odds.
  const page = students[0]!.page;
  const box = page.getByTestId('task-try').getByTestId('names-prefix');
  await box.fill('ma');
  const completions = page.getByTestId('names-completions').locator('li');
  await expect(completions.first()).toHaveText(/^ma[a-z-]*$/, { timeout: 30_000 });
  expect((await completions.allTextContents()).every((n) => n.startsWith('ma'))).toBe(true);
  await expect(page.getByTestId('names-next').locator('li')).toHaveCount(8);

  // The latest checkpoint in plain tfjs, as anyone adopting it would: it samples names.
  await tf.setBackend('cpu');
  const model = await tf.loadLayersModel(`http://127.0.0.1:${E2E_PORT}/api/rooms/${ROOM}/checkpoints/latest/model.json`, { requestInit: asTeacher });
  const ask = async (features: Float32Array, n: number) => {
    const p = tf.tidy(() => tf.softmax(model.predict(tf.tensor2d(features, [n, CONTEXT])) as tf.Tensor2D));
    const values = (await p.data()) as Float32Array;
    p.dispose();
    return values;
  };
  const names = (await sampleNames(ask, mulberry32(7), 5, { temperature: 0.8 }))!;
  expect(names).toHaveLength(5);
  for (const n of names) expect(n).toMatch(/^[a-z-]+$/);
  model.dispose();
  for (const s of students) expect(s.errors).toEqual([]);
});
