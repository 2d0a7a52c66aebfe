/**
 * PowerSGD and quantized sums through the real server and real Node workers: a secure
 * every-step run with powerSgdRank 4 and sumWordBits 16 sends each step's gradients as
 * factors in two sums, each as masked 16-bit words after its masked scales, in under 3.5 %
 * of the bytes of the whole gradient (the factors alone in 32-bit words would be 4.3 %), and
 * trains on through a joiner and a kill -9 (each new ring starts its factors and residuals
 * afresh, the same on every replica): the replicas never disagree, the loss falls, nobody's
 * masks fail. A bad rank or word width is a 400 naming the field.
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

/** The digits' MLP: 101,770 floats, sent whole as 32-bit words by a secure run. */
const MLP_FLOATS = 101_770;

test('Node workers train a secure every-step run with PowerSGD in 16-bit words: masked factors, under 3.5 % of the bytes, through a joiner and a kill -9', async () => {
  const room = 'power-sgd';
  const status = async (): Promise<RoomStatus> => t.status(room);
  const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> => pollUntil(what, probe, timeoutMs, () => lastLines(workers, 15), 100);
  for (const name of ['p0', 'p1', 'p2']) workers.push(spawnNodeWorker(t.server.url, room, codeFor(room), name));
  await waitFor('three workers', async () => (await status()).members.length === 3, 90_000);
  const bad = await t.teacherPost(`/api/rooms/${room}/start`, { powerSgdRank: 65 });
  assert.equal(bad.status, 400);
  assert.equal(((await bad.json()) as { error: { field?: string } }).error.field, 'powerSgdRank');
  const badWords = await t.teacherPost(`/api/rooms/${room}/start`, { sumWordBits: 12 });
  assert.equal(badWords.status, 400);
  assert.equal(((await badWords.json()) as { error: { field?: string } }).error.field, 'sumWordBits');
  assert.equal((await t.teacherPost(`/api/rooms/${room}/start`, { model: 'mlp', dataset: 'mnist-60k', secureAggregation: true, powerSgdRank: 4, sumWordBits: 16, maxSteps: 5_000, resumeFrom: 'none' })).status, 200);
  const early = await waitFor('ten steps', async () => {
    const s = await status();
    return s.step >= 10 && s.bytesSentPerRound !== null && s;
  }, 120_000);
  assert.deepEqual([early.config?.powerSgdRank, early.config?.sumWordBits], [4, 16]);
  // Whole, each worker's ring sends about 2(N-1)/N of the 101,770 words a step.
  const perWorker = early.bytesSentPerRound! / 3;
  assert.ok(perWorker < MLP_FLOATS * 4 * (4 / 3) * 0.035, `${perWorker} bytes per worker per step`);

  workers.push(spawnNodeWorker(t.server.url, room, codeFor(room), 'p3'));
  const joined = await waitFor('the fourth training', async () => {
    const s = await status();
    return s.members.length === 4 && s.members.every((m) => m.step > 0) && s;
  }, 120_000);
  await waitFor('ten steps with four', async () => (await status()).step >= joined.step + 10, 120_000);
  const lost = workers.find((w) => w.name === 'p1')!;
  lost.child.kill('SIGKILL');
  const lostAt = (await status()).step;
  const after = await waitFor('ten steps after the loss', async () => {
    const s = await status();
    return s.members.length === 3 && s.step >= lostAt + 10 && s;
  }, 120_000);
  assert.equal(after.consistency.mismatches, 0, lastLines(workers, 20));
  assert.ok(after.consistency.checks > 0);
  assert.equal((await t.teacherPost(`/api/rooms/${room}/stop`, {})).status, 200);
  await waitFor('the run to finish', async () => (await status()).state === 'done', 120_000);
  const metrics = (await (await fetch(`${t.server.url}/api/rooms/${room}/metrics`, AS_TEACHER)).json()) as RoomMetrics;
  const losses = metrics.history.map((p) => p.loss);
  assert.ok(losses.at(-1)! < losses[0]! * 0.7, `loss ${losses[0]} -> ${losses.at(-1)}`);
  for (const w of workers) assert.ok(!w.output.some((l) => /ERR_SECAGG_MISMATCH|ERR_BAD_DATA|Error:/.test(l)), lastLines([w], 20));
});
