/**
 * The hub collective between real tabs: the hub (node-worker/hub.ts, as `npm start -- --hub`
 * runs it, with the room's hub key in HUB_KEY) joins the room, three tabs train with
 * allreduce 'hub' over real data channels to it, stay bit-identical, and the teacher page
 * says the hub sums and sees each gradient; the students' pages say a hub sums. A second tab
 * that tries to become the hub (the class's join code, no hub key) is refused, and training
 * goes on with the real hub. The teacher removes the hub from the page: the class trains on
 * the ring and both pages say there is no hub; let in again, the waiting hub comes back by
 * itself. Then the hub is killed: the class goes on, on the ring, from the same weights.
 */
import { test, expect, type APIRequestContext, type Page } from '@playwright/test';
import { spawn, type ChildProcess } from 'node:child_process';
import { E2E_TOKEN } from '../../playwright.config';
import type { RoomStatus } from '../../shared/protocol';
import { asTeacher, codeFor, hubKeyOf, openStudent, readStatus, type Student } from './helpers';

const ROOM = 'e2e-hub';

function startHub(baseURL: string): { child: ChildProcess; output: string[] } {
  const output: string[] = [];
  const child = spawn(process.execPath, ['--import', 'tsx', 'node-worker/hub.ts', '--url', baseURL, '--room', ROOM, '--name', 'teacher-hub'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, JOIN_CODE: codeFor(ROOM), HUB_KEY: hubKeyOf(ROOM) },
  });
  for (const stream of [child.stdout!, child.stderr!]) stream.on('data', (d: Buffer) => output.push(...d.toString().split('\n').filter(Boolean)));
  return { child, output };
}

