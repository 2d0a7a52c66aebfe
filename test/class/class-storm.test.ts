/**
 * A class of twenty on the product's defaults, as Node workers on loopback: the class walks
 * in while the first few train (a join storm), a device whose links never open joins, one
 * stalls for two seconds (a Wi-Fi hiccup), one freezes and thaws (SIGSTOP, SIGCONT: a phone's locked screen), one is killed. No run may
 * fail; the class keeps training through all of it, in lock-step with agreeing hashes, and
 * the thawed device comes back by itself. Timings are printed for the reader (the lab
 * measures them); only behaviour is asserted.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { lastLines, pollUntil, spawnNodeWorker, type SpawnedWorker } from '../support/processes';
import { startTestServer, codeFor, AS_TEACHER } from '../support/server';
import type { RunningServer } from '../../signaling-server/server';
import type { RoomStatus } from '../../shared/protocol';

const ROOM = 'class-storm';
/** The first students, training before the others arrive. */
const FIRST = 4;
const CLASS = 20;

let server: RunningServer;
const workers: SpawnedWorker[] = [];

function spawnWorker(name: string, extra: string[] = []): SpawnedWorker {
  const w = spawnNodeWorker(server.url, ROOM, codeFor(ROOM), name, extra);
  workers.push(w);
  return w;
}

async function room(): Promise<RoomStatus> {
  return (await (await fetch(`${server.url}/api/rooms/${ROOM}`, AS_TEACHER)).json()) as RoomStatus;
}

const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> =>
  pollUntil(what, probe, timeoutMs, () => lastLines(workers, 8), 100);

/** Every ring member reported the same step, past `after`, with the same weights: the class is in lock-step. */
function inLockStep(r: RoomStatus, size: number, after: number): boolean {
  const steps = new Set(r.members.map((m) => m.step));
  const hashes = new Set(r.members.map((m) => m.weightsHash));
  return r.members.length === size && r.waiting.length === 0 && steps.size === 1 && hashes.size === 1 && r.members[0]!.step > after;
}

/** Nothing ended the run: the same run trains, with no error. */
function assertSameRun(r: RoomStatus): void {
  assert.equal(r.run, 1, `no restart: ${JSON.stringify(r.events.slice(-6))}`);
  assert.equal(r.state, 'training');
  assert.equal(r.lastError, null);
}

before(async () => {
  server = await startTestServer();
  for (let i = 0; i < FIRST; i++) spawnWorker(`first-${i}`);
  await waitFor(`${FIRST} workers in the room`, async () => (await room()).members.length === FIRST, 120_000);
});

after(async () => {
  for (const w of workers) {
    w.child.kill('SIGCONT');
    w.child.kill('SIGKILL');
  }
  await server.close();
});

test(`a join storm: ${CLASS - FIRST} students join a training class of ${FIRST}; nobody's run fails, all are in lock-step`, async () => {
  const start = await fetch(`${server.url}/api/rooms/${ROOM}/start`, {
    method: 'POST',
    headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'mlp', maxSteps: 100_000, resumeFrom: 'none' }),
  });
  assert.equal(start.status, 200);
  await waitFor('the first steps', async () => (await room()).step >= 2, 60_000);
  for (let i = FIRST; i < CLASS; i++) spawnWorker(`joiner-${i}`);
  const all = await waitFor(`all ${CLASS} in the room`, async () => {
    const r = await room();
    return r.members.length + r.waiting.length === CLASS && r;
  }, 240_000);
  const lastJoinAt = Date.now();
  const lastAdmission = () => all.joins.at(-1)?.atStep ?? 0;
  const locked = await waitFor(`all ${CLASS} in lock-step`, async () => {
    const r = await room();
    return inLockStep(r, CLASS, lastAdmission()) && r;
  }, 180_000);
  console.log(`# ${CLASS} in lock-step ${Date.now() - lastJoinAt} ms after the last join, at step ${locked.step}; ${locked.joins.length} admission(s): ${locked.joins.map((j) => j.joiners.length).join(' + ')} joiners`);
  assertSameRun(locked);
  assert.deepEqual(locked.dropped, [], 'nobody was dropped');
  assert.deepEqual(locked.events.filter((e) => e.kind === 'left' || e.kind === 'dropped'), []);
  // Batched: students who arrived while an admission formed came in with the next one.
  assert.ok(locked.joins.length < CLASS - FIRST, `${locked.joins.length} admissions for ${CLASS - FIRST} joiners`);
  assert.equal(locked.joins.flatMap((j) => j.joiners).length, CLASS - FIRST);
});

