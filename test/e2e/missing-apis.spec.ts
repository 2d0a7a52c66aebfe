/**
 * Browsers that lack an API the class uses (issue 58). WebKitGTK is built without
 * RTCPeerConnection and a managed browser's policy may remove it; plain http hides
 * crypto.subtle. Here Chromium tabs have them taken away by an init script, before any page
 * code runs: the student page says what the device cannot do before Join, the tab without
 * WebRTC joins (it used to end in "Can't find variable: RTCPeerConnection", ERR_INTERNAL) and
 * trains through the server, and all three tabs end with the same weights.
 */
import { test, expect, type Page } from '@playwright/test';
import type { RoomStatus } from '../../shared/protocol';
import { asTeacher, openStudent, readStatus, startMlpRun, status, type Student } from './helpers';

const ROOM = 'e2e-missing-apis';
const STEPS = 10;

/** A browser built without WebRTC: no RTCPeerConnection under any name. Self-contained: Playwright runs it in the page. */
function removeWebRtc(): void {
  for (const name of ['RTCPeerConnection', 'webkitRTCPeerConnection', 'RTCDataChannel']) delete (window as unknown as Record<string, unknown>)[name];
}

/** A page where crypto.subtle is missing, as on plain http from a LAN address. */
function removeSubtleCrypto(): void {
  Object.defineProperty(Crypto.prototype, 'subtle', { get: () => undefined, configurable: true });
}

/** The student page's list of abilities, checked before Join. */
const ability = (page: Page, key: string) => page.getByTestId('abilities').locator(`li[data-ability=${key}]`);

test('a tab without RTCPeerConnection joins and trains through the server, a tab without crypto.subtle is told it cannot take part in secure runs, and the page says so before Join', async ({ browser, request }) => {
  const students: Student[] = [];
  students.push(
    await openStudent(browser, ROOM, 'full', '', '', {
      beforeJoin: async (page) => {
        await expect(page.getByTestId('abilities')).toBeVisible();
        await expect(page.getByTestId('abilities').locator('li[data-ok=false]')).toHaveCount(0);
      },
    }),
  );
  students.push(
    await openStudent(browser, ROOM, 'nortc', '', '', {
      initScript: removeWebRtc,
      beforeJoin: async (page) => {
        await expect(ability(page, 'webrtc')).toHaveAttribute('data-ok', 'false');
        await expect(ability(page, 'webrtc')).toContainText('goes through the teacher’s computer');
        // The list opens by itself: the student sees it without looking for it.
        await expect(page.getByTestId('abilities')).toHaveAttribute('open', '');
      },
    }),
  );
  students.push(
    await openStudent(browser, ROOM, 'nokeys', '', '', {
      initScript: removeSubtleCrypto,
      beforeJoin: async (page) => {
        await expect(ability(page, 'secureKeys')).toHaveAttribute('data-ok', 'false');
        await expect(ability(page, 'secureKeys')).toContainText('cannot take part');
        await expect(ability(page, 'webrtc')).toHaveAttribute('data-ok', 'true');
      },
    }),
  );

  const { teacherContext } = await startMlpRun(browser, ROOM, 3, STEPS);

  // Both of the tab's links go through the server; the other two keep their direct one.
  const readRoom = async () => (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
  await expect
    .poll(async () => {
      const room = await readRoom();
      const nortc = room.members.find((m) => m.name === 'nortc');
      return room.relay.members.find((r) => r.id === nortc?.id)?.peers.length ?? 0;
    }, { timeout: 120_000 })
    .toBe(2);

  for (const s of students) await expect(status(s.page)).toHaveAttribute('data-step', String(STEPS), { timeout: 180_000 });
  const finals = await Promise.all(students.map((s) => readStatus(s.page)));
  expect(new Set(finals.map((f) => f.weightsHash)).size, JSON.stringify(finals.map((f) => f.weightsHash))).toBe(1);
  await expect.poll(async () => (await readRoom()).state, { timeout: 60_000 }).toBe('done');
  const room = await readRoom();
  expect(room.dropped).toEqual([]);
  // Only the links of the tab without WebRTC went through the server.
  const nortc = room.members.find((m) => m.name === 'nortc')!.id;
  for (const r of room.relay.members.filter((x) => x.id !== nortc)) expect(r.peers).toEqual([nortc]);
  for (const s of students) expect(s.errors, s.errors.join('\n')).toEqual([]);
  for (const s of students) await s.context.close();
  await teacherContext.close();
});
