/**
 * Two shorter runs: the teacher's Stop ends every tab after the same step, and the small
 * CNN (convolutions and their gradients) trains in lock-step on WebGPU too.
 */
import { test, expect } from '@playwright/test';
import { E2E_TOKEN } from '../../playwright.config';
import type { RoomStatus } from '../../shared/protocol';
import { asTeacher, openStudent, readStatus, status, type Student } from './helpers';

const teacher = { authorization: `Bearer ${E2E_TOKEN}` };

async function joinAll(browser: import('@playwright/test').Browser, room: string, names: string[]): Promise<Student[]> {
  const students: Student[] = [];
  for (const name of names) students.push(await openStudent(browser, room, name));
  return students;
}

test('Stop ends every tab after the same step with the same weights', async ({ browser, request }) => {
  const room = 'e2e-stop';
  const students = await joinAll(browser, room, ['ann', 'ben']);
  const start = await request.post(`/api/rooms/${room}/start`, { headers: teacher, data: { model: 'mlp', epochs: 1 } });
  expect(start.status()).toBe(200);
  await expect.poll(async () => Number((await readStatus(students[0]!.page)).step), { timeout: 120_000 }).toBeGreaterThanOrEqual(3);
  expect((await request.post(`/api/rooms/${room}/stop`, { headers: teacher })).status()).toBe(200);

  for (const s of students) await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  const finals = await Promise.all(students.map((s) => readStatus(s.page)));
  expect(new Set(finals.map((f) => f.step)).size).toBe(1);
  expect(new Set(finals.map((f) => f.weightsHash)).size).toBe(1);
  const stopped = Number(finals[0]!.step);
  const r = (await (await request.get(`/api/rooms/${room}`, asTeacher)).json()) as RoomStatus;
  expect(r.state).toBe('done');
  expect(stopped).toBeLessThan(r.totalSteps!);
  expect(r.step).toBe(stopped);
  expect(students.flatMap((s) => s.errors)).toEqual([]);
  for (const s of students) await s.context.close();
});

test('the small CNN trains in lock-step on WebGPU', async ({ browser, request }) => {
  const room = 'e2e-cnn';
  const students = await joinAll(browser, room, ['cat', 'dov']);
  const steps = 3;
  // The subset's 2,000 test digits: scoring the official 10,000 with the CNN on SwiftShader takes minutes a tab.
  const start = await request.post(`/api/rooms/${room}/start`, { headers: teacher, data: { model: 'cnn', dataset: 'mnist-10k', batchSizePerWorker: 16, maxSteps: steps } });
  expect(start.status()).toBe(200);
  for (const s of students) await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 180_000 });
  const finals = await Promise.all(students.map((s) => readStatus(s.page)));
  expect(finals.map((f) => f.step)).toEqual([String(steps), String(steps)]);
  expect(finals.every((f) => f.backend === 'webgpu' && Number(f.gradNorm) > 0)).toBe(true);
  expect(new Set(finals.map((f) => f.weightsHash)).size).toBe(1);
  expect(students.flatMap((s) => s.errors)).toEqual([]);
  for (const s of students) await s.context.close();
});
