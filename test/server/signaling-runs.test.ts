/**
 * A room's runs over real sockets and the teacher API: Start and Stop, progress reports,
 * Pause and Resume, students admitted mid-run with their probes, a member leaving or
 * a link breaking mid-run, the chief's straggler drop, and the teacher's collecting for
 * classes. Membership and hostile input are in signaling-membership.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { REFORM_AFTER_MS } from '../../shared/protocol';
import { AS_TEACHER, join, nextEvent, reportSteps, TEST_TOKEN, useTestServer } from '../support/server';

// The product's liveness: 1 s between pings, 4 s to answer.
const ts = useTestServer();

function post(path: string, body: unknown, token: string | null = TEST_TOKEN): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  return fetch(`${ts.server.url}${path}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

test('start and stop need the teacher token, and a nonsense config gets a 400 naming the field', async () => {
  const a = await ts.client();
  await join(a, 'lesson', 'a');
  assert.equal((await post('/api/rooms/lesson/start', {}, null)).status, 401);
  assert.equal((await post('/api/rooms/lesson/start', {}, 'wrong-token')).status, 401);
  assert.equal((await post('/api/rooms/lesson/stop', {}, null)).status, 401);

  const bad = await post('/api/rooms/lesson/start', { learningRate: -1 });
  assert.equal(bad.status, 400);
  const body = (await bad.json()) as { error: { code: string; field: string } };
  assert.deepEqual([body.error.code, body.error.field], ['ERR_BAD_REQUEST', 'learningRate']);
  const unknownField = (await (await post('/api/rooms/lesson/start', { model: 'mlp', lr: 1 })).json()) as { error: { field?: string; message: string } };
  assert.match(unknownField.error.message, /lr/);
  assert.equal((await post('/api/rooms/lesson/start', '{not json')).status, 400);
  assert.equal((await post('/api/rooms/lesson/start', { model: 'x'.repeat(20_000) })).status, 413);
  assert.equal((await post('/api/rooms/empty-room/start', {})).status, 409);

  const started = nextEvent(a, 'train:start');
  const ok = await post('/api/rooms/lesson/start', { model: 'cnn', epochs: 1 });
  assert.equal(ok.status, 200);
  const start = await started;
  assert.equal(start.config.model, 'cnn');
  assert.equal(start.config.optimizer, 'adam'); // default filled in
  assert.equal((await ts.status('lesson')).state, 'training');
  assert.equal((await post('/api/rooms/lesson/start', {})).status, 409);

  const stopped = nextEvent(a, 'train:stop');
  assert.equal((await post('/api/rooms/lesson/stop', {})).status, 200);
  assert.equal((await stopped).reason, 'teacher');
});

/** The progress fields these tests do not look at. */
const EXTRA = {
  totalSteps: 5,
  computeMs: 12,
  hashChecked: false,
  hashMismatch: false,
  batchShare: 0.5,
  linkMBps: 3, learningRate: 0.001, speedVsMedian: 1,
  collective: { algorithm: 'ring' as const, alphaMs: 0.4, betaMBps: 9, reason: 'test', timing: { dataMs: 0, computeMs: 10, readbackMs: 2, crossMs: 0, commMs: 5, applyMs: 1 } },
};

