/**
 * The whole path, for real: three students in separate browser contexts join, the teacher
 * presses Start, and the tabs train one MNIST model over WebRTC with WebGPU (SwiftShader).
 * The teacher picks the halving-doubling all-reduce, so its partner links, stages and the
 * fold of a third rank into rank 0 run over real data channels too.
 */
import { test, expect } from '@playwright/test';
import { E2E_TOKEN } from '../../playwright.config';
import type { RoomMetrics, RoomStatus } from '../../shared/protocol';
import { asTeacher, openStudent, readStatus, status, type Student, openAdvanced } from './helpers';

const ROOM = 'e2e-ring';
const STEPS = 20;

test('three tabs train in lock-step on WebGPU to identical weights, led by the lowest index', async ({ browser, request }) => {
  const students: Student[] = [];
  for (const name of ['ada', 'bao', 'cyd']) students.push(await openStudent(browser, ROOM, name));

  for (const s of students) await expect(status(s.page)).toHaveAttribute('data-backend', 'webgpu');
  const room = (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
  expect(room.members.map((m) => m.name)).toEqual(['ada', 'bao', 'cyd']);
  expect(room.members.every((m) => m.backend === 'webgpu' && m.kind === 'browser')).toBe(true);

  // The teacher starts the run from the teacher page.
  const teacherContext = await browser.newContext();
  const teacher = await teacherContext.newPage();
  await teacher.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  await expect(teacher.getByTestId('members').locator('tr')).toHaveCount(3);
  await teacher.locator('select[name=model]').selectOption('mlp');
  await openAdvanced(teacher);
  await teacher.locator('input[name=maxSteps]').fill(String(STEPS));
  await teacher.locator('select[name=allreduce]').selectOption('halving-doubling');
  await teacher.getByRole('button', { name: 'Start' }).click();
  await expect(teacher.getByTestId('room-state')).toHaveText(/training|done/);

  // Tensor count once every tab is past its first step (Adam's slots exist by then).
  const tensorsEarly: number[] = [];
  for (const s of students) {
    await expect.poll(async () => Number((await readStatus(s.page)).step), { timeout: 120_000 }).toBeGreaterThanOrEqual(3);
    tensorsEarly.push(Number((await readStatus(s.page)).numTensors));
  }

  for (const s of students) {
    await expect(status(s.page)).toHaveAttribute('data-step', String(STEPS), { timeout: 180_000 });
    await expect(status(s.page)).toHaveAttribute('data-state', 'done');
  }

  const finals = await Promise.all(students.map((s) => readStatus(s.page)));
  const hashes = new Set(finals.map((f) => f.weightsHash));
  expect(hashes.size, `weights hashes ${JSON.stringify(finals.map((f) => f.weightsHash))}`).toBe(1);
  expect([...hashes][0]).toMatch(/^[0-9a-f]{16}$/);
  for (const f of finals) {
    expect(f.backend).toBe('webgpu');
    // WebGPU readback trap: zeros would leave the weights unchanged and the norm at 0.
    expect(Number(f.gradNorm)).toBeGreaterThan(0);
  }
  // No leaked tensors: the count stays flat from step 3 to step 20.
  expect(finals.map((f) => Number(f.numTensors))).toEqual(tensorsEarly);
  const chief = finals.filter((f) => f.chief === 'true');
  expect(chief).toHaveLength(1);
  expect(chief[0]!.rank).toBe('0');
  expect(Number(chief[0]!.index)).toBe(Math.min(...finals.map((f) => Number(f.index))));

  const final = (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
  expect(final.state).toBe('done');
  // Once every partner link was open, the gradients took halving-doubling, and the link
  // probes measured α and β; the teacher page says so under the ring.
  expect(final.config?.allreduce).toBe('halving-doubling');
  for (const m of final.members) {
    expect(m.collective?.algorithm).toBe('halving-doubling');
    expect(m.collective?.alphaMs).toBeGreaterThan(0);
    expect(m.collective?.betaMBps).toBeGreaterThan(0);
    expect(m.collective?.timing.computeMs).toBeGreaterThan(0);
  }
  await expect(teacher.getByTestId('collective-summary')).toHaveAttribute('data-algorithm', 'halving-doubling');
  await expect(teacher.getByTestId('collective-summary')).toContainText('halving-doubling');
  expect(final.step).toBe(STEPS);
  expect(final.chief).toBe(room.members[0]!.id);
  expect(final.metrics.accuracy).not.toBeNull();
  const metrics = (await (await request.get(`/api/rooms/${ROOM}/metrics`, asTeacher)).json()) as RoomMetrics;
  expect(metrics.history.map((p) => p.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const early = mean(metrics.history.slice(0, 3).map((p) => p.loss));
  const late = mean(metrics.history.slice(-3).map((p) => p.loss));
  expect(late, `loss from ${early.toFixed(3)} to ${late.toFixed(3)}`).toBeLessThan(early * 0.8);

  expect(students.flatMap((s) => s.errors)).toEqual([]);
  await teacherContext.close();
  for (const s of students) await s.context.close();
});
