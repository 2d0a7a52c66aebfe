/**
 * Every engine a school has, in one class (issue 58): two Chromium tabs (Playwright), two
 * Firefox ESR tabs (puppeteer-core over WebDriver BiDi) and two WebKitGTK tabs
 * (WebKitWebDriver under Xvfb) join from the student page, as students do, and train the
 * default task's small model in lock-step to one weights hash. Debian's WebKitGTK has no
 * RTCPeerConnection, so its tabs relay every link through the server, and the teacher's
 * room API says so; the Chromium and Firefox tabs link directly. Each engine picks its own
 * backend, which the log shows. Drivers: test/e2e/engines.ts.
 */
import { test, expect } from '@playwright/test';
import type { Browser as PuppeteerBrowser } from 'puppeteer-core';
import type { RoomStatus } from '../../shared/protocol';
import { skipUnless } from '../support/requirements';
import { asTeacher, codeFor, openStudent, readStatus, startMlpRun, type Student } from './helpers';
import { firefoxNeeds, firefoxStudent, launchFirefox, startWebKitDriver, webkitNeeds, webkitStudent, type EngineTab, type WebKitDriver } from './engines';

const ROOM = 'e2e-engines';
const STEPS = 100;
/** Displays and driver ports of the two WebKit students (one session per driver). */
const WEBKIT_SEATS = [
  { display: 91, port: 4491 },
  { display: 92, port: 4492 },
];

const skip = skipUnless([...firefoxNeeds(), ...webkitNeeds()]);

test('two Chromium, two Firefox and two WebKit tabs train one model in lock-step to the same weights; the WebKit tabs, without WebRTC, go through the server', async ({ browser, request, baseURL }) => {
  test.skip(skip !== false, String(skip));
  test.setTimeout(600_000);
  const log: string[] = [];
  const students: Student[] = [];
  const others: EngineTab[] = [];
  const drivers: WebKitDriver[] = [];
  let firefox: PuppeteerBrowser | null = null;
  const link = (name: string) => `${baseURL}/?room=${ROOM}&code=${codeFor(ROOM)}&name=${name}`;
  try {
    for (const name of ['chromium-1', 'chromium-2']) students.push(await openStudent(browser, ROOM, name));
    firefox = await launchFirefox();
    for (const name of ['firefox-1', 'firefox-2']) others.push(await firefoxStudent(firefox, link(name), name, (l) => log.push(l)));
    for (const [i, seat] of WEBKIT_SEATS.entries()) {
      const driver = await startWebKitDriver(seat.display, seat.port, (l) => log.push(l));
      drivers.push(driver);
      others.push(await webkitStudent(driver, link(`webkit-${i + 1}`), `webkit-${i + 1}`));
    }
    for (const t of others) await expect.poll(async () => (await t.status()).rank ?? '', { timeout: 120_000, message: `${t.name} joined:\n${log.slice(-20).join('\n')}` }).toMatch(/^\d+$/);

    const { teacherContext } = await startMlpRun(browser, ROOM, 6, STEPS);
    const readAll = async () => [...(await Promise.all(students.map((s) => readStatus(s.page)))), ...(await Promise.all(others.map((t) => t.status())))];
    await expect
      .poll(async () => (await readAll()).map((s) => s.step), { timeout: 480_000, message: `every tab reached step ${STEPS}:\n${log.slice(-20).join('\n')}` })
      .toEqual(Array(6).fill(String(STEPS)));
    const finals = await readAll();
    const names = [...students.map((_, i) => `chromium-${i + 1}`), ...others.map((t) => t.name)];
    console.log(`backends: ${finals.map((f, i) => `${names[i]} ${f.backend}`).join(', ')}`);
    expect(new Set(finals.map((f) => f.weightsHash)).size, JSON.stringify(finals.map((f) => f.weightsHash))).toBe(1);
    for (const f of finals) expect(f.backend).not.toBe('');

    const readRoom = async () => (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
    await expect.poll(async () => (await readRoom()).state, { timeout: 60_000 }).toBe('done');
    const room = await readRoom();
    expect(room.dropped).toEqual([]);
    // A link is relayed exactly when one of its ends is a WebKit tab.
    const idOf = (name: string) => room.members.find((m) => m.name === name)!.id;
    const webkit = new Set(['webkit-1', 'webkit-2'].map(idOf));
    for (const id of webkit) expect(room.relay.members.find((r) => r.id === id)?.peers.length ?? 0).toBeGreaterThan(0);
    for (const r of room.relay.members.filter((x) => !webkit.has(x.id))) for (const p of r.peers) expect(webkit.has(p), `${r.id} relays to ${p}`).toBe(true);
    await teacherContext.close();
  } finally {
    for (const t of others) await t.close().catch((err: unknown) => console.log(`closing ${t.name}: ${String(err)}`));
    await firefox?.close();
    for (const d of drivers) await d.close();
    for (const s of students) await s.context.close();
  }
});
