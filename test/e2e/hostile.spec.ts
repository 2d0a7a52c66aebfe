/**
 * A greedy reader: a member that takes far more examples than its share is refused, and the
 * teacher page names it (the budgets themselves are test/unit/data-budget.test.ts's).
 *
 * A hostile tab: from step POISON_STEP on, one of four real tabs writes NaN into
 * every ring message it sends, past its own sender-side check (the debugPoisonAtStep flag).
 * Its receiver rejects the first such message before summing it, names it to the server,
 * and the server evicts it; the teacher page and the room API name it, and the three
 * survivors train on over real data channels with identical, finite weights.
 * CPU backend, as in elastic.spec.ts: what is under test is the ring, not the kernels.
 */
import { test, expect } from '@playwright/test';
import { io as connectSocket } from 'socket.io-client';
import { E2E_PORT, E2E_TOKEN } from '../../playwright.config';
import type { AckResult, JoinAccepted, RoomStatus } from '../../shared/protocol';
import { asTeacher, codeFor, openStudent, readStatus, status, type Student } from './helpers';

const teacher = { authorization: `Bearer ${E2E_TOKEN}` };
const CPU = '&backend=cpu';
const POISON_STEP = 6;

const step = async (s: Student) => Number((await readStatus(s.page)).step);

test('a tab that sends NaN is evicted, named to the teacher, and the survivors keep training identical and finite', async ({ browser, request }) => {
  const room = 'e2e-hostile';
  const honest: Student[] = [];
  for (const name of ['ann', 'bea', 'cal']) honest.push(await openStudent(browser, room, name, CPU));
  const hostile = await openStudent(browser, room, 'dot', `${CPU}&debugPoisonAtStep=${POISON_STEP}`);
  const started = await request.post(`/api/rooms/${room}/start`, {
    headers: teacher,
    data: { model: 'mlp', optimizer: 'adam', maxSteps: 1000, saveEverySteps: 1000, resumeFrom: 'none' },
  });
  expect(started.status()).toBe(200);

  // The poisoned step starts once the ring has finished step POISON_STEP - 1.
  await expect.poll(() => step(honest[0]!), { timeout: 60_000, intervals: [25] }).toBeGreaterThanOrEqual(POISON_STEP);
  const t0 = Date.now();
  await expect(status(hostile.page)).toHaveAttribute('data-state', 'dropped', { timeout: 30_000 });
  await expect(status(hostile.page)).toHaveAttribute('data-error-code', 'ERR_PEER_MISBEHAVED');
  const evictedMs = Date.now() - t0;
  await expect
    .poll(async () => (await Promise.all(honest.map((s) => readStatus(s.page)))).every((s) => s.worldSize === '3' && Number(s.step) > POISON_STEP + 1), {
      timeout: 30_000,
      intervals: [25],
    })
    .toBe(true);
  const recoveredMs = Date.now() - t0;
  console.log(`[hostile] poisoned step began → dot evicted in ${evictedMs} ms; survivors stepping again (past step ${POISON_STEP + 1}) after ${recoveredMs} ms`);

  // The room API names it, with what it sent and who saw it.
  const api = (await (await request.get(`/api/rooms/${room}`, asTeacher)).json()) as RoomStatus;
  expect(api.members.map((m) => m.name)).toEqual(['ann', 'bea', 'cal']);
  expect(api.dropped.map((d) => [d.name, d.reason, d.misbehaviour])).toEqual([['dot', 'evicted', 'non-finite']]);
  expect(['ann', 'bea', 'cal']).toContain(api.dropped[0]!.reportedBy);
  expect(api.events.map((e) => e.kind)).toContain('evicted');
  expect(api.state).toBe('training');

  // So does the teacher page.
  const teacherContext = await browser.newContext();
  const page = await teacherContext.newPage();
  await page.goto(`/teacher?room=${room}&token=${E2E_TOKEN}`);
  await expect(page.getByTestId('dropped')).toContainText('dot');
  await expect(page.getByTestId('dropped')).toContainText('evicted');

  // The survivors go on in lock-step: the same weights at the same step, finite loss and gradient.
  const target = (await step(honest[0]!)) + 3;
  await expect.poll(() => Promise.all(honest.map(step)).then((s) => Math.min(...s)), { timeout: 30_000 }).toBeGreaterThanOrEqual(target);
  let same: Array<Record<string, string>> = [];
  for (let attempt = 0; attempt < 200; attempt++) {
    same = await Promise.all(honest.map((s) => readStatus(s.page)));
    if (same.every((s) => s.step === same[0]!.step)) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(new Set(same.map((s) => s.step)).size).toBe(1);
  expect(new Set(same.map((s) => s.weightsHash)).size, `hashes at step ${same[0]!.step}`).toBe(1);
  for (const s of same) {
    expect(Number.isFinite(Number(s.loss)) && s.loss !== '', `loss ${s.loss}`).toBe(true);
    expect(Number.isFinite(Number(s.gradNorm)) && Number(s.gradNorm) > 0, `gradNorm ${s.gradNorm}`).toBe(true);
  }
  expect.soft(honest.flatMap((s) => s.errors)).toEqual([]);
  expect((await request.post(`/api/rooms/${room}/stop`, { headers: teacher })).status()).toBe(200);
  for (const s of honest) await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  for (const c of [...honest.map((t) => t.context), hostile.context, teacherContext]) await c.close();
});

test('a member that reads far past its share of the examples is refused, and the teacher page names it, says why and what happens next', async ({ browser, request }) => {
  const room = 'e2e-greedy-reader';
  // A member that never trains: a socket.io client of this test, as a script in a student's console would be.
  const socket = connectSocket(`http://127.0.0.1:${E2E_PORT}`, { transports: ['websocket'], forceNew: true, reconnection: false, auth: { room, code: codeFor(room) } });
  const joined = await new Promise<AckResult<JoinAccepted>>((resolve) => socket.emit('room:join', { room, name: 'greedy', kind: 'node', backend: 'cpu' }, resolve));
  expect(joined.ok).toBe(true);
  const token = joined.ok ? joined.memberToken : '';
  expect((await request.post(`/api/rooms/${room}/start`, { headers: teacher, data: { model: 'mlp', dataset: 'mnist-10k', balanceShares: false, resumeFrom: 'none' } })).status()).toBe(200);
  // The same digits again and again, as many as one request may hold, until the budget says no.
  let refused = 0;
  for (let i = 0; i < 200 && refused === 0; i++) {
    const res = await request.get(`/api/rooms/${room}/data/mnist-10k/train?ranges=0-575`, { headers: { authorization: `Bearer ${token}` } });
    if (res.status() === 429) refused = i;
  }
  expect(refused, 'the greedy member was refused').toBeGreaterThan(0);
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`/teacher?room=${room}&token=${E2E_TOKEN}`);
  const notice = page.getByTestId('data-refused');
  await expect(notice).toBeVisible();
  await expect(notice).toContainText('greedy');
  await expect(notice).toContainText('ERR_DATA_BUDGET');
  await expect(notice).toContainText('asks again every 10 s');
  await expect(notice).toContainText('ERR_RUN_STALLED');
  expect((await request.post(`/api/rooms/${room}/stop`, { headers: teacher })).status()).toBe(200);
  socket.disconnect();
  await context.close();
});
