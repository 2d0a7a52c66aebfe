/**
 * Shares sized to speed, in real tabs: one of four students is on a device that is slow per
 * example (the test build's `debugSlowPerExampleMs`). Its admission probe sees it before
 * Start: the teacher reads "3 laptops, 1 slow laptop". With `balanceShares` its very first
 * share is already small, the ring keeps measuring it, both pages say why, and the replicas
 * stay bit-identical. The step rates are printed, not asserted.
 */
import { test, expect, type APIRequestContext } from '@playwright/test';
import type { RoomStatus } from '../../shared/protocol';
import { E2E_TOKEN } from '../../playwright.config';
import { asTeacher, openStudent, readStatus, status, type Student } from './helpers';

const ROOM = 'e2e-shares';
const CPU = '&backend=cpu';
const SLOW_MS_PER_EXAMPLE = 25;
const PER_WORKER = 16;

const roomStatus = async (request: APIRequestContext): Promise<RoomStatus> => (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;

/** Steps per second of the class over `ms`. */
async function stepRate(request: APIRequestContext, ms: number): Promise<number> {
  const from = (await roomStatus(request)).step;
  await new Promise((r) => setTimeout(r, ms));
  return (((await roomStatus(request)).step - from) * 1000) / ms;
}

test('a slow device takes a smaller share, is told why, and the ring stays identical', async ({ browser, request }) => {
  const tabs: Student[] = [];
  for (const name of ['kai', 'lou', 'max']) tabs.push(await openStudent(browser, ROOM, name, CPU));
  const slow = await openStudent(browser, ROOM, 'ned', `${CPU}&debugSlowPerExampleMs=${SLOW_MS_PER_EXAMPLE}`);
  // Before Start, from the admission probes.
  const teacher = await (await browser.newContext()).newPage();
  await teacher.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  await expect(teacher.getByTestId('class-devices')).toHaveText('3 laptops, 1 slow laptop');
  await expect(teacher.locator('tr', { hasText: 'ned' }).getByTestId('member-probe')).toContainText('laptop · ');
  const started = await request.post(`/api/rooms/${ROOM}/start`, {
    ...asTeacher,
    data: { model: 'mlp', dataset: 'mnist-10k', batchSizePerWorker: PER_WORKER, balanceShares: true, maxSteps: 1000, saveEverySteps: 1000, resumeFrom: 'none' },
  });
  expect(started.status()).toBe(200);
  await expect.poll(async () => (await roomStatus(request)).step, { timeout: 60_000 }).toBeGreaterThanOrEqual(1);
  // The first shares came from the probes: ned's is small before the ring has measured anything.
  // Its own first report can reach the server after the chief's (ned is the slow one), and
  // shows 0 until then: wait for it.
  const nedShare = async () => (await roomStatus(request)).members.find((m) => m.name === 'ned')!.batchShare;
  await expect.poll(nedShare, { timeout: 30_000 }).toBeGreaterThan(0);
  const firstShare = await nedShare();
  expect(firstShare).toBeLessThan(0.25 / 2);
  const firstRate = await stepRate(request, 2_000);

  // Every fifth step the ring re-balances from the measured times: ned's share falls well below a quarter.
  await expect
    .poll(async () => (await roomStatus(request)).members.find((m) => m.name === 'ned')?.batchShare ?? 1, { timeout: 90_000 })
    .toBeLessThan(0.25 / 2);
  const api = await roomStatus(request);
  const ned = api.members.find((m) => m.name === 'ned')!;
  const others = api.members.filter((m) => m.name !== 'ned');
  expect(ned.speedVsMedian).toBeLessThan(0.5);
  // Its slack goes to the others. Not necessarily a quarter each: shares follow when each tab
  // is ready, its work between steps included (share-balancer.ts), and four tabs share two
  // cores here, so one of the others may be slower too; but each takes more than ned.
  expect(others.reduce((sum, m) => sum + m.batchShare, 0)).toBeGreaterThan(0.75);
  for (const m of others) expect(m.batchShare).toBeGreaterThan(ned.batchShare);
  const balancedRate = await stepRate(request, 4_000);
  console.log(`[shares] ned ${(firstShare * 100).toFixed(1)} % of the first batches (probe), ${(ned.batchShare * 100).toFixed(1)} % once measured (${ned.speedVsMedian.toFixed(2)}× the median); class ${firstRate.toFixed(2)} steps/s at first, ${balancedRate.toFixed(2)} measured`);

  // Both pages say why.
  await expect(status(slow.page)).toHaveAttribute('data-state', 'training');
  await expect(slow.page.locator('#s-share')).toContainText('your device is 0.');
  await expect(slow.page.locator('#s-share')).toContainText('× the class median');
  await expect(teacher.locator('tr', { hasText: 'ned' }).getByTestId('batch-share')).toContainText('× the class median');

  expect((await request.post(`/api/rooms/${ROOM}/stop`, asTeacher)).status()).toBe(200);
  const all = [...tabs, slow];
  for (const s of all) await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  const finals = await Promise.all(all.map((s) => readStatus(s.page)));
  expect(new Set(finals.map((f) => f.step)).size).toBe(1);
  expect(new Set(finals.map((f) => f.weightsHash)).size, JSON.stringify(finals.map((f) => f.weightsHash))).toBe(1);
  expect(all.flatMap((s) => s.errors)).toEqual([]);
  for (const s of all) await s.context.close();
});