test('progress reports feed the room status; a report of another run is refused', async () => {
  const [a, b] = [await ts.client(), await ts.client()];
  const ja = await join(a, 'progress', 'a');
  await join(b, 'progress', 'b');
  const start = nextEvent(a, 'train:start');
  await post('/api/rooms/progress/start', { maxSteps: 5 });
  const { generation, run } = await start;
  reportSteps(a, { run, generation, epoch: 0, loss: 1.5, trainAccuracy: 0.5, examplesPerSec: 100, weightsHash: '0123456789abcdef', ...EXTRA }, 1, 3);
  const stale = nextEvent(a, 'server:error');
  a.emit('worker:progress', { run: run + 7, generation, step: 4, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA });
  assert.equal((await stale).code, 'ERR_STALE_RUN');
  // A generation the room never made (issue 38: 10¹² was accepted, and turned batched admission off for the run).
  const future = nextEvent(a, 'server:error');
  a.emit('worker:progress', { run, generation: 1e12, step: 4, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA });
  assert.deepEqual(await future, { code: 'ERR_BAD_REQUEST', message: `a report of generation 1000000000000; the room has made ${generation} at most`, field: 'generation' });
  // Steps and epochs past the run, and a step back within a generation (issue 38: all were taken as sent).
  for (const [bad, field] of [[{ step: 6, epoch: 0 }, 'step'], [{ step: 3, epoch: 3 }, 'epoch'], [{ step: 2, epoch: 0 }, 'step']] as const) {
    const refused = nextEvent(a, 'server:error');
    a.emit('worker:progress', { run, generation, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA, ...bad });
    const e = await refused;
    assert.deepEqual([e.code, e.field], ['ERR_BAD_REQUEST', field], JSON.stringify(bad));
  }
  const s = await ts.status('progress');
  assert.equal(s.step, 3);
  assert.equal(s.metrics.loss, 1.5);
  assert.equal(s.members[0]!.examplesPerSec, 100);
  assert.ok(ja.ok);
  assert.equal(s.members[0]!.id, ja.memberId);

  // The chief's checks of the replicas' weights are counted; a mismatch is logged as a resync.
  a.emit('worker:progress', { run, generation, step: 4, epoch: 0, loss: 1.4, trainAccuracy: 0.5, examplesPerSec: 100, weightsHash: '0123456789abcdef', ...EXTRA, hashChecked: true, hashMismatch: true });
  await new Promise((r) => setTimeout(r, 100));
  const checked = await ts.status('progress');
  assert.deepEqual(checked.consistency, { checks: 1, mismatches: 1, lastMismatchStep: 4 });
  assert.equal(checked.events.at(-1)?.kind, 'resynced');

  // The replicas' last reports arrive a moment after the run ended: they still count.
  a.emit('worker:finished', { run, generation, step: 5, reason: 'completed' });
  await new Promise((r) => setTimeout(r, 100));
  let complained = false;
  a.on('server:error', () => (complained = true));
  b.on('server:error', () => (complained = true));
  b.emit('worker:progress', { run, generation, step: 5, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA });
  b.emit('worker:finished', { run, generation, step: 5, reason: 'completed' });
  a.emit('worker:evaluated', { run, generation, step: 5, epoch: 0, accuracy: 0.75, testLoss: 0.3 });
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(complained, false);
  assert.equal((await ts.status('progress')).metrics.accuracy, 0.75);
  assert.equal((await ts.status('progress')).state, 'done');

  const metrics = (await (await fetch(`${ts.server.url}/api/rooms/progress/metrics`, AS_TEACHER)).json()) as { history: unknown[] };
  // Steps 1 to 3, and 4.
  assert.equal(metrics.history.length, 4);
});

test('Pause and Resume need the teacher token, reach every worker and show in the room state', async () => {
  const [a, b] = [await ts.client(), await ts.client()];
  await join(a, 'pausing', 'a');
  await join(b, 'pausing', 'b');
  assert.equal((await post('/api/rooms/pausing/pause', {})).status, 409, 'nothing to pause before Start');
  const start = nextEvent(a, 'train:start');
  await post('/api/rooms/pausing/start', {});
  await start;
  assert.equal((await post('/api/rooms/pausing/pause', {}, null)).status, 401);
  const paused = [nextEvent(a, 'train:pause'), nextEvent(b, 'train:pause')];
  assert.equal((await post('/api/rooms/pausing/pause', {})).status, 200);
  await Promise.all(paused);
  assert.equal((await ts.status('pausing')).state, 'paused');
  assert.equal((await post('/api/rooms/pausing/pause', {})).status, 409);
  assert.equal((await post('/api/rooms/pausing/start', {})).status, 409, 'a paused run is still a run');
  const resumed = nextEvent(b, 'train:resume');
  assert.equal((await post('/api/rooms/pausing/resume', {})).status, 200);
  await resumed;
  assert.equal((await ts.status('pausing')).state, 'training');
  assert.equal((await post('/api/rooms/pausing/resume', {})).status, 409);
});