async function room(request: APIRequestContext): Promise<RoomStatus> {
  return (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
}

/** The tabs' weights hashes at one and the same step. */
async function hashesTogether(students: Student[]): Promise<{ step: number; hashes: string[] }> {
  for (let attempt = 0; attempt < 400; attempt++) {
    const s = await Promise.all(students.map((t) => readStatus(t.page)));
    if (s.every((x) => x.step === s[0]!.step && Number(x.step) > 0 && x.state === 'training')) return { step: Number(s[0]!.step), hashes: s.map((x) => x.weightsHash!) };
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('the tabs never showed the same step at once');
}

/**
 * What a student could do from the devtools of a tab on the class page: open its own
 * socket.io connection with the class's join code (engine.io v4 framing over a raw
 * WebSocket) and ask to join as the hub, without a key and with a made-up one. The acks.
 */
async function joinAsHubFromTab(page: Page): Promise<Array<{ ok: boolean; error?: { code: string } }>> {
  return page.evaluate(
    async ({ room, code }) => {
      const ws = new WebSocket(`${location.origin.replace(/^http/, 'ws')}/socket.io/?EIO=4&transport=websocket`);
      const keys: Array<string | undefined> = [undefined, 'f'.repeat(64)];
      const answers: Array<{ ok: boolean; error?: { code: string } }> = [];
      return new Promise<typeof answers>((resolve, reject) => {
        const ask = () => {
          const key = keys[answers.length];
          ws.send(`42${answers.length}${JSON.stringify(['room:join', { room, name: 'not-the-hub', kind: 'hub', backend: 'cpu', ...(key ? { hubKey: key } : {}) }])}`);
        };
        ws.onmessage = (e) => {
          const m = String(e.data);
          if (m === '2') ws.send('3'); // engine.io ping: answered, or the server closes the socket
          else if (m.startsWith('0')) ws.send(`40${JSON.stringify({ room, code })}`);
          else if (m.startsWith('40')) ask();
          else if (m.startsWith('44')) reject(new Error(`handshake refused: ${m}`));
          else if (m.startsWith('43')) {
            answers.push((JSON.parse(m.slice(m.indexOf('['))) as Array<(typeof answers)[number]>)[0]!);
            if (answers.length < keys.length) ask();
            else {
              ws.close();
              resolve(answers);
            }
          }
        };
        ws.onerror = () => reject(new Error('the websocket failed'));
      });
    },
    { room: ROOM, code: codeFor(ROOM) },
  );
}

test('three tabs sum their gradients at the hub, bit-identical, and fall back to the ring when the hub dies', async ({ browser, request, baseURL }) => {
  const hub = startHub(baseURL!);
  const students: Student[] = [];
  try {
    await expect.poll(async () => (await room(request)).hub?.name, { timeout: 60_000 }).toBe('teacher-hub');
    for (const name of ['ivy', 'jon', 'kai']) students.push(await openStudent(browser, ROOM, name, '&backend=cpu'));
    const before = await room(request);
    expect(before.members.map((m) => m.name)).toEqual(['ivy', 'jon', 'kai']);
    expect(before.hub).toMatchObject({ name: 'teacher-hub', kind: 'hub', rank: null });
    expect(before.chief).toBe(before.members[0]!.id);

    const start = await request.post(`/api/rooms/${ROOM}/start`, { ...asTeacher, data: { model: 'mlp', maxSteps: 100_000, resumeFrom: 'none', allreduce: 'hub', wire: 'fp16' } });
    expect(start.status()).toBe(200);
    // The first steps run on the ring until every tab's link to the hub is agreed open.
    await expect.poll(async () => (await room(request)).members[0]?.collective?.algorithm, { timeout: 90_000 }).toBe('hub');
    const onHub = await hashesTogether(students);
    expect(new Set(onHub.hashes).size, `hashes at step ${onHub.step}: ${onHub.hashes}`).toBe(1);
    await expect.poll(() => hub.output.join('\n'), { timeout: 10_000 }).toMatch(/summing for 3 worker\(s\)/);

    const teacherContext = await browser.newContext();
    const teacher = await teacherContext.newPage();
    await teacher.goto(`/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
    await expect(teacher.getByTestId('collective-summary')).toHaveAttribute('data-algorithm', 'hub', { timeout: 30_000 });
    await expect(teacher.getByTestId('hub-privacy')).toContainText('sees each student');
    await expect(teacher.getByTestId('collective-reason')).toContainText(/config/);
    await expect(teacher.getByTestId('hub-member')).toContainText('teacher-hub');
    for (const s of students) {
      await expect(s.page.getByTestId('hub-note')).toHaveAttribute('data-hub', 'yes');
      await expect(s.page.getByTestId('hub-note')).toContainText(/A hub on the teacher's computer \(teacher-hub\) sums the class's gradients/);
    }

    // A second tab tries to become the hub with the class's join code: refused, and the real hub stays.
    const realHub = (await room(request)).hub!.id;
    const attackerContext = await browser.newContext();
    const attacker = await attackerContext.newPage();
    await attacker.goto(`/?room=${ROOM}&code=${codeFor(ROOM)}`);
    const refusals = await joinAsHubFromTab(attacker);
    expect(refusals.map((r) => (r.ok ? 'accepted' : r.error?.code))).toEqual(['ERR_HUB_NOT_AUTHORIZED', 'ERR_HUB_NOT_AUTHORIZED']);
    await attackerContext.close();
    const afterAttack = await hashesTogether(students);
    expect(afterAttack.step).toBeGreaterThan(onHub.step);
    expect(new Set(afterAttack.hashes).size, `hashes at step ${afterAttack.step}: ${afterAttack.hashes}`).toBe(1);
    const still = await room(request);
    expect([still.hub?.id, still.state, still.members[0]!.collective?.algorithm]).toEqual([realHub, 'training', 'hub']);

    // The teacher removes the hub from the page: the class trains on the ring without it, and says so.
    await teacher.getByTestId('hub-remove').click();
    await expect(teacher.getByTestId('hub-member')).toHaveAttribute('data-state', 'removed-by-teacher');
    await expect(teacher.getByTestId('hub-member')).toContainText('the class runs without a hub');
    await expect(students[0]!.page.getByTestId('hub-note')).toHaveAttribute('data-hub', 'no');
    await expect(students[0]!.page.getByTestId('hub-note')).toContainText('No hub: the class\'s gradients are summed around the ring');
    await expect.poll(() => hub.output.join('\n'), { timeout: 30_000 }).toMatch(/ERR_HUB_REMOVED/);
    expect((await room(request)).hub).toBeNull();
    const removedAt = Number((await readStatus(students[0]!.page)).step);
    await expect.poll(async () => (await room(request)).members.every((m) => m.step > removedAt + 2), { timeout: 60_000 }).toBe(true);
    expect((await room(request)).state).toBe('training');

    // Let in again, the waiting hub comes back by itself (within its back-off).
    await teacher.getByTestId('hub-allow').click();
    await expect.poll(async () => (await room(request)).hub?.name, { timeout: 45_000 }).toBe('teacher-hub');
    await expect(students[0]!.page.getByTestId('hub-note')).toHaveAttribute('data-hub', 'yes');
    await expect(teacher.getByTestId('hub-remove')).toBeVisible();

    // The hub dies without a goodbye: the class re-forms without it and trains on the ring.
    const killedAt = Math.max(...(await Promise.all(students.map(async (s) => Number((await readStatus(s.page)).step)))));
    hub.child.kill('SIGKILL');
    await expect.poll(async () => (await room(request)).hub, { timeout: 30_000 }).toBeNull();
    await expect
      .poll(async () => {
        const r = await room(request);
        return r.members.every((m) => m.step > killedAt + 2) && r.members[0]!.collective?.algorithm === 'ring';
      }, { timeout: 60_000 })
      .toBe(true);
    const onRing = await hashesTogether(students);
    expect(new Set(onRing.hashes).size, `hashes at step ${onRing.step}: ${onRing.hashes}`).toBe(1);
    expect((await room(request)).state).toBe('training');
    await expect(students[0]!.page.getByTestId('hub-note')).toHaveAttribute('data-hub', 'no');
    await expect(teacher.getByTestId('collective-reason')).toContainText(/not open on every worker/, { timeout: 30_000 });

    expect((await request.post(`/api/rooms/${ROOM}/stop`, asTeacher)).status()).toBe(200);
    expect(students.flatMap((s) => s.errors)).toEqual([]);
    await teacherContext.close();
  } finally {
    hub.child.kill('SIGKILL');
    for (const s of students) await s.context.close();
  }
});