test('a joiner whose links never open is shed as unreachable, named and with a reason; the class never stops', async (t) => {
  const before = await room();
  const isolated = spawnWorker('isolated', ['--peer-links', 'silent']);
  // Gone whatever happens here, so that the next test's class has no one rejoining and being shed.
  t.after(() => void isolated.child.kill('SIGKILL'));
  const shed = await waitFor('the isolated worker shed', async () => {
    const r = await room();
    return r.dropped.some((d) => d.name === isolated.name) && r;
  }, 120_000);
  const drop = shed.dropped.find((d) => d.name === isolated.name)!;
  assert.equal(drop.reason, 'unreachable');
  assert.match(drop.detail, /could not reach it/);
  assertSameRun(shed);
  assert.deepEqual(shed.dropped.map((d) => d.name), [isolated.name], 'only the unreachable worker went');
  // Its line comes over its own pipe, a moment after the room's status says it was shed.
  await waitFor('its own page says why', async () => isolated.output.some((l) => /links to its classmates would not open/.test(l)), 15_000);
  // It joins again by itself, and is shed again: the class is never held up by it.
  await waitFor('it tries again by itself, and is shed again', async () => (await room()).dropped.filter((d) => d.name === isolated.name).length >= 2, 60_000);
  assert.ok(isolated.output.some((l) => /joining again in \d+ ms/.test(l)));
  isolated.child.kill('SIGKILL');
  const trained = await waitFor('the class in lock-step without it', async () => {
    const r = await room();
    return inLockStep(r, CLASS, Math.max(before.step, shed.step)) && r;
  }, 120_000);
  assertSameRun(trained);
});

test('a two-second hiccup drops nobody: the class waits for the device and goes on', async () => {
  const hiccup = workers.find((w) => w.name === `joiner-${FIRST + 1}`)!;
  const before = await room();
  hiccup.child.kill('SIGSTOP');
  await new Promise((r) => setTimeout(r, 2_000));
  hiccup.child.kill('SIGCONT');
  const on = await waitFor('the class in lock-step after the hiccup', async () => {
    const r = await room();
    return inLockStep(r, CLASS, before.step + 1) && r;
  }, 60_000);
  assertSameRun(on);
  assert.equal(on.dropped.length, before.dropped.length, 'nobody dropped');
  const since = before.events.at(-1)?.at ?? 0;
  assert.deepEqual(on.events.filter((e) => e.at > since && (e.kind === 'left' || e.kind === 'dropped')), [], 'nobody left');
});

test('a frozen device is dropped and, thawed, rejoins by itself; a killed one is gone and the class steps on', async () => {
  const frozen = workers.find((w) => w.name === `joiner-${FIRST + 2}`)!;
  frozen.child.kill('SIGSTOP');
  const without = await waitFor('the frozen worker out of the ring', async () => {
    const r = await room();
    return !r.members.some((m) => m.name === frozen.name) && r;
  }, 30_000);
  await waitFor('a step without it', async () => (await room()).step > without.step, 60_000);
  const thawedAt = Date.now();
  frozen.child.kill('SIGCONT');
  const back = await waitFor('the thawed worker back in lock-step', async () => {
    const r = await room();
    return r.members.some((m) => m.name === frozen.name) && inLockStep(r, CLASS, without.step) && r;
  }, 120_000);
  console.log(`# thawed worker back in lock-step ${Date.now() - thawedAt} ms after SIGCONT`);
  assertSameRun(back);

  const killed = workers.find((w) => w.name === `joiner-${FIRST + 5}`)!;
  const killedAt = Date.now();
  const stepBefore = (await room()).step;
  killed.child.kill('SIGKILL');
  const after = await waitFor('a step without the killed worker', async () => {
    const r = await room();
    return !r.members.some((m) => m.name === killed.name) && r.step > stepBefore + 1 && r;
  }, 60_000);
  console.log(`# a step without the killed worker ${Date.now() - killedAt} ms after kill -9`);
  assertSameRun(after);
  await waitFor('the class in lock-step', async () => inLockStep(await room(), CLASS - 1, after.step), 60_000);
});
