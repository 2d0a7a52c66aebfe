/**
 * Local steps through the real server: the start config's new fields are checked at the
 * edge (a bad one is a coded 400 naming its field, and the room is untouched), the wire
 * defaults follow the mode, and real Node workers train a secure local-steps run: masks once
 * per round, a joiner admitted at a round's end, a member killed mid-round (the survivors skip
 * the failed round, since a secure run never sums a turn twice), the room API's round and bytes per round.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { AS_TEACHER, codeFor, useTestServer } from '../support/server';
import { lastLines, pollUntil, spawnNodeWorker, type SpawnedWorker } from '../support/processes';
import type { RoomMetrics, RoomStatus } from '../../shared/protocol';

const t = useTestServer();
const workers: SpawnedWorker[] = [];
after(() => {
  for (const w of workers) w.child.kill('SIGKILL');
});

const post = (path: string, body: unknown): Promise<Response> => t.teacherPost(path, body);

test('the start config: local steps and the outer optimizer are checked at the edge, and the wire follows the mode', async () => {
  await t.students('local-config', ['l0', 'l1']);
  for (const [body, field] of [
    [{ sync: 'local-steps', localSteps: 0 }, 'localSteps'],
    [{ sync: 'local-steps', localSteps: 1001 }, 'localSteps'],
    [{ sync: 'local-steps', localSteps: 2.5 }, 'localSteps'],
    [{ sync: 'sometimes' }, 'sync'],
    [{ sync: 'local-steps', outerOptimizer: 'adam' }, 'outerOptimizer'],
    [{ sync: 'local-steps', outerMomentum: 1 }, 'outerMomentum'],
    [{ sync: 'local-steps', outerLearningRate: 0 }, 'outerLearningRate'],
    [{ sync: 'local-steps', secureAggregation: true, wire: 'fp16' }, 'wire'],
  ] as const) {
    const r = await post('/api/rooms/local-config/start', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    const error = ((await r.json()) as { error: { code: string; field?: string } }).error;
    assert.equal(error.code, 'ERR_BAD_REQUEST');
    assert.equal(error.field, field, JSON.stringify(body));
  }
  const untouched = await t.status('local-config');
  assert.equal(untouched.state, 'idle');
  assert.equal(untouched.run, 0);
  // Accepted: a round travels as fp16 unless masked; every step as fp32.
  assert.equal((await post('/api/rooms/local-config/start', { sync: 'local-steps', maxSteps: 1 })).status, 200);
  const started = await t.status('local-config');
  assert.equal(started.config?.wire, 'fp16');
  assert.equal(started.config?.localSteps, 10);
});

test('Node workers train a secure local-steps run: a joiner at a round boundary, a member killed mid-round (its round skipped), bytes once per round', async () => {
  const room = 'local-workers';
  const status = async (): Promise<RoomStatus> => t.status(room);
  const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> => pollUntil(what, probe, timeoutMs, () => lastLines(workers, 15), 100);
  for (const name of ['r0', 'r1', 'r2']) workers.push(spawnNodeWorker(t.server.url, room, codeFor(room), name));
  await waitFor('three workers', async () => (await status()).members.length === 3, 90_000);
  const H = 8;
  // The full training set: its first epoch (over 600 steps) outlasts the test, and a round
  // ends early only with an epoch, so every round here is H steps.
  assert.equal((await post(`/api/rooms/${room}/start`, { model: 'mlp', dataset: 'mnist-60k', sync: 'local-steps', localSteps: H, secureAggregation: true, maxSteps: 5_000, resumeFrom: 'none' })).status, 200);
  const early = await waitFor('three rounds', async () => {
    const s = await status();
    return s.round >= 3 && s;
  }, 120_000);
  assert.equal(early.config?.wire, 'fp32', 'masked rounds travel as 32-bit words');
  assert.equal(early.step, early.round * H, 'every round is H steps');
  assert.ok(early.bytesSentPerRound! > 0 && early.bytesSentPerExample! > 0);
  // Each worker's all-reduce sends about 2(N-1)/N of the model's 101,770 words once per round.
  const perWorker = early.bytesSentPerRound! / 3;
  assert.ok(perWorker > 101_770 * 4 * (4 / 3) * 0.9 && perWorker < 101_770 * 4 * 2, `${perWorker} bytes per worker per round`);

  // A fourth joins: admitted at a round's end, it starts with the next round.
  workers.push(spawnNodeWorker(t.server.url, room, codeFor(room), 'r3'));
  const joined = await waitFor('the fourth training', async () => {
    const s = await status();
    return s.members.length === 4 && s.members.every((m) => m.step > 0) && s;
  }, 120_000);
  const four = await waitFor('three rounds with four', async () => {
    const s = await status();
    return s.round >= joined.round + 3 && s.members.every((m) => m.step >= joined.step) && s;
  }, 120_000);
  assert.equal(four.step % H, 0, `the joiner came in at a round boundary: rounds stay whole (${JSON.stringify({ step: four.step, round: four.round, epoch: four.epoch, joined: joined.step, total: four.totalSteps })})`);
  assert.deepEqual(four.dropped, []);

  // kill -9 mid-round: in a secure run the survivors skip the round (summing it again
  // without the lost member would reveal its change: issue 38), and go on.
  const lost = workers[2]!;
  lost.child.kill('SIGKILL');
  const lostAt = (await status()).round;
  const after = await waitFor('three rounds after the loss', async () => {
    const s = await status();
    return s.members.length === 3 && s.round >= lostAt + 3 && s;
  }, 120_000);
  const survivors = workers.filter((w) => w !== lost && w.name !== 'r3').concat(workers.filter((w) => w.name === 'r3'));
  const skipped = survivors.filter((w) => w.output.some((l) => /skipped steps \d+-\d+, whose secure sum failed/.test(l)));
  assert.equal(skipped.length, 3, `every survivor skipped the failed round:\n${lastLines(survivors, 10)}`);
  assert.ok(!survivors.some((w) => w.output.some((l) => l.includes('survivors trained before a member was lost'))), 'nobody summed a kept round again');
  assert.equal(after.consistency.mismatches, 0, lastLines(workers, 20));
  assert.ok(after.consistency.checks >= after.round - 2, 'every round compares the hashes');
  assert.equal((await post(`/api/rooms/${room}/stop`, {})).status, 200);
  const done = await waitFor('the run to finish', async () => {
    const s = await status();
    return s.state === 'done' && s;
  }, 120_000);
  assert.ok(done.round < done.step, `${done.round} outer steps for ${done.step} steps`);
  const metrics = (await (await fetch(`${t.server.url}/api/rooms/${room}/metrics`, AS_TEACHER)).json()) as RoomMetrics;
  const losses = metrics.history.map((p) => p.loss);
  assert.ok(losses.at(-1)! < losses[0]! * 0.7, `loss ${losses[0]} -> ${losses.at(-1)}`);
  for (const w of workers) assert.ok(!w.output.some((l) => /ERR_SECAGG_MISMATCH|ERR_BAD_DATA|Error:/.test(l)), lastLines([w], 20));
});
