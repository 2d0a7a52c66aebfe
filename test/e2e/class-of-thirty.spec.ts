/**
 * The teacher page with a class of thirty on a 1280×800 laptop and on the projector (Big
 * screen). Thirty members join the real server over socket.io as Node workers do; 24 train
 * and report their steps (one of them four times slower than the rest), 6 more arrive
 * mid-run and are admitted without a step yet (a join storm in progress). What a teacher
 * must see: the ring with 30 nodes and the storm's progress, and the whole class in a
 * members table one screen high, with the slow and the connecting students standing out.
 * The screenshots go to test-results/screenshots. The README's come from a real run of thirty
 * Node workers instead: `npm run screenshots:class30` (scripts/class30-screenshots.ts).
 *
 * The members here report progress without training: the page, not the ring, is under
 * test (class-storm.test.ts trains twenty real Node workers through a storm).
 */
import path from 'node:path';
import { test, expect } from '@playwright/test';
import { io, type Socket } from 'socket.io-client';
import { E2E_TOKEN } from '../../playwright.config';
import type { ClientToServerEvents, JoinAccepted, AckResult, ProgressReport, RoomStatus, ServerToClientEvents } from '../../shared/protocol';
import { asTeacher, codeFor } from './helpers';

const ROOM = 'e2e-class-of-thirty';
const SHOTS = path.join('test-results', 'screenshots');
const LAPTOP = { width: 1280, height: 800 };
const TRAINING = 24;
const ARRIVING = 6;
/** Rank 7 computes this many times longer than the others: the table's straggler. */
const SLOW_FACTOR = 4;
const NAMES = ['Ada', 'Ben', 'Chen', 'Dana', 'Eli', 'Fatima', 'Gus', 'Hana', 'Ivan', 'Jia', 'Kofi', 'Lea', 'Mateo', 'Noor', 'Olu', 'Priya', 'Quinn', 'Rosa', 'Sami', 'Tara', 'Umar', 'Vera', 'Wen', 'Xavi', 'Yara', 'Zoe', 'Aiko', 'Bo', 'Cyrus', 'Dev'];

type MemberSocket = Socket<ServerToClientEvents, ClientToServerEvents>;
const sockets: MemberSocket[] = [];

async function joinMember(baseURL: string, name: string): Promise<MemberSocket> {
  const socket: MemberSocket = io(baseURL, { transports: ['websocket'], forceNew: true, reconnection: false, auth: { room: ROOM, code: codeFor(ROOM) } });
  sockets.push(socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('connect_error', reject);
  });
  const joined = await new Promise<AckResult<JoinAccepted>>((resolve) => socket.emit('room:join', { room: ROOM, name, kind: 'node', backend: 'cpu' }, resolve));
  expect(joined.ok, JSON.stringify(joined)).toBe(true);
  return socket;
}

function progress(run: number, generation: number, step: number, slow: number): ProgressReport {
  return {
    run, generation, step, epoch: 0, loss: 2 / step, trainAccuracy: Math.min(0.95, 0.2 + step * 0.05), examplesPerSec: 300 / slow, weightsHash: '0123456789abcdef', totalSteps: 1_000,
    computeMs: 40 * slow, hashChecked: false, hashMismatch: false, batchShare: 1 / TRAINING, linkMBps: 20, learningRate: 0.001, speedVsMedian: 1 / slow,
    collective: { algorithm: 'halving-doubling', alphaMs: 0.5, betaMBps: 20, reason: 'halving-doubling: 10 hops against the ring\'s 46', timing: { dataMs: 1, computeMs: 40 * slow, readbackMs: 1, crossMs: 0.5, commMs: 12, applyMs: 2 } },
  };
}

test.afterAll(() => {
  for (const s of sockets) s.disconnect();
});

test('a class of thirty on the teacher page: the ring with the storm\'s progress, and the whole class on one screen', async ({ page, request, baseURL }) => {
  const trainers: MemberSocket[] = [];
  for (const name of NAMES.slice(0, TRAINING)) trainers.push(await joinMember(baseURL!, name));
  const start = await request.post(`/api/rooms/${ROOM}/start`, { ...asTeacher, data: { model: 'mlp', maxSteps: 1_000, resumeFrom: 'none' } });
  expect(start.status()).toBe(200);
  const roomStatus = async () => (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
  const { run, generation } = await roomStatus();
  for (let step = 1; step <= 8; step++) trainers.forEach((s, rank) => s.emit('worker:progress', progress(run, generation, step, rank === 7 ? SLOW_FACTOR : 1)));
  await expect.poll(async () => (await roomStatus()).step).toBe(8);
  // Six students arrive while the class trains: admitted together, still connecting.
  for (const name of NAMES.slice(TRAINING)) await joinMember(baseURL!, name);
  await expect.poll(async () => (await roomStatus()).members.filter((m) => m.connecting).length).toBe(ARRIVING);

  await page.setViewportSize(LAPTOP);
  await page.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  const ring = page.locator('#ring-view');
  await expect(ring.locator('.ring-node')).toHaveCount(TRAINING + ARRIVING);
  await expect(ring.locator('.ring-node.is-connecting')).toHaveCount(ARRIVING);
  await expect(page.getByTestId('ring-progress')).toHaveText(`${TRAINING} of ${TRAINING + ARRIVING} in step · ${ARRIVING} connecting`);
  // Thirty link labels would cover the names: a class this size has none in the picture.
  await expect(ring.locator('.ring-link-label')).toHaveCount(0);
  await expect(page.locator('#members-summary')).toContainText(`${TRAINING + ARRIVING} in the ring · ${ARRIVING} connecting`);

  const rows = page.getByTestId('members').locator('tr');
  await expect(rows).toHaveCount(TRAINING + ARRIVING);
  await expect(rows.filter({ hasText: 'Hana' })).toHaveClass(/is-straggler/);
  await expect(page.getByTestId('members').locator('tr.is-connecting')).toHaveCount(ARRIVING);
  // The whole class fits on one laptop screen: one line per student.
  const tableHeight = await page.locator('#members-card .table-scroll').evaluate((el) => el.getBoundingClientRect().height);
  expect(tableHeight).toBeLessThanOrEqual(LAPTOP.height);
  const rowHeights = await rows.evaluateAll((trs) => trs.map((tr) => tr.getBoundingClientRect().height));
  expect(Math.max(...rowHeights)).toBeLessThan(32);

  await page.screenshot({ path: path.join(SHOTS, 'teacher-class30-1280x800.png') });
  await page.locator('#members-card').screenshot({ path: path.join(SHOTS, 'teacher-class30-members.png') });
  await page.locator('#big-toggle').click();
  await expect(page.locator('#big-toggle')).toHaveAttribute('aria-pressed', 'true');
  await expect(page.getByTestId('ring-progress')).toBeVisible();
  await page.screenshot({ path: path.join(SHOTS, 'teacher-class30-big.png') });
});
