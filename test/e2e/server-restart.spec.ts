/**
 * The server dies (kill -9) mid-training and comes back on the same port and DATA_DIR:
 * the tabs reconnect by themselves, keep their membership, and no tab ever goes back
 * below the last checkpoint; the checkpoints on disk survive.
 */
import { test, expect } from '@playwright/test';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CheckpointInfo } from '../../shared/checkpoints/checkpoint';
import type { RoomStatus } from '../../shared/protocol';
import { E2E_JOIN_SECRET } from '../../playwright.config';
import { openStudent, readStatus, status } from './helpers';

const PORT = 18_090;
const ORIGIN = `http://127.0.0.1:${PORT}`;
const TOKEN = 'restart-teacher-token';
const ROOM = 'e2e-restart';
const STEPS = 70;

async function startServer(dataDir: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'signaling-server/main.ts'], {
    env: { ...process.env, PORT: String(PORT), HOST: '127.0.0.1', DATA_DIR: dataDir, TEACHER_TOKEN: TOKEN, JOIN_SECRET: E2E_JOIN_SECRET, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${ORIGIN}/healthz`)).ok) return child;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error('server did not start');
}

const api = async <T>(p: string): Promise<T> => (await (await fetch(`${ORIGIN}${p}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as T;

test('kill -9 of the server mid-training: tabs reconnect, keep going, never fall below the last checkpoint', async ({ browser }) => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'webring-restart-'));
  let server = await startServer(dataDir);
  try {
    const students = [await openStudent(browser, ROOM, 'ria', '', ORIGIN), await openStudent(browser, ROOM, 'sol', '', ORIGIN)];
    const start = await fetch(`${ORIGIN}/api/rooms/${ROOM}/start`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mlp', saveEverySteps: 10, maxSteps: STEPS }),
    });
    expect(start.status).toBe(200);
    await expect.poll(async () => (await api<CheckpointInfo[]>(`/api/rooms/${ROOM}/checkpoints`))[0]?.step ?? 0, { timeout: 120_000 }).toBeGreaterThanOrEqual(10);
    const beforeKill = await api<CheckpointInfo[]>(`/api/rooms/${ROOM}/checkpoints`);
    const lastCheckpoint = beforeKill[0]!.step;

    server.kill('SIGKILL');
    await new Promise((r) => server.once('exit', r));
    // Watch every tab's step while the server is away and after it is back.
    let lowest = Number.POSITIVE_INFINITY;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        for (const s of students) lowest = Math.min(lowest, Number((await readStatus(s.page)).step));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    await expect(status(students[0]!.page)).toHaveAttribute('data-connected', 'false');
    server = await startServer(dataDir);

    const afterRestart = await api<CheckpointInfo[]>(`/api/rooms/${ROOM}/checkpoints`);
    expect(afterRestart[0]!.step).toBeGreaterThanOrEqual(lastCheckpoint);
    expect(afterRestart.map((c) => c.id)).toContain(beforeKill[0]!.id);

    for (const s of students) {
      await expect(status(s.page)).toHaveAttribute('data-connected', 'true', { timeout: 30_000 });
      await expect(status(s.page)).toHaveAttribute('data-state', 'done', { timeout: 120_000 });
      await expect(status(s.page)).toHaveAttribute('data-step', String(STEPS));
    }
    watching = false;
    await watcher;
    expect(lowest, `lowest step seen after the kill: ${lowest}`).toBeGreaterThanOrEqual(lastCheckpoint);

    const finals = await Promise.all(students.map((s) => readStatus(s.page)));
    expect(new Set(finals.map((f) => f.weightsHash)).size).toBe(1);
    // The restarted server knows the same members and saw the run to its end.
    const room = await api<RoomStatus>(`/api/rooms/${ROOM}`);
    expect(room.members.map((m) => m.id).sort()).toEqual(finals.map((f) => f.memberId).sort());
    expect(room.state).toBe('done');
    expect(room.step).toBe(STEPS);
    const final = await api<CheckpointInfo[]>(`/api/rooms/${ROOM}/checkpoints`);
    expect(final[0]!.step).toBe(STEPS);

    // A new server with an empty DATA_DIR on the same laptop (same origin, same IndexedDB):
    // the chief's tab joins it afresh and uploads nothing. The server stores checkpoints only
    // during a run, up to the step the class reported (issue 25: an upload with no run could
    // be any model at any step), so the class starts again at step 0.
    const chief = students.find((_, i) => finals[i]!.chief === 'true')!;
    await students.find((s) => s !== chief)!.context.close();
    server.kill('SIGKILL');
    await new Promise((r) => server.once('exit', r));
    server = await startServer(mkdtempSync(path.join(os.tmpdir(), 'webring-fresh-')));
    await expect.poll(async () => (await api<RoomStatus>(`/api/rooms/${ROOM}`)).members.length, { timeout: 30_000 }).toBe(1);
    expect(await api<CheckpointInfo[]>(`/api/rooms/${ROOM}/checkpoints`)).toEqual([]);
    const fresh = await fetch(`${ORIGIN}/api/rooms/${ROOM}/start`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mlp', saveEverySteps: 10, maxSteps: 2 }),
    });
    expect(fresh.status).toBe(200);
    await expect(status(chief.page)).toHaveAttribute('data-step', '2', { timeout: 30_000 });
    await expect.poll(async () => (await api<CheckpointInfo[]>(`/api/rooms/${ROOM}/checkpoints`)).map((c) => c.step), { timeout: 30_000 }).toEqual([2]);
    await chief.context.close();
  } finally {
    server.kill('SIGKILL');
  }
});
