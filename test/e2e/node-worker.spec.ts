/**
 * A headless Node worker in the same ring as browser tabs (the Node half of the hybrid):
 * it trains to the same weights, is chief while it has the lowest index, crashes without
 * stopping the class, and a new one joins mid-run with the live state.
 */
import { test, expect, type APIRequestContext } from '@playwright/test';
import { spawn, type ChildProcess } from 'node:child_process';
import { E2E_TOKEN } from '../../playwright.config';
import type { CheckpointInfo } from '../../shared/checkpoints/checkpoint';
import type { RoomStatus } from '../../shared/protocol';
import { asTeacher, codeFor, openStudent, readStatus, status, type Student } from './helpers';

const ROOM = 'e2e-node';
const teacher = { authorization: `Bearer ${E2E_TOKEN}` };

function startNodeWorker(baseURL: string, name: string): { child: ChildProcess; output: string[] } {
  const output: string[] = [];
  const child = spawn(process.execPath, ['--import', 'tsx', 'node-worker/main.ts', '--url', baseURL, '--room', ROOM, '--code', codeFor(ROOM), '--name', name, '--backend', 'cpu'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  for (const stream of [child.stdout!, child.stderr!]) stream.on('data', (d: Buffer) => output.push(...d.toString().split('\n').filter(Boolean)));
  return { child, output };
}

async function room(request: APIRequestContext): Promise<RoomStatus> {
  return (await (await request.get(`/api/rooms/${ROOM}`, asTeacher)).json()) as RoomStatus;
}

/** The members' reported weights hashes at one and the same step. */
async function hashesAtOneStep(request: APIRequestContext, n: number): Promise<{ step: number; hashes: Array<string | null> }> {
  for (let attempt = 0; attempt < 300; attempt++) {
    const members = (await room(request)).members;
    if (members.length === n && members.every((m) => m.step === members[0]!.step && m.step > 0)) {
      return { step: members[0]!.step, hashes: members.map((m) => m.weightsHash) };
    }
    await new Promise((r) => setTimeout(r, 30));
  }
  throw new Error('the members never reported the same step at once');
}

// The gradients cross the data channels as fp16 here: the replicas must still be bit-identical.
test('a Node worker trains with two tabs to identical weights, is chief, crashes, and another joins mid-run', async ({ browser, request, baseURL }) => {
  const workers = [startNodeWorker(baseURL!, 'lab-pc')];
  try {
    await expect.poll(async () => (await room(request)).members.length, { timeout: 60_000 }).toBe(1);
    const tabs: Student[] = [];
    for (const name of ['kim', 'lou']) tabs.push(await openStudent(browser, ROOM, name, '&backend=cpu'));
    const before = await room(request);
    expect(before.members.map((m) => [m.name, m.kind, m.backend])).toEqual([['lab-pc', 'node', 'cpu'], ['kim', 'browser', 'cpu'], ['lou', 'browser', 'cpu']]);
    const nodeId = before.members[0]!.id;
    expect(before.chief).toBe(nodeId);

    const start = await request.post(`/api/rooms/${ROOM}/start`, { headers: teacher, data: { model: 'mlp', maxSteps: 400, saveEverySteps: 5, resumeFrom: 'none', wire: 'fp16' } });
    expect(start.status()).toBe(200);
    await expect.poll(async () => Number((await readStatus(tabs[0]!.page)).step), { timeout: 60_000 }).toBeGreaterThanOrEqual(8);
    const together = await hashesAtOneStep(request, 3);
    expect(new Set(together.hashes).size, `hashes at step ${together.step}: ${together.hashes}`).toBe(1);
    // The Node chief writes the checkpoints.
    await expect.poll(async () => ((await (await request.get(`/api/rooms/${ROOM}/checkpoints`, asTeacher)).json()) as CheckpointInfo[])[0]?.writer, { timeout: 30_000 }).toBe(nodeId);

    // The Node worker crashes (kill -9): the tabs go on without it, kim now chief.
    const crashedAt = Number((await readStatus(tabs[0]!.page)).step);
    workers[0]!.child.kill('SIGKILL');
    await expect
      .poll(async () => (await Promise.all(tabs.map((t) => readStatus(t.page)))).every((s) => s.worldSize === '2' && Number(s.step) > crashedAt + 1), { timeout: 10_000 })
      .toBe(true);
    await expect(status(tabs[0]!.page)).toHaveAttribute('data-chief', 'true');

    // A second Node worker joins mid-run and takes the live state.
    workers.push(startNodeWorker(baseURL!, 'lab-pc-2'));
    await expect.poll(async () => (await room(request)).members.map((m) => m.kind), { timeout: 60_000 }).toEqual(['browser', 'browser', 'node']);
    await expect.poll(async () => (await Promise.all(tabs.map((t) => readStatus(t.page)))).every((s) => s.worldSize === '3'), { timeout: 30_000 }).toBe(true);
    const joined = await hashesAtOneStep(request, 3);
    expect(new Set(joined.hashes).size, `hashes at step ${joined.step}: ${joined.hashes}`).toBe(1);
    expect(workers[1]!.output.join('\n')).toMatch(/the chief's state to \d+ replica|replicas already agree/);

    expect((await request.post(`/api/rooms/${ROOM}/stop`, { headers: teacher })).status()).toBe(200);
    for (const t of tabs) await expect(status(t.page)).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
    expect(tabs.flatMap((t) => t.errors)).toEqual([]);
    for (const t of tabs) await t.context.close();
  } finally {
    for (const w of workers) w.child.kill('SIGKILL');
  }
});
