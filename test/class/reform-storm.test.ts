/**
 * Issue 57, defect 2, with a real server and real Node workers: a class trains a secure
 * local-steps run while one of its members, a real worker that trains like the others, also
 * asks the server to re-form the ring every 2 s (test/support/reform-storm.mjs). Before, each
 * request made a new generation, every generation that is not an admission aborts the turn in
 * flight, and a secure round skipped that way is never summed: the class never finished a
 * round. Now one member's request is only a vote, so the class trains to its last step, and
 * nobody honest is evicted (the stormer is, once past its cap, if the run lasts that long).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { startTestServer, codeFor } from '../support/server';
import { classRoom } from '../support/class-room';
import { lastLines, type SpawnedWorker } from '../support/processes';
import type { RunningServer } from '../../signaling-server/server';

const ROOM = 'reform-storm';
/**
 * Steps per round, and the run's last step: four rounds, each longer than the 2 s a
 * generation must live before a request may re-form it. The full training set (over 600
 * steps an epoch) so that no epoch's end cuts a round short or ends the run first.
 */
const LOCAL_STEPS = 50;
const MAX_STEPS = 4 * LOCAL_STEPS;
/** Generous: a loaded 2-core machine trains these four rounds in about a minute at most. */
const RUN_TIMEOUT_MS = 180_000;

let server: RunningServer;
const klass = classRoom(() => server, ROOM);

before(async () => {
  server = await startTestServer();
});
after(async () => {
  for (const w of klass.workers) w.child.kill('SIGKILL');
  await server.close();
});

/** A real Node worker that also storms (reform-storm.mjs, loaded before the worker's own code). */
function spawnStormer(name: string): SpawnedWorker {
  const args = ['--import', 'tsx', '--import', './test/support/reform-storm.mjs', 'node-worker/main.ts', '--url', server.url, '--room', ROOM, '--code', codeFor(ROOM), '--name', name, '--backend', 'cpu'];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  for (const stream of [child.stdout, child.stderr]) stream.on('data', (d: Buffer) => output.push(...d.toString().split('\n').filter(Boolean)));
  const worker = { name, child, output };
  klass.workers.push(worker);
  return worker;
}

test('a member asking for a re-form every 2 s: the class still trains its secure local-steps run to the end, and nobody honest is evicted', { timeout: RUN_TIMEOUT_MS + 150_000 }, async (ctx) => {
  klass.spawn('honest-0');
  klass.spawn('honest-1');
  await klass.waitFor('two workers', async () => (await klass.status()).members.length === 2, 120_000);
  const stormer = spawnStormer('stormer-2');
  const ready = await klass.waitFor('three workers', async () => {
    const s = await klass.status();
    return s.members.length === 3 && s;
  }, 120_000);
  assert.equal(await klass.teacher('start', { model: 'mlp', dataset: 'mnist-60k', sync: 'local-steps', localSteps: LOCAL_STEPS, secureAggregation: true, maxSteps: MAX_STEPS, resumeFrom: 'none' }), 200);
  const t0 = Date.now();
  const storms = () => stormer.output.filter((l) => l.startsWith('reform-storm:')).length;
  const stormsAtStart = storms();
  const done = await klass.waitFor('the run to finish', async () => {
    const s = await klass.status();
    return (s.state === 'done' || s.state === 'idle') && s.run > ready.run && s;
  }, RUN_TIMEOUT_MS);
  const seconds = (Date.now() - t0) / 1000;
  const asked = storms() - stormsAtStart;
  ctx.diagnostic(`${done.step} steps in ${seconds.toFixed(1)} s under ${asked} re-form requests; generation ${ready.generation} -> ${done.generation}; dropped: ${JSON.stringify(done.dropped.map((m) => [m.name, m.misbehaviour]))}`);
  assert.equal(done.lastError, null, lastLines(klass.workers, 10));
  assert.equal(done.step, MAX_STEPS, 'the class trained to its last step');
  assert.ok(asked >= Math.floor(seconds / 2) - 2, `the storm went on all run (${asked} requests in ${seconds.toFixed(1)} s)`);
  const honest = klass.workers.filter((w) => w !== stormer).map((w) => w.name);
  assert.deepEqual(done.dropped.filter((m) => honest.includes(m.name)), [], 'nobody honest was evicted or dropped');
  for (const name of honest) assert.ok(done.members.some((m) => m.name === name), `${name} is still in the ring`);
  // A re-form the storm did not make: the only generations are the stormer's eviction, if the run outlasted its cap.
  const reformed = done.events.filter((e) => e.kind === 'reformed' && e.at >= t0);
  assert.deepEqual(reformed, [], 'no re-form on one member\'s word');
});