test('students arriving mid-run are admitted together in one generation and told the run they join', async () => {
  const [a, b] = [await ts.client(), await ts.client()];
  await join(a, 'late', 'a');
  await join(b, 'late', 'b');
  const start = nextEvent(a, 'train:start');
  await post('/api/rooms/late/start', { maxSteps: 50 });
  const { run, generation } = await start;
  reportSteps(a, { run, generation, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA }, 1, 7);

  const late = [await ts.client(), await ts.client(), await ts.client()];
  const starts = late.map((s) => nextEvent(s, 'train:start'));
  const grown = nextEvent(a, 'ring:generation', (g) => g.members.length === 5);
  for (const [i, s] of late.entries()) assert.ok((await join(s, 'late', `late${i}`)).ok);
  assert.equal((await ts.status('late')).waiting.length, 3);
  const g = await grown;
  assert.equal(g.generation, generation + 1, 'one generation change for all three');
  assert.deepEqual(g.members.map((m) => m.name), ['a', 'b', 'late0', 'late1', 'late2']);
  for (const s of await Promise.all(starts)) {
    assert.deepEqual([s.run, s.generation, s.admitted, s.resume, s.startStep], [run, generation + 1, true, null, 7]);
  }
  const s = await ts.status('late');
  assert.deepEqual([s.state, s.waiting.length, s.members.length], ['training', 0, 5]);
  assert.equal(s.events.at(-1)?.kind, 'admitted');

  // The run ends before the ring switched to them: the joiners are told not to wait; the others are not.
  const ended = late.map((x) => nextEvent(x, 'train:stop'));
  let bStopped = false;
  b.on('train:stop', () => (bStopped = true));
  a.emit('worker:finished', { run, generation: g.generation, step: 8, reason: 'completed' });
  for (const stop of await Promise.all(ended)) assert.equal(stop.reason, 'ended');
  assert.equal(bStopped, false);
});

test('each member shows its admission probe; a bad probe is refused; an admission records the class pause and the joiner\'s time to lock-step', async () => {
  const [a, b] = [await ts.client(), await ts.client()];
  await join(a, 'probed', 'a', { probe: { device: 'laptop', task: 'mnist', model: 'mlp', msPerExample: 0.8 } });
  await join(b, 'probed', 'b', { probe: { device: 'tablet', task: 'mnist', model: 'mlp', msPerExample: 2.5 } });
  const bad = await ts.client();
  const refused = await join(bad, 'probed', 'bad', { probe: { device: 'laptop', task: 'mnist', model: 'mlp', msPerExample: -1 } });
  assert.ok(!refused.ok && refused.error.code === 'ERR_BAD_REQUEST', JSON.stringify(refused));
  const before = await ts.status('probed');
  assert.deepEqual(before.members.map((m) => [m.name, m.probe?.device, m.probe?.msPerExample]), [['a', 'laptop', 0.8], ['b', 'tablet', 2.5]]);

  const start = nextEvent(a, 'train:start');
  await post('/api/rooms/probed/start', { maxSteps: 50 });
  const { run, generation } = await start;
  reportSteps(a, { run, generation, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA }, 1, 4);
  const late = await ts.client();
  const admitted = nextEvent(a, 'ring:generation', (g) => g.members.length === 3);
  await join(late, 'probed', 'late', { probe: { device: 'phone', task: 'mnist', model: 'mlp', msPerExample: 9 } });
  const g = await admitted;
  assert.equal(g.members[2]!.probe?.device, 'phone', 'the generation carries the probes every replica sizes first shares by');
  const pending = (await ts.status('probed')).joins;
  assert.deepEqual(pending, [{ generation: g.generation, joiners: ['late'], atStep: 4, pauseMs: null, lockStepMs: null }]);

  // The joiner's first step in lock-step, then the chief's pause once measured; a non-chief's pause does not count.
  reportSteps(a, { run, generation: g.generation, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA }, 5, 8);
  await new Promise((r) => setTimeout(r, 100));
  late.emit('worker:progress', { run, generation: g.generation, step: 6, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA, lockStepMs: 1800 });
  b.emit('worker:progress', { run, generation: g.generation, step: 9, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA, switchPauseMs: 9999 });
  a.emit('worker:progress', { run, generation: g.generation, step: 9, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA, switchPauseMs: 420 });
  await new Promise((r) => setTimeout(r, 150));
  assert.deepEqual((await ts.status('probed')).joins, [{ generation: g.generation, joiners: ['late'], atStep: 4, pauseMs: 420, lockStepMs: 1800 }]);
  const negative = nextEvent(a, 'server:error');
  a.emit('worker:progress', { run, generation: g.generation, step: 10, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA, switchPauseMs: -5 });
  assert.equal((await negative).code, 'ERR_BAD_REQUEST');
});

