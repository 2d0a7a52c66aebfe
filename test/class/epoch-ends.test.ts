/**
 * Local steps across every epoch's end, through the real server and its data service: three
 * Node workers train the 10k subset in rounds of 83 (its 8,000 digits make 84 steps of 96, so
 * each epoch ends one step into a round, and the first round of the next epoch reads almost a
 * whole epoch before the chief reports it), and the run finishes: both epochs, both
 * evaluations, nobody refused examples. Then the same with a student joining in the middle
 * of a round and another killed in the middle of one: the class still finishes every epoch.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { AS_TEACHER, startTestServer } from '../support/server';
import { classRoom, type ClassRoom } from '../support/class-room';
import { lastLines } from '../support/processes';
import type { RunningServer } from '../../signaling-server/server';
import type { RoomStatus } from '../../shared/protocol';

/** mnist-10k's 8,000 training digits at 3 × 32: 83 whole steps and one of 32 an epoch. */
const STEPS_PER_EPOCH = 84;
const H = 83;

let server: RunningServer;
before(async () => {
  server = await startTestServer();
});
const rooms: ClassRoom[] = [];
after(async () => {
  for (const r of rooms) for (const w of r.workers) w.child.kill('SIGKILL');
  await server.close();
});

/** Fails with the workers' last lines when any of them was refused examples or waited for them. */
function assertNeverRefused(klass: ClassRoom): void {
  for (const w of klass.workers) {
    const refused = w.output.filter((l) => /ERR_DATA_BUDGET|HTTP 429|waiting for the data service/.test(l));
    assert.deepEqual(refused, [], `${w.name} was refused examples:\n${lastLines([w], 15)}`);
  }
}

/** The run's end, asserted done without an error (the workers' last lines say why otherwise). */
async function finished(klass: ClassRoom, timeoutMs: number): Promise<RoomStatus> {
  const done = await klass.waitFor('the run to finish', async () => {
    const s = await klass.status();
    return (s.state === 'done' || s.lastError !== null) && s;
  }, timeoutMs);
  assert.equal(done.lastError, null, lastLines(klass.workers, 15));
  assert.equal(done.state, 'done');
  return done;
}

interface Metrics {
  history: Array<{ step: number }>;
  evaluations: Array<{ epoch: number; step: number; accuracy: number | null }>;
}

async function metricsOf(room: string): Promise<Metrics> {
  return (await (await fetch(`${server.url}/api/rooms/${room}/metrics`, AS_TEACHER)).json()) as Metrics;
}

/** Every round of the run is whole: `H` steps, or fewer where an epoch (an evaluation's step) or the run ends. */
function assertWholeRounds(metrics: Metrics, lastStep: number): void {
  const ends = new Set([...metrics.evaluations.map((e) => e.step), lastStep]);
  let from = 0;
  for (const { step } of metrics.history) {
    assert.ok(step - from === H || (step - from < H && ends.has(step)), `a round of steps ${from}-${step - 1}, cut short (rounds end at ${metrics.history.map((p) => p.step).join(', ')}; epochs end at ${[...ends].join(', ')})`);
    from = step;
  }
}

test('three workers in rounds of 83 on the 10k subset cross both epochs’ ends, each one step into a round, and finish', { timeout: 300_000 }, async () => {
  const klass = classRoom(() => server, 'epoch-ends');
  rooms.push(klass);
  for (const name of ['e0', 'e1', 'e2']) klass.spawn(name);
  await klass.waitFor('three workers', async () => (await klass.status()).members.length === 3, 120_000);
  assert.equal(await klass.teacher('start', { model: 'mlp', dataset: 'mnist-10k', sync: 'local-steps', localSteps: H, epochs: 2, balanceShares: false, resumeFrom: 'none' }), 200);
  const done = await finished(klass, 240_000);
  assert.equal(done.step, 2 * STEPS_PER_EPOCH);
  // Rounds of 83 and 1 in each epoch: a round ends with its epoch.
  assert.equal(done.round, 4);
  const metrics = await metricsOf('epoch-ends');
  assert.deepEqual(metrics.history.map((p) => p.step), [83, 84, 167, 168]);
  assert.deepEqual(metrics.evaluations.map((e) => [e.epoch, e.step]), [[0, 84], [1, 168]], 'each epoch scored once, at its end');
  assert.ok(metrics.evaluations[1]!.accuracy! > 0.8, `held-out accuracy ${metrics.evaluations[1]!.accuracy}`);
  assert.equal(new Set(done.members.map((m) => m.weightsHash)).size, 1, 'the replicas end bit-identical');
  assertNeverRefused(klass);
});

test('a student joining in the middle of a round and another killed in the middle of one: every round stays whole, and the class finishes every epoch', { timeout: 400_000 }, async () => {
  const room = 'epoch-ends-churn';
  const klass = classRoom(() => server, room);
  rooms.push(klass);
  // Every local step holds the thread 60 ms longer: a round lasts seconds, long enough to join and to die in.
  const slow = ['--hold-compute-ms', '60'];
  for (const name of ['c0', 'c1', 'c2']) klass.spawn(name, slow);
  await klass.waitFor('three workers', async () => (await klass.status()).members.length === 3, 120_000);
  assert.equal(await klass.teacher('start', { model: 'mlp', dataset: 'mnist-10k', sync: 'local-steps', localSteps: H, epochs: 5, balanceShares: false, resumeFrom: 'none' }), 200);
  await klass.waitFor('the first round', async () => (await klass.status()).round >= 1, 120_000);
  klass.spawn('c3', slow);
  const waiting = await klass.waitFor('the joiner waiting while a round trains', async () => {
    const s = await klass.status();
    return s.waiting.some((m) => m.name === 'c3') && s;
  }, 120_000);
  const admitted = await klass.waitFor('the joiner training', async () => {
    const s = await klass.status();
    return s.members.some((m) => m.name === 'c3' && m.step > waiting.step) && s;
  }, 120_000);
  // Killed in the middle of a round (seconds after the last one ended): the survivors finish it, sum what they trained and go on.
  const before = admitted.round;
  await klass.waitFor('a round with four', async () => (await klass.status()).round >= before + 1, 120_000);
  await new Promise((r) => setTimeout(r, 2_500));
  const victim = klass.workers.find((w) => w.name === 'c1')!;
  victim.child.kill('SIGKILL');
  const done = await finished(klass, 300_000);
  const metrics = await metricsOf(room);
  assert.deepEqual(metrics.evaluations.map((e) => e.epoch), [0, 1, 2, 3, 4], 'every epoch scored once');
  assertWholeRounds(metrics, done.step);
  const survivors = klass.workers.filter((w) => w !== victim);
  assert.ok(survivors.every((w) => w.output.some((l) => /summed the \d+ examples the survivors trained before a member was lost/.test(l))), `the loss came in the middle of a round:\n${lastLines(survivors, 10)}`);
  assert.ok(done.members.some((m) => m.name === 'c3'), 'the joiner trained to the end');
  assert.equal(done.members.length, 3);
  assert.equal(new Set(done.members.map((m) => m.weightsHash)).size, 1, 'the replicas end bit-identical');
  assertNeverRefused(klass);
});
