/**
 * Without WebGPU the tab still trains: it says so in plain words and names the fallback.
 * `?backend=cpu` forces the last fallback; a ring of one must train on its own too.
 * `?backend=wasm` forces the one before it, as a browser without WebGPU and WebGL ends up:
 * its binaries come from the server, its missing gradient kernels from ours, and it trains
 * the CNN in lock-step with a CPU tab, to the same weights bit for bit (the update is the
 * same JavaScript on both).
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

test('a tab on WebAssembly trains the CNN in lock-step with a CPU tab, to the same weights', async ({ browser, request }) => {
  const room = 'e2e-fallback-wasm';
  const wasm = await openStudent(browser, room, 'wasm', '&backend=wasm');
  const cpu = await openStudent(browser, room, 'cpu', '&backend=cpu');
  await expect(status(wasm.page)).toHaveAttribute('data-backend', 'wasm');
  await expect(wasm.page.locator('#webgpu-notice')).toContainText('trains with WebAssembly instead');
  const res = await request.post(`/api/rooms/${room}/start`, { ...asTeacher, data: { model: 'cnn', maxSteps: 12 } });
  expect(res.status()).toBe(200);
  for (const s of [wasm, cpu]) await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 120_000 });
  const [a, b] = [await readStatus(wasm.page), await readStatus(cpu.page)];
  expect([a.step, b.step]).toEqual(['12', '12']);
  expect(a.weightsHash).toBe(b.weightsHash);
  expect(Number(a.gradNorm)).toBeGreaterThan(0);
  const done = (await (await request.get(`/api/rooms/${room}`, asTeacher)).json()) as RoomStatus;
  expect(done.members.map((m) => m.backend).sort()).toEqual(['cpu', 'wasm']);
  expect(done.consistency.mismatches).toBe(0);
  for (const s of [wasm, cpu]) expect(s.errors).toEqual([]);
  for (const s of [wasm, cpu]) await s.context.close();
});