test('a member leaving mid-run re-forms the ring and the run goes on; the chief passes to the next index', async () => {
  const [a, b, c] = [await ts.client(), await ts.client(), await ts.client()];
  const ja = await join(a, 'elastic', 'a');
  const jb = await join(b, 'elastic', 'b');
  await join(c, 'elastic', 'c');
  assert.ok(ja.ok && jb.ok);
  const start = nextEvent(b, 'train:start');
  await post('/api/rooms/elastic/start', {});
  const { generation } = await start;
  let stopped = false;
  b.on('train:stop', () => (stopped = true));
  const reformed = nextEvent(b, 'ring:generation', (g) => g.members.length === 2);
  const t0 = Date.now();
  a.disconnect();
  const g = await reformed;
  assert.ok(Date.now() - t0 < 3_000, 'a new generation within 3 s');
  assert.equal(g.generation, generation + 1);
  assert.deepEqual(g.members.map((m) => [m.name, m.rank]), [['b', 0], ['c', 1]]);
  const s = await ts.status('elastic');
  assert.deepEqual([s.state, s.chief], ['training', jb.memberId]);
  assert.equal(s.events.at(-1)?.kind, 'left');
  assert.equal(stopped, false, 'nobody was told to stop');

  // A broken link with everyone present: a member asks for a re-form; repeated asks for the same generation count once.
  // Honest workers ask only after trying the generation for REFORM_AFTER_MS; so does this test.
  await new Promise((r) => setTimeout(r, REFORM_AFTER_MS));
  const again = nextEvent(c, 'ring:generation');
  b.emit('ring:reform', { generation: g.generation, reason: 'link closed' });
  c.emit('ring:reform', { generation: g.generation, reason: 'link closed' });
  assert.equal((await again).generation, g.generation + 1);
  await new Promise((r) => setTimeout(r, 100));
  assert.equal((await ts.status('elastic')).generation, g.generation + 1);

  // When the last ring member is gone, the run ends; a student still waiting for admission
  // is told why and becomes the ring (which resumes from a checkpoint, if there is one).
  const waiting = await ts.client();
  await join(waiting, 'elastic', 'w');
  b.disconnect();
  c.disconnect();
  await new Promise((r) => setTimeout(r, 200));
  const end = await ts.status('elastic');
  assert.deepEqual([end.state, end.lastError?.code, end.members.map((m) => m.name)], ['idle', 'ERR_MEMBER_LEFT', ['w']]);
});

test('only the chief drops a straggler; the straggler is told why and may join again', async () => {
  const [a, b, c] = [await ts.client(), await ts.client(), await ts.client()];
  await join(a, 'slow', 'a');
  await join(b, 'slow', 'b');
  const jc = await join(c, 'slow', 'c');
  assert.ok(jc.ok);
  const start = nextEvent(a, 'train:start');
  await post('/api/rooms/slow/start', {});
  const { run, generation } = await start;
  const drop = { run, generation, member: jc.memberId, step: 12, computeMs: 3100, deadlineMs: 1000 };
  // The class trained to step 12, c slowly (its own report carries the compute time the chief saw): the server checks drops against these.
  reportSteps(a, { run, generation, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA, computeMs: 400 }, 1, 12);
  await new Promise((r) => setTimeout(r, 100));
  for (const [s, computeMs] of [[b, 420], [c, 3100]] as const) {
    s.emit('worker:progress', { run, generation, step: 12, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 1, weightsHash: '0123456789abcdef', ...EXTRA, computeMs });
  }
  await new Promise((r) => setTimeout(r, 100));
  const refused = nextEvent(b, 'server:error');
  b.emit('ring:drop', drop);
  assert.equal((await refused).code, 'ERR_NOT_CHIEF');
  const bad = nextEvent(a, 'server:error');
  a.emit('ring:drop', { ...drop, member: '../../etc' });
  assert.equal((await bad).code, 'ERR_BAD_REQUEST');

  const told = nextEvent(c, 'member:dropped');
  const shrunk = nextEvent(a, 'ring:generation', (g) => g.members.length === 2);
  a.emit('ring:drop', drop);
  assert.deepEqual(await told, { reason: 'straggler', step: 12, computeMs: 3100, deadlineMs: 1000 });
  await shrunk;
  const s = await ts.status('slow');
  assert.deepEqual(s.dropped.map((d) => [d.name, d.step, d.computeMs, d.deadlineMs]), [['c', 12, 3100, 1000]]);
  assert.equal(s.events.at(-1)?.kind, 'dropped');
  // The same connection joins again, as a late joiner.
  const back = await join(c, 'slow', 'c');
  assert.ok(back.ok);
  assert.equal((await ts.status('slow')).waiting.length, 1);
});

