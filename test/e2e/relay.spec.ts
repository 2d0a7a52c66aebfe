/**
 * School Wi-Fi with client isolation, in tabs: an init script lets every tab's
 * RTCPeerConnection gather no candidate (the relay-only ICE policy with no TURN server), so
 * no direct link between them ever opens. Each link falls back to the teacher's server
 * (shared/network/relay-link.ts), the three tabs train one model in lock-step to identical
 * weights, and the teacher page marks every one of them "via server", with why.
 */
import { test, expect } from '@playwright/test';
import type { RoomStatus } from '../../shared/protocol';
import { asTeacher, openStudent, readStatus, status, type Student, isolateWebRtc, startMlpRun } from './helpers';

const ROOM = 'e2e-relay';
const STEPS = 10;

test('tabs that can open no WebRTC link train through the server in lock-step, and the teacher page marks them', async ({ browser, request }) => {
  const students: Student[] = [];
  for (const name of ['iso', 'jun', 'kai']) students.push(await openStudent(browser, ROOM, name, '', '', { initScript: isolateWebRtc }));

  const { teacher, teacherContext } = await startMlpRun(browser, ROOM, 3, STEPS);

  // While they train, the teacher sees every device marked, and the summary says why.
  await expect(teacher.getByTestId('relayed')).toHaveCount(3, { timeout: 120_000 });
  await expect(teacher.getByTestId('relayed').first()).toHaveAttribute('title', /client isolation/);
  await expect(teacher.locator('#members-summary')).toContainText(/3 reach classmates through this server/);

  for (const s of students) await expect(status(s.page)).toHaveAttribute('data-step', String(STEPS), { timeout: 180_000 });
  const finals = await Promise.all(students.map((s) => readStatus(s.page)));
  expect(new Set(finals.map((f) => f.weightsHash)).size, JSON.stringify(finals.map((f) => f.weightsHash))).toBe(1);
  const readRoom = async () => (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
  await expect.poll(async () => (await readRoom()).state, { timeout: 60_000 }).toBe('done');
  const room = await readRoom();
  expect(room.dropped).toEqual([]);
  expect(room.run, 'one run, never restarted').toBe(1);
  expect(room.relay.members.map((m) => m.id).sort()).toEqual(room.members.map((m) => m.id).sort());
  for (const s of students) expect(s.errors).toEqual([]);
  await teacherContext.close();
  for (const s of students) await s.context.close();
});
