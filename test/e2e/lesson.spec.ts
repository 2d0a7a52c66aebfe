/**
 * A whole lesson, the way a class lives it: a teacher and three students. They join, the
 * teacher configures and starts, pauses and resumes, the students draw digits for the
 * network they are training, and the teacher downloads a checkpoint. Screenshots of both
 * pages at laptop and phone size are saved as test artefacts (and shown in the README).
 */
import { test, expect, type Page } from '@playwright/test';
import { readFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { E2E_TOKEN } from '../../playwright.config';
import { codeFor, draw, openStudent, readStatus, reportCspViolations, status, type Student, openAdvanced } from './helpers';

const ROOM = 'e2e-lesson';
const STEPS = 60;
const SHOTS = path.join('test-results', 'screenshots');
const LAPTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

async function noHorizontalScroll(page: Page): Promise<void> {
  const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, view: window.innerWidth }));
  expect(widths.scroll, `page is ${widths.scroll} px wide in a ${widths.view} px window`).toBeLessThanOrEqual(widths.view);
}

/** Every visible control has an accessible name (a label, aria-label or aria-labelledby) and is reachable by keyboard. */
async function controlsAreLabelled(page: Page): Promise<void> {
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll<HTMLElement>('input, select, textarea, button, a[href]')]
      .filter((el) => el.offsetParent !== null && (el as HTMLInputElement).type !== 'hidden')
      .filter((el) => {
        const labelled = (el as HTMLInputElement).labels?.length || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
        const text = el.tagName === 'BUTTON' || el.tagName === 'A' ? el.textContent?.trim() : '';
        return !(labelled || text) || el.tabIndex < 0;
      })
      .map((el) => el.outerHTML.slice(0, 120)),
  );
  expect(unlabelled).toEqual([]);
}

async function shoot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  for (const [label, size] of [['1280x800', LAPTOP], ['390x844', PHONE]] as const) {
    await page.setViewportSize(size);
    await page.waitForTimeout(300); // charts follow their container's width
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(SHOTS, `${name}-${label}.png`), fullPage: true });
  }
  await page.setViewportSize(LAPTOP);
}

