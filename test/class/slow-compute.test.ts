/**
 * The defaults are the truth: Node workers whose every step computes for longer than the
 * server's default liveness (a ping every 1 s, 4 s to answer it: 5 s in all) stay in the class,
 * because the maths runs in the worker's compute thread and the network thread answers the
 * pings; and a worker that stops answering (SIGSTOP: a frozen process, as a cut network
 * looks to the server) is still gone within the liveness window. The server runs on the
 * product's defaults; nothing is raised.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { lastLines, pollUntil, spawnNodeWorker, type SpawnedWorker } from '../support/processes';
import { startTestServer, codeFor, AS_TEACHER } from '../support/server';
import { DEFAULT_PING_INTERVAL_MS, DEFAULT_PING_TIMEOUT_MS, type RunningServer } from '../../signaling-server/server';
import type { RoomStatus } from '../../shared/protocol';

const ROOM = 'slow-compute';
/** Each gradient computation holds the compute thread this long: past the 5 s liveness window. */
const HOLD_MS = 6_000;
const STEPS = 3;

let server: RunningServer;
const workers: SpawnedWorker[] = [];

function spawnWorker(name: string): void {
  workers.push(spawnNodeWorker(server.url, ROOM, codeFor(ROOM), name, ['--hold-compute-ms', String(HOLD_MS)]));
}

async function room(): Promise<RoomStatus> {
  return (await (await fetch(`${server.url}/api/rooms/${ROOM}`, AS_TEACHER)).json()) as RoomStatus;
}

const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> => pollUntil(what, probe, timeoutMs, () => lastLines(workers, 12), 50);

before(async () => {
  server = await startTestServer();
  for (const name of ['slow-0', 'slow-1', 'slow-2']) spawnWorker(name);
  await waitFor('three workers in the room', async () => (await room()).members.length === 3, 90_000);
});

after(async () => {
  for (const w of workers) {
    w.child.kill('SIGCONT');
    w.child.kill('SIGKILL');
  }
  await server.close();
});

test(`workers whose steps compute ${HOLD_MS / 1000} s each stay in the class on the default liveness; a frozen one is gone within it`, async () => {
  const start = await fetch(`${server.url}/api/rooms/${ROOM}/start`, {
    method: 'POST',
    headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'mlp', maxSteps: STEPS + 3, resumeFrom: 'none' }),
  });
  assert.equal(start.status, 200);
  const trained = await waitFor(`${STEPS} steps`, async () => {
    const r = await room();
    return r.step >= STEPS && r;
  }, 60_000 + STEPS * HOLD_MS * 3);
  // Every step held each worker's compute thread past the liveness window, and nobody was taken for gone.
  assert.equal(trained.members.length, 3, JSON.stringify(trained.events.slice(-5)));
  assert.deepEqual(trained.dropped, []);
  assert.deepEqual(trained.events.filter((e) => e.kind === 'left' || e.kind === 'dropped' || e.kind === 'reformed'), []);
  assert.ok(trained.members.every((m) => m.computeMs >= HOLD_MS), `each step computed at least ${HOLD_MS} ms: ${trained.members.map((m) => m.computeMs)}`);

  // Frozen: no thread of it answers any more. The server's liveness still finds it gone.
  const frozen = workers[2]!;
  const frozenAt = Date.now();
  frozen.child.kill('SIGSTOP');
  await waitFor('the frozen worker gone', async () => !(await room()).members.some((m) => m.name === frozen.name), 15_000);
  const goneMs = Date.now() - frozenAt;
  const windowMs = DEFAULT_PING_INTERVAL_MS + DEFAULT_PING_TIMEOUT_MS;
  console.log(`# the frozen worker was gone ${goneMs} ms after SIGSTOP (liveness ${DEFAULT_PING_INTERVAL_MS} + ${DEFAULT_PING_TIMEOUT_MS} ms, polled every 50 ms)`);
  // The poll and a step's report add a little; a raised liveness would add far more.
  assert.ok(goneMs < windowMs + 2_000, `gone after ${goneMs} ms`);
  // The two others go on training without it.
  const after = (await room()).step;
  await waitFor('a step without the frozen worker', async () => (await room()).step > after, 60_000);
});