test('the teacher opens collecting for classes: members hear it, joiners get it, a start on own data trains them, and the room waits empty for its students', async () => {
  const put = (room: string, body: unknown, token: string | null = TEST_TOKEN) =>
    fetch(`${ts.server.url}/api/rooms/${room}/collect`, { method: 'PUT', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) });
  const a = await ts.client();
  await join(a, 'drawing', 'ana');
  const heard = nextEvent(a, 'room:collect');
  const opened = await put('drawing', { classes: ['cat', 'house', 'sun'] });
  assert.equal(opened.status, 200);
  assert.deepEqual(await heard, { task: 'mnist', classes: ['cat', 'house', 'sun'] });
  assert.deepEqual((await ts.status('drawing')).collect, { task: 'mnist', classes: ['cat', 'house', 'sun'] });

  // Refused with nothing changed: no teacher token, a bad class list.
  assert.equal((await put('drawing', { classes: ['cat', 'dog'] }, null)).status, 401);
  for (const bad of [{ classes: ['cat'] }, { classes: ['cat', 'cat'] }, { classes: ['cat', 'x'.repeat(25)] }, { classes: 'cat,dog' }, {}, { task: 'names', classes: ['cat', 'dog'] }]) {
    const res = await put('drawing', bad);
    const body = (await res.json()) as { error: { code: string; field?: string } };
    assert.deepEqual([res.status, body.error.code], [400, 'ERR_BAD_REQUEST'], JSON.stringify(bad));
  }
  assert.deepEqual((await ts.status('drawing')).collect, { task: 'mnist', classes: ['cat', 'house', 'sun'] });

  // A student who joins later learns it in the join reply.
  const b = await ts.client();
  const jb = await join(b, 'drawing', 'ben');
  assert.ok(jb.ok && jb.collect !== null);
  assert.deepEqual(jb.ok && jb.collect, { task: 'mnist', classes: ['cat', 'house', 'sun'] });

  // A start on the class's own data that names no classes trains the collected ones.
  const started = nextEvent(a, 'train:start');
  assert.equal((await post('/api/rooms/drawing/start', { data: 'own', maxSteps: 5, resumeFrom: 'none' })).status, 200);
  assert.deepEqual((await started).config.classes, ['cat', 'house', 'sun']);
  await post('/api/rooms/drawing/stop', {});

  // Everyone leaves (a reload): the room stays, still collecting; closing it lets it go.
  a.disconnect();
  b.disconnect();
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual((await ts.status('drawing')).collect, { task: 'mnist', classes: ['cat', 'house', 'sun'] });
  const closed = await put('drawing', { classes: null });
  assert.equal(closed.status, 200);
  assert.equal((await ts.status('drawing')).collect, null);
});

test('the teacher collects names: students report how many names they typed, a start on own names trains the task\'s symbols, securely; a bad request changes nothing', async () => {
  const room = 'naming';
  const put = (body: unknown) => fetch(`${ts.server.url}/api/rooms/${room}/collect`, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKEN}` }, body: JSON.stringify(body) });
  const a = await ts.client();
  await join(a, room, 'ana');
  const heard = nextEvent(a, 'room:collect');
  assert.equal((await put({ task: 'names' })).status, 200);
  assert.deepEqual(await heard, { task: 'names' });
  for (const [bad, code, field] of [[{ task: 'chess' }, 'ERR_UNKNOWN_TASK', 'task'], [{ task: 'names', classes: ['ann', 'bob'] }, 'ERR_BAD_REQUEST', 'classes'], [{ task: 'Names' }, 'ERR_BAD_REQUEST', 'task']] as const) {
    const res = await put(bad);
    const body = (await res.json()) as { error: { code: string; field?: string } };
    assert.deepEqual([res.status, body.error.code, body.error.field], [400, code, field], JSON.stringify(bad));
  }
  assert.deepEqual((await ts.status(room)).collect, { task: 'names' });

  // Counts only, under the task's one label: no name reaches the server.
  const refused = nextEvent(a, 'server:error');
  a.emit('worker:own-examples', { counts: { ann: 1 } });
  assert.equal((await refused).code, 'ERR_BAD_REQUEST');
  a.emit('worker:own-examples', { counts: { names: 7 } });
  await new Promise((r) => setTimeout(r, 150));
  assert.deepEqual((await ts.status(room)).members[0]!.ownExamples, { names: 7 });

  // A run on own names learns the task's own symbols, under secure aggregation by default.
  const started = nextEvent(a, 'train:start');
  assert.equal((await post(`/api/rooms/${room}/start`, { task: 'names', data: 'own', maxSteps: 5, resumeFrom: 'none' })).status, 200);
  const config = (await started).config;
  assert.deepEqual([config.task, config.data, config.secureAggregation, config.classes.length], ['names', 'own', true, 28]);
  await post(`/api/rooms/${room}/stop`, {});
  a.disconnect();
});
