/**
 * What the teacher's page says is private, as the run goes: the form names what stays
 * public and the limits beside the setting; the run card says a secure ring of two waits
 * for a third, then that the gradients are masked, and for a run on the server's digits
 * that they travel unmasked. The members are sockets that join as Node workers do; the page,
 * not the ring, is under test (secure-keys.test.ts and own-data-tabs.spec.ts train for real).
 */
import { test, expect } from '@playwright/test';
import { io, type Socket } from 'socket.io-client';
import { E2E_TOKEN } from '../../playwright.config';
import type { AckResult, ClientToServerEvents, JoinAccepted, ServerToClientEvents } from '../../shared/protocol';
import { asTeacher, codeFor } from './helpers';

type MemberSocket = Socket<ServerToClientEvents, ClientToServerEvents>;
const sockets: MemberSocket[] = [];

async function joinMember(baseURL: string, room: string, name: string): Promise<void> {
  const socket: MemberSocket = io(baseURL, { transports: ['websocket'], forceNew: true, reconnection: false, auth: { room, code: codeFor(room) } });
  sockets.push(socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('connect_error', reject);
  });
  const joined = await new Promise<AckResult<JoinAccepted>>((resolve) => socket.emit('room:join', { room, name, kind: 'node', backend: 'cpu' }, resolve));
  expect(joined.ok, JSON.stringify(joined)).toBe(true);
}

test.afterAll(() => {
  for (const s of sockets) s.disconnect();
});

test('the teacher page says what is private: the limits beside the setting, a ring of two waiting, masked, and unmasked', async ({ page, request, baseURL }) => {
  const room = 'e2e-privacy-page';
  await joinMember(baseURL!, room, 'Ada');
  await joinMember(baseURL!, room, 'Ben');
  await page.goto(`/teacher?room=${room}&token=${E2E_TOKEN}`);
  const limits = page.getByTestId('privacy-limits');
  for (const said of ["the class's summed gradient, each device's example count, loss and step times", 'Two students wait for a third', 'float32 gradients', 'could swap them']) {
    await expect(limits).toContainText(said);
  }
  await expect(page.locator('#cfg-secureAggregation')).toHaveValue('auto');

  expect((await request.post(`/api/rooms/${room}/start`, { ...asTeacher, data: { model: 'mlp', secureAggregation: true, maxSteps: 1_000, resumeFrom: 'none' } })).status()).toBe(200);
  const state = page.getByTestId('privacy-state');
  await expect(state).toHaveText("Secure aggregation is waiting for student 3: with 2, each would learn the other's gradient from their sum.");
  await joinMember(baseURL!, room, 'Chen');
  // The third is admitted at the ring's next switch: the room lists it at once.
  await expect(state).toContainText('Secure aggregation is on');
  await expect(state).toHaveAttribute('data-secure', 'true');
  expect((await request.post(`/api/rooms/${room}/stop`, asTeacher)).status()).toBe(200);

  const digits = 'e2e-privacy-digits';
  for (const name of ['Dana', 'Eli', 'Fatima']) await joinMember(baseURL!, digits, name);
  await page.goto(`/teacher?room=${digits}&token=${E2E_TOKEN}`);
  expect((await request.post(`/api/rooms/${digits}/start`, { ...asTeacher, data: { model: 'mlp', maxSteps: 1_000, resumeFrom: 'none' } })).status()).toBe(200);
  await expect(page.getByTestId('privacy-state')).toContainText('Gradients travel unmasked');
  await expect(page.getByTestId('privacy-state')).toHaveAttribute('data-secure', 'false');
});