test('a whole lesson: join, configure, start, pause, resume, draw a digit, download a checkpoint', async ({ browser }) => {
  const teacherContext = await browser.newContext({ viewport: LAPTOP, acceptDownloads: true });
  const teacher = await teacherContext.newPage();
  const teacherErrors: string[] = [];
  teacher.on('console', (m) => m.type() === 'error' && teacherErrors.push(m.text()));
  teacher.on('pageerror', (e) => teacherErrors.push(e.message));
  await teacherContext.addInitScript(reportCspViolations);
  const opened = await teacher.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  // A page for the projector: the token leaves the address bar once read, and no request names the page.
  await expect(teacher).toHaveURL(new RegExp(`/teacher\\?room=${ROOM}$`));
  expect(opened!.headers()['referrer-policy']).toBe('no-referrer');
  expect(opened!.headers()['content-security-policy']).toContain("script-src 'self'");

  const students: Student[] = [];
  for (const name of ['ada', 'bo', 'cy']) students.push(await openStudent(browser, ROOM, name, '&backend=cpu'));
  await expect(teacher.getByTestId('members').locator('tr')).toHaveCount(3);
  // A reload keeps the dashboard working: the tab kept the token.
  await teacher.reload();
  await expect(teacher.getByTestId('members').locator('tr')).toHaveCount(3);
  await expect(teacher.getByTestId('join-code')).toHaveText(codeFor(ROOM));

  // Configure: a bad value is explained at its field, then the real lesson settings. The
  // lesson's few choices come first; the learning rate is under Advanced, which a refused
  // field there opens again.
  await expect(teacher.locator('input[name=learningRate]')).toBeHidden();
  await openAdvanced(teacher);
  const lr = teacher.locator('input[name=learningRate]');
  await lr.fill('-1');
  await teacher.getByTestId('advanced-settings').locator('summary').click();
  await expect(lr).toBeHidden();
  await teacher.getByRole('button', { name: 'Start' }).click();
  await expect(lr).toHaveAttribute('aria-invalid', 'true');
  await expect(lr).toBeVisible();
  await expect(teacher.locator(`#${await lr.getAttribute('aria-describedby')}`)).toContainText(/./);
  await lr.fill('0.002');
  await teacher.locator('select[name=model]').selectOption('mlp');
  await teacher.locator('input[name=maxSteps]').fill(String(STEPS));
  await teacher.locator('input[name=saveEverySteps]').fill('10');
  await teacher.getByRole('button', { name: 'Start' }).click();
  await expect(teacher.getByTestId('room-state')).toHaveText(/training/);

  // Pause: every tab stops after the same step and says so; Resume: they go on.
  await expect.poll(async () => Number((await readStatus(students[0]!.page)).step), { timeout: 60_000 }).toBeGreaterThanOrEqual(10);
  await teacher.getByRole('button', { name: 'Pause' }).click();
  for (const s of students) {
    await expect(status(s.page)).toHaveAttribute('data-state', 'paused', { timeout: 20_000 });
    await expect(s.page.getByTestId('state-banner')).toHaveAttribute('data-state', 'paused');
  }
  const pausedAt = await Promise.all(students.map(async (s) => (await readStatus(s.page)).step));
  expect(new Set(pausedAt).size, `paused at steps ${pausedAt}`).toBe(1);
  await teacher.waitForTimeout(1_500);
  expect(await Promise.all(students.map(async (s) => (await readStatus(s.page)).step))).toEqual(pausedAt);
  await expect(teacher.getByTestId('room-state')).toHaveText(/paused/);
  await shoot(students[0]!.page, 'student-paused');
  await teacher.getByRole('button', { name: 'Resume' }).click();
  for (const s of students) await expect.poll(async () => Number((await readStatus(s.page)).step), { timeout: 30_000 }).toBeGreaterThan(Number(pausedAt[0]));

  await shoot(teacher, 'teacher-training');
  for (const s of students) await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 120_000 });
  await expect(teacher.getByTestId('room-state')).toHaveText(/done/, { timeout: 30_000 });

  // A student draws a "1" for the network the class just trained, and sees its answer.
  const student = students[1]!.page;
  await draw(student, 'digit-pad-canvas', [[0.5, 0.15], [0.5, 0.85]]);
  const prediction = student.getByTestId('digit-prediction');
  await expect(prediction).toHaveAttribute('data-predicted', '1', { timeout: 15_000 });
  const probabilities = (await prediction.getAttribute('data-probabilities'))!.split(',').map(Number);
  expect(probabilities).toHaveLength(10);
  expect(Math.abs(probabilities.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-3);
  await shoot(student, 'student-done');

  // The teacher's pad asks the latest checkpoint, loaded with tf.loadLayersModel.
  await expect(teacher.getByTestId('teacher-try-status')).toHaveAttribute('data-checkpoint', /^ckpt-/, { timeout: 30_000 });
  await draw(teacher, 'digit-pad-canvas', [[0.5, 0.15], [0.5, 0.85]]);
  await expect(teacher.getByTestId('digit-prediction')).toHaveAttribute('data-predicted', '1', { timeout: 15_000 });

  // Download the newest checkpoint's model.json from the dashboard.
  const downloadLink = teacher.getByTestId('checkpoints').getByRole('link', { name: /model\.json/ }).first();
  const [download] = await Promise.all([teacher.waitForEvent('download'), downloadLink.click()]);
  const saved = path.join('test-results', 'lesson-model.json');
  await download.saveAs(saved);
  const model = JSON.parse(readFileSync(saved, 'utf8')) as { modelTopology: unknown; weightsManifest: Array<{ paths: string[] }> };
  expect(model.modelTopology).toBeTruthy();
  expect(model.weightsManifest[0]!.paths.length).toBeGreaterThan(0);
  await shoot(teacher, 'teacher-done');
  await controlsAreLabelled(teacher);
  await controlsAreLabelled(student);

  expect(teacherErrors).toEqual([]);
  expect(students.flatMap((s) => s.errors)).toEqual([]);
  for (const c of [teacherContext, ...students.map((s) => s.context)]) await c.close();
});
