/**
 * The class never waits for ever (signaling-server/rooms/stall-watch.ts), over real sockets
 * and the teacher API with the floor shortened to 1.5 s: a run whose class reports no
 * progress ends with ERR_RUN_STALLED, every member hears `train:stop` 'stalled' and a fresh
 * generation, and the teacher sees why; a class that reports in time, a paused one and a
 * secure run holding for more devices are left alone; Start resumes after a stall.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nextEvent, startTestRun, useTestServer, type TestSocket } from '../support/server';
import type { ProgressReport, TrainStart } from '../../shared/protocol';

const FLOOR_MS = 1_500;
const ts = useTestServer({ stallFloorMs: FLOOR_MS });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function progress(start: TrainStart, step: number): ProgressReport {
  return {
    run: start.run, generation: start.generation, step, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 100, weightsHash: '0123456789abcdef', totalSteps: 1_000, computeMs: 12,
    hashChecked: false, hashMismatch: false, batchShare: 0.5, linkMBps: 3, learningRate: 0.001, speedVsMedian: 1,
    collective: { algorithm: 'ring', alphaMs: 0.4, betaMBps: 9, reason: 'test', timing: { dataMs: 0, computeMs: 10, readbackMs: 2, crossMs: 0, commMs: 5, applyMs: 1 } },
  };
}

/** The chief reports a step every `everyMs` for `forMs`. */
async function reportSteps(chief: TestSocket, start: TrainStart, everyMs: number, forMs: number): Promise<number> {
  let step = 0;
  for (const end = Date.now() + forMs; Date.now() < end; ) {
    chief.emit('worker:progress', progress(start, ++step));
    await sleep(everyMs);
  }
  return step;
}

test('a class that makes no progress: the run ends with ERR_RUN_STALLED, every member is told to stop and re-forms, the teacher sees why, and Start resumes', { timeout: 30_000 }, async () => {
  const { students } = await ts.students('stalls', ['ana', 'ben']);
  const [a, b] = students as [TestSocket, TestSocket];
  const start = await startTestRun(ts.server, 'stalls', a, { model: 'mlp', resumeFrom: 'none' });
  // Steps come while the floor has not passed three times over: the class is fine.
  const stops = [nextEvent(a, 'train:stop', undefined, 20_000), nextEvent(b, 'train:stop', undefined, 20_000)];
  const fresh = nextEvent(b, 'ring:generation', (g) => g.generation > start.generation, 20_000);
  const reported = await reportSteps(a, start, 300, 3 * FLOOR_MS);
  const fine = await ts.status('stalls');
  assert.equal(fine.state, 'training', 'steps that keep coming are progress');
  assert.equal(fine.step, reported);
  // Then nothing: past the floor, the run ends.
  const t0 = Date.now();
  assert.deepEqual(await Promise.all(stops), [{ reason: 'stalled' }, { reason: 'stalled' }]);
  const waited = Date.now() - t0;
  assert.ok(waited >= FLOOR_MS - 300 && waited < FLOOR_MS + 3_000, `ended ${waited} ms after the last step`);
  const generation = await fresh;
  assert.deepEqual(generation.members.map((m) => m.name), ['ana', 'ben'], 'the same members, in a fresh ring');
  const ended = await ts.status('stalls');
  assert.equal(ended.state, 'idle');
  assert.equal(ended.lastError?.code, 'ERR_RUN_STALLED');
  assert.match(ended.lastError!.message, new RegExp(`no progress for \\d+ s at step ${reported}, epoch 1 .*Start resumes`));
  assert.ok(ended.events.some((e) => e.kind === 'stalled' && e.step === reported));
  // Not resumed by itself: the same stall would come back. The teacher's Start does.
  await sleep(FLOOR_MS);
  assert.equal((await ts.status('stalls')).state, 'idle');
  const again = await startTestRun(ts.server, 'stalls', a, { model: 'mlp', resumeFrom: 'none' });
  assert.equal(again.run, start.run + 1);
  assert.equal((await ts.status('stalls')).lastError, null);
});

test('the pace is the class’s own: turns measured at 1 s give 4 s, not the floor', { timeout: 30_000 }, async () => {
  const { students } = await ts.students('slow-turns', ['cat', 'dan']);
  const chief = students[0]!;
  const start = await startTestRun(ts.server, 'slow-turns', chief, { model: 'mlp', resumeFrom: 'none' });
  const stopped = nextEvent(chief, 'train:stop', undefined, 20_000);
  await reportSteps(chief, start, 1_000, 2_500);
  const t0 = Date.now();
  await sleep(2 * FLOOR_MS);
  assert.equal((await ts.status('slow-turns')).state, 'training', 'twice the floor is within four of its turns');
  assert.equal((await stopped).reason, 'stalled');
  const waited = Date.now() - t0;
  assert.ok(waited >= 4_000 - 1_500, `ended ${waited} ms after the last step`);
});

test('a paused class and a secure run holding for more devices are not stalled', { timeout: 30_000 }, async () => {
  const { students } = await ts.students('paused', ['eve', 'fay']);
  await startTestRun(ts.server, 'paused', students[0]!, { model: 'mlp', resumeFrom: 'none' });
  assert.equal((await ts.teacherPost('/api/rooms/paused/pause', {})).status, 200);
  // Two tabs of one machine are one client: a secure run of them holds (MIN_SECURE_MEMBERS is 3).
  const { students: secure } = await ts.students('holding', ['gus', 'hal']);
  await startTestRun(ts.server, 'holding', secure[0]!, { model: 'mlp', resumeFrom: 'none', secureAggregation: true });
  await sleep(3 * FLOOR_MS);
  assert.equal((await ts.status('paused')).state, 'paused');
  const holding = await ts.status('holding');
  assert.equal(holding.state, 'training');
  assert.equal(holding.lastError, null);
  // Resumed, the pause is nobody's stall: the clock starts again from the resume.
  assert.equal((await ts.teacherPost('/api/rooms/paused/resume', {})).status, 200);
  await sleep(FLOOR_MS / 2);
  assert.equal((await ts.status('paused')).state, 'training');
});
