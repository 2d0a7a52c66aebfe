/**
 * The names task through the real server and real Node workers, sharing nothing with the
 * digits: the start config names the task and its model, a model the task lacks is a 400
 * naming the field, and a class of three trains the character model through a joiner and a
 * kill -9. Each name's characters are trained once per epoch across the resizes (every
 * survivor's account of every epoch is exactly the 53,280 examples of the training split),
 * the replicas agree, and the held-out loss in nats per character falls.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { AS_TEACHER, codeFor, useTestServer } from '../support/server';
import { lastLines, pollUntil, spawnNodeWorker, type SpawnedWorker } from '../support/processes';
import type { RoomMetrics, RoomStatus } from '../../shared/protocol';
import { NAMES_COUNTS } from '../../shared/tasks/names/names-text';

const t = useTestServer();
const workers: SpawnedWorker[] = [];
after(() => {
  for (const w of workers) w.child.kill('SIGKILL');
});

const post = (path: string, body: unknown): Promise<Response> => t.teacherPost(path, body);

test('the start config names a task and one of its models: anything else is a 400 naming the field, and the room is untouched', async () => {
  await t.students('names-config', ['n0', 'n1']);
  for (const [body, field] of [
    [{ task: 'cifar' }, 'task'],
    [{ task: 'names', model: 'cnn' }, 'model'],
    [{ task: 'names', dataset: 'mnist-60k' }, 'dataset'],
    [{ task: 'names', data: 'own', classes: ['ann', 'bob'] }, 'classes'],
    [{ task: 'names', classes: ['a', 'b'] }, 'classes'],
    [{ task: 'Names' }, 'task'],
  ] as const) {
    const r = await post('/api/rooms/names-config/start', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    const error = ((await r.json()) as { error: { code: string; field?: string } }).error;
    assert.deepEqual([error.code, error.field], ['ERR_BAD_REQUEST', field], JSON.stringify(body));
  }
  const untouched = await t.status('names-config');
  assert.deepEqual([untouched.state, untouched.run, untouched.config], ['idle', 0, null]);
  assert.equal((await post('/api/rooms/names-config/start', { task: 'names', maxSteps: 1 })).status, 200);
  const started = await t.status('names-config');
  assert.deepEqual([started.config?.task, started.config?.model, started.config?.dataset], ['names', 'char-mlp', 'names-en']);
  assert.equal(started.config?.classes.length, 28, 'the outputs are the vocabulary: 27 characters and the end mark');
});

test('a names class of three trains through a joiner and a kill -9: every name trained once per epoch, replicas agree, held-out nats per character fall', async () => {
  const room = 'names-class';
  const status = async (): Promise<RoomStatus> => t.status(room);
  const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> => pollUntil(what, probe, timeoutMs, () => lastLines(workers, 15), 100);
  for (const name of ['w0', 'w1', 'w2']) workers.push(spawnNodeWorker(t.server.url, room, codeFor(room), name));
  await waitFor('three workers', async () => (await status()).members.length === 3, 90_000);
  // 128 a worker: an epoch of the 53,280 training examples in about 139 steps of three.
  assert.equal((await post(`/api/rooms/${room}/start`, { task: 'names', epochs: 2, batchSizePerWorker: 128, warmupSteps: 20, saveEverySteps: 1_000, resumeFrom: 'none' })).status, 200);
  await waitFor('30 steps', async () => (await status()).step >= 30, 180_000);

  workers.push(spawnNodeWorker(t.server.url, room, codeFor(room), 'w3'));
  const joined = await waitFor('the joiner training', async () => {
    const s = await status();
    return s.members.length === 4 && s.members.every((m) => m.step > 0) && s;
  }, 120_000);

  const lost = workers.find((w) => w.name === 'w1')!;
  await waitFor('20 steps with four', async () => (await status()).step >= joined.step + 20, 120_000);
  lost.child.kill('SIGKILL');
  await waitFor('three members again', async () => (await status()).members.length === 3, 60_000);

  const done = await waitFor('the run to finish', async () => {
    const s = await status();
    return s.state === 'done' && s;
  }, 600_000);
  assert.equal(done.consistency.mismatches, 0, lastLines(workers, 20));
  assert.ok(done.consistency.checks > 0);
  // Every survivor, the joiner too, logs the class's account of both epochs (part of the
  // replicated state, whoever was rank 0 when w1 died): exactly the training split's size.
  for (const survivor of workers.filter((w) => w !== lost)) {
    for (const epoch of [0, 1]) {
      const line = survivor.output.find((l) => l.includes(`epoch ${epoch}: `) && l.includes('examples trained'));
      assert.ok(line, `${survivor.name} logged epoch ${epoch}:\n${lastLines([survivor], 30)}`);
      assert.match(line, new RegExp(`epoch ${epoch}: ${NAMES_COUNTS.trainExamples} examples trained;`), `${survivor.name}: each name's characters once per epoch`);
    }
  }
  // Held out: nats per character, no accuracy for a language model.
  const metrics = (await (await fetch(`${t.server.url}/api/rooms/${room}/metrics`, AS_TEACHER)).json()) as RoomMetrics;
  const evaluations = metrics.evaluations.filter((e) => e.epoch <= 1);
  assert.deepEqual(evaluations.map((e) => e.epoch), [0, 1]);
  assert.ok(evaluations.every((e) => e.accuracy === null), 'no accuracy for a next-symbol task');
  const [first, second] = evaluations.map((e) => e.testLoss) as [number, number];
  assert.ok(first < Math.log(28) && second < first, `held-out nats per character ${first} -> ${second}`);
  assert.equal(done.metrics.testLoss, second);
  assert.equal(done.metrics.accuracy, null);
  const losses = metrics.history.map((p) => p.loss);
  assert.ok(losses.at(-1)! < losses[0]! - 0.5, `training loss ${losses[0]} -> ${losses.at(-1)}`);
  for (const w of workers) assert.ok(!w.output.some((l) => /ERR_BAD_DATA|Error:/.test(l)), lastLines([w], 20));
});
