/**
 * Without WebGPU the tab still trains: it says so in plain words and names the fallback.
 * `?backend=cpu` forces the last fallback, as a browser without WebGPU and WebGL would
 * end up; a ring of one must train on its own too.
 */
import { test, expect } from '@playwright/test';
import { E2E_TOKEN } from '../../playwright.config';
import type { RoomStatus } from '../../shared/protocol';
import { asTeacher, openStudent, readStatus, status } from './helpers';

const ROOM = 'e2e-fallback';

test('a lone tab on the CPU fallback explains why and trains to the end', async ({ browser, request }) => {
  const student = await openStudent(browser, ROOM, 'solo', '&backend=cpu');
  await expect(status(student.page)).toHaveAttribute('data-backend', 'cpu');
  await expect(student.page.locator('#webgpu-notice')).toContainText('trains with CPU instead');

  const res = await request.post(`/api/rooms/${ROOM}/start`, {
    headers: { authorization: `Bearer ${E2E_TOKEN}` },
    data: { model: 'mlp', optimizer: 'sgd', learningRate: 0.1, maxSteps: 40 },
  });
  expect(res.status()).toBe(200);
  await expect(status(student.page)).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  const final = await readStatus(student.page);
  expect(final.step).toBe('40');
  expect(final.chief).toBe('true');
  expect(Number(final.gradNorm)).toBeGreaterThan(0);
  const room = (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
  expect(room.state).toBe('done');
  expect(room.members[0]!.backend).toBe('cpu');
  expect(room.metrics.accuracy).toBeGreaterThan(0.6);
  expect(student.errors).toEqual([]);
  await student.context.close();
});
