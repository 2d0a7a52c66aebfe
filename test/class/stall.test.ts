/**
 * A class that cannot go on, through the real server (its stall floor shortened to 10 s) and
 * real Node workers: one worker's maths holds its compute thread for 60 s at every step (a
 * device whose GPU read-back never answers, as near as a test gets), so the class sits still.
 * The server ends the run with ERR_RUN_STALLED; the two others stop at once; the held device,
 * which cannot stop its run, leaves the room within STALLED_UNWIND_MS and says why; and the
 * teacher's Start trains on without it, to the end.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer } from '../support/server';
import { classRoom } from '../support/class-room';
import { lastLines } from '../support/processes';
import { STALLED_UNWIND_MS } from '../../shared/training/run-stop';
import type { RunningServer } from '../../signaling-server/server';

/** Short, yet long enough for a healthy class's first step on a loaded machine (3 s was not, in CI). */
const FLOOR_MS = 10_000;
let server: RunningServer;
const klass = classRoom(() => server, 'stall');

before(async () => {
  server = await startTestServer({ stallFloorMs: FLOOR_MS });
});
after(async () => {
  for (const w of klass.workers) w.child.kill('SIGKILL');
  await server.close();
});

test('a device whose maths hangs: the server ends the stalled run, the others stop at once, the hung one leaves the room, and Start trains on without it', { timeout: 240_000 }, async () => {
  klass.spawn('fine-0');
  klass.spawn('fine-1');
  await klass.waitFor('two workers', async () => (await klass.status()).members.length === 2, 120_000);
  const hung = klass.spawn('hung-2', ['--hold-compute-ms', '60000']);
  await klass.waitFor('three workers', async () => (await klass.status()).members.length === 3, 120_000);
  assert.equal(await klass.teacher('start', { model: 'mlp', dataset: 'mnist-10k', maxSteps: 30, resumeFrom: 'none' }), 200);
  const t0 = Date.now();
  const stalled = await klass.waitFor('the stalled run ended', async () => {
    const s = await klass.status();
    return s.lastError?.code === 'ERR_RUN_STALLED' && s;
  }, 60_000);
  assert.equal(stalled.state, 'idle');
  assert.match(stalled.lastError!.message, /no progress for \d+ s at step 0/);
  const fine = klass.workers.filter((w) => w !== hung);
  await klass.waitFor('the others stopped at once', async () => fine.every((w) => w.output.some((l) => /training stopped: ERR_RUN_STALLED/.test(l))), 10_000);
  const left = await klass.waitFor('the hung device out of the room', async () => {
    const s = await klass.status();
    return s.members.length === 2 && !s.members.some((m) => m.name === 'hung-2') && s;
  }, STALLED_UNWIND_MS + 15_000);
  assert.ok(Date.now() - t0 < 60_000, 'it left before its maths answered');
  assert.ok(hung.output.some((l) => /did not stop within 15 s of the server's stop/.test(l)), lastLines([hung], 10));
  assert.ok(left.run >= 1);
  // The teacher's Start: the class trains on without it.
  assert.equal(await klass.teacher('start', { model: 'mlp', dataset: 'mnist-10k', maxSteps: 30, resumeFrom: 'none' }), 200);
  const done = await klass.waitFor('the run to finish', async () => {
    const s = await klass.status();
    return (s.state === 'done' || (s.lastError !== null && s.run > left.run)) && s;
  }, 120_000);
  assert.equal(done.lastError, null, lastLines(klass.workers, 10));
  assert.equal(done.step, 30);
  // In either order: the two spawn together, and either may join first.
  assert.deepEqual(done.members.map((m) => m.name).sort(), ['fine-0', 'fine-1']);
  assert.equal(new Set(done.members.map((m) => m.weightsHash)).size, 1);
});
