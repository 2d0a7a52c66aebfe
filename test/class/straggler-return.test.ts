/**
 * Nobody is out for good: a Node worker that is slow for a while (`--slow-until-step`: every
 * step 2.5 s longer until global step 12, as a laptop saturated by a join storm) is dropped
 * by the chief as a straggler, says it measures its speed again and comes back by itself,
 * and, fast again, trains on in lock-step with the class to the end of the run. The server
 * runs on the product's defaults.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer } from '../support/server';
import { classRoom } from '../support/class-room';
import type { RunningServer } from '../../signaling-server/server';

const SLOW_UNTIL_STEP = 12;
let server: RunningServer;
const klass = classRoom(() => server, 'straggler-return');
const { workers, waitFor } = klass;
const room = klass.status;

before(async () => {
  server = await startTestServer();
  for (const name of ['steady-0', 'steady-1', 'steady-2']) klass.spawn(name);
  // The chief never drops itself (drop-check.ts): the busy worker joins last, so it is not the chief.
  await waitFor('three steady workers in the room', async () => (await room()).members.length === 3, 120_000);
  klass.spawn('busy-3', ['--slow-until-step', String(SLOW_UNTIL_STEP)]);
  await waitFor('four workers in the room', async () => (await room()).members.length === 4, 120_000);
});

after(async () => {
  for (const w of workers) w.child.kill('SIGKILL');
  await server.close();
});

test('a device slow for a while is dropped as a straggler, comes back by itself, and trains on to the end in lock-step', async () => {
  assert.equal(await klass.teacher('start', { model: 'mlp', maxSteps: 100_000, resumeFrom: 'none' }), 200);
  const dropped = await waitFor('the busy worker dropped as a straggler', async () => {
    const r = await room();
    return r.dropped.some((d) => d.name === 'busy-3' && d.reason === 'straggler') && r;
  }, 120_000);
  assert.deepEqual(dropped.dropped.map((d) => d.name), ['busy-3'], 'only the busy worker');
  const busy = workers.find((w) => w.name === 'busy-3')!;
  await waitFor('its own log says it comes back by itself', async () => busy.output.some((l) => /rejoins by itself in 10 s, with a share that fits \(return 1 of 3\)/.test(l)), 10_000);
  const back = await waitFor('all four in lock-step past the slow steps', async () => {
    const r = await room();
    const steps = new Set(r.members.map((m) => m.step));
    const hashes = new Set(r.members.map((m) => m.weightsHash));
    return r.members.length === 4 && r.waiting.length === 0 && steps.size === 1 && hashes.size === 1 && r.step > Math.max(SLOW_UNTIL_STEP, dropped.step) + 3 && r;
  }, 180_000);
  assert.equal(back.run, 1, 'the same run');
  assert.equal(back.lastError, null);
  assert.ok(back.members.some((m) => m.name === 'busy-3'), 'the busy worker is back');
  assert.ok(busy.output.some((l) => /admission probe:/.test(l) && busy.output.indexOf(l) > busy.output.findIndex((x) => /rejoins by itself/.test(x))), 'it measured its speed again before it rejoined');
  assert.equal(await klass.teacher('stop'), 200);
  const done = await waitFor('the run over, with the returned worker in it', async () => {
    const r = await room();
    return r.state === 'done' && r;
  }, 60_000);
  assert.ok(done.members.some((m) => m.name === 'busy-3'));
  assert.equal(done.dropped.filter((d) => d.name === 'busy-3').length, 1, 'dropped once, and back for good');
});
