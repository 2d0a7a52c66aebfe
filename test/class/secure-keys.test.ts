/**
 * Secure aggregation through the real server: the key relay validates at the edge (the run
 * must be secure, the sender in the current generation, one key per generation, a key of the
 * right shape) and hands every good key to the whole room; the start config refuses fp16
 * with masks and turns masking on by default for the class's own data; and real Node
 * workers train a secure run in lock-step, holding while only two are in the ring (the sum
 * of two would tell each the other's gradient) until a third joins; a fourth is admitted
 * mid-run with fresh keys; one killed mid-run is trained around with fresh keys again; and
 * then through the hub, which sums nothing but masked words.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { AS_TEACHER, codeFor, hubKeyOf, join, nextEvent, startTestRun, useTestServer, type TestSocket } from '../support/server';
import { lastLines, pollUntil, spawnNodeWorker, type SpawnedWorker } from '../support/processes';
import type { AckResult, RoomMetrics, RoomStatus } from '../../shared/protocol';
import { makeKeyPair } from '../../shared/secagg/pair-keys';

const t = useTestServer();
const workers: SpawnedWorker[] = [];
after(() => {
  for (const w of workers) w.child.kill('SIGKILL');
});

function sendKey(socket: TestSocket, key: unknown): Promise<AckResult<Record<string, never>>> {
  return new Promise((resolve) => (socket.emit as (e: string, k: unknown, ack: (r: AckResult<Record<string, never>>) => void) => void)('secagg:key', key, resolve));
}

const codeOf = (r: AckResult<object>): string | null => (r.ok ? null : r.error.code);

function post(path: string, body: unknown): Promise<Response> {
  return fetch(`${t.server.url}${path}`, { method: 'POST', headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

test('the key relay: checked at the edge, one key per member, run and generation, heard by the whole room', async () => {
  const { publicKey } = await makeKeyPair();
  // Not a secure run: nothing to relay.
  const plain = await t.students('keys-plain', ['p0', 'p1', 'p2']);
  await startTestRun(t.server, 'keys-plain', plain.students[0]!, { data: 'dataset', maxSteps: 1 });
  const plainRing = await t.status('keys-plain');
  assert.equal(codeOf(await sendKey(plain.students[0]!, { run: plainRing.run, generation: plainRing.generation, publicKey })), 'ERR_BAD_STATE');

  const { students, ids } = await t.students('keys', ['k0', 'k1', 'k2']);
  const start = await startTestRun(t.server, 'keys', students[0]!, { data: 'dataset', secureAggregation: true, maxSteps: 1 });
  assert.equal(start.config.secureAggregation, true);
  const { generation, run } = await t.status('keys');
  const heard = students.map((s) => nextEvent(s, 'secagg:key'));
  assert.deepEqual(await sendKey(students[1]!, { run, generation, publicKey }), { ok: true });
  for (const k of await Promise.all(heard)) assert.deepEqual(k, { run, generation, publicKey, member: ids[1] });
  // A second key for the same ring, a stale generation or run, a malformed key, a stranger.
  assert.equal(codeOf(await sendKey(students[1]!, { run, generation, publicKey })), 'ERR_BAD_REQUEST');
  assert.equal(codeOf(await sendKey(students[2]!, { run, generation: generation - 1, publicKey })), 'ERR_STALE_GENERATION');
  assert.equal(codeOf(await sendKey(students[2]!, { run: run - 1, generation, publicKey })), 'ERR_STALE_RUN');
  assert.equal(codeOf(await sendKey(students[2]!, { run, generation, publicKey: 'not a key' })), 'ERR_BAD_REQUEST');
  assert.equal(codeOf(await sendKey(students[2]!, { run, generation, publicKey, extra: 1 })), 'ERR_BAD_REQUEST');
  // A key of the right length that is no point of P-256 (issue 38: before, the server relayed
  // it, and every partner failed its key agreement and left as "failed"): refused, and the
  // next key the room hears is an honest one.
  const offCurve = Buffer.from(publicKey, 'base64');
  offCurve.writeUInt8(offCurve.readUInt8(64) ^ 1, 64);
  const honest = nextEvent(students[0]!, 'secagg:key');
  assert.equal(codeOf(await sendKey(students[2]!, { run, generation, publicKey: offCurve.toString('base64') })), 'ERR_BAD_DATA');
  assert.equal(codeOf(await sendKey(students[2]!, { run, generation, publicKey: Buffer.alloc(65, 4).toString('base64') })), 'ERR_BAD_DATA');
  const other = await makeKeyPair();
  assert.deepEqual(await sendKey(students[2]!, { run, generation, publicKey: other.publicKey }), { ok: true });
  assert.deepEqual(await honest, { run, generation, publicKey: other.publicKey, member: ids[2] }, 'nothing of the bad keys was relayed');
  const stranger = await t.client('keys');
  assert.equal(codeOf(await sendKey(stranger, { run, generation, publicKey })), 'ERR_NOT_IN_ROOM');
  // The room is untouched by all of it.
  const s = await t.status('keys');
  assert.equal(s.members.length, 3);
  assert.equal(s.generation, generation);
  // A new run on the same ring (the same generation number) takes new keys from everyone.
  assert.equal((await post('/api/rooms/keys/stop', {})).status, 200);
  // These members are sockets: the chief reports the stop as a worker would.
  students[0]!.emit('worker:finished', { run, generation, step: 0, reason: 'stopped' });
  await pollUntil('the run to end', async () => (await t.status('keys')).state === 'done', 10_000);
  await startTestRun(t.server, 'keys', students[0]!, { data: 'dataset', secureAggregation: true, maxSteps: 1 });
  const next = await t.status('keys');
  assert.equal(next.generation, generation);
  assert.equal(next.run, run + 1);
  assert.deepEqual(await sendKey(students[1]!, { run: run + 1, generation, publicKey }), { ok: true });
});

test('one key per member and ring, whatever its connection: a member that reconnects cannot publish a second key for the same ring (issue 38)', async () => {
  const room = 'keys-reconnect';
  const sockets = [await t.client(room), await t.client(room), await t.client(room)];
  const joined: Array<{ memberId: string; memberToken: string }> = [];
  for (const [i, s] of sockets.entries()) {
    const j = await join(s, room, `r${i}`);
    assert.ok(j.ok, JSON.stringify(j));
    joined.push(j);
  }
  await startTestRun(t.server, room, sockets[0]!, { data: 'dataset', secureAggregation: true, maxSteps: 1 });
  const { generation, run } = await t.status(room);
  const first = await makeKeyPair();
  assert.deepEqual(await sendKey(sockets[1]!, { run, generation, publicKey: first.publicKey }), { ok: true });
  // The same member on a new connection (a network blip): it keeps its place in the same ring...
  const again = await t.client(room);
  const back = await new Promise<AckResult<{ memberId: string }>>((resolve) =>
    again.emit('room:join', { room, name: 'r1', kind: 'node', backend: 'cpu', rejoin: { memberId: joined[1]!.memberId, memberToken: joined[1]!.memberToken } }, resolve),
  );
  assert.ok(back.ok, JSON.stringify(back));
  assert.equal((await t.status(room)).generation, generation, 'the same ring');
  // ...and cannot give its partners a second key for it (before, the check was per connection).
  const second = await makeKeyPair();
  assert.equal(codeOf(await sendKey(again, { run, generation, publicKey: second.publicKey })), 'ERR_BAD_REQUEST');
});

test('the start config: masks on by default for own data, off for the digits, and never with fp16', async () => {
  await t.students('keys-config', ['c0', 'c1', 'c2']);
  const fp16 = await post('/api/rooms/keys-config/start', { secureAggregation: true, wire: 'fp16' });
  assert.equal(fp16.status, 400);
  assert.match(await fp16.text(), /fp16 wire cannot carry/);
  // Own data without saying: masked. (The run finds no drawings and ends; the config is what counts here.)
  assert.equal((await post('/api/rooms/keys-config/start', { data: 'own', classes: ['cat', 'sun'], maxSteps: 1 })).status, 200);
  assert.equal((await t.status('keys-config')).config?.secureAggregation, true);
});

test('Node workers train a secure run in lock-step: two hold for a third (and stop when told), a fourth is admitted, one is killed, and the hub sums masked words', async () => {
  const room = 'secure-workers';
  const status = async (): Promise<RoomStatus> => t.status(room);
  const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> => pollUntil(what, probe, timeoutMs, () => lastLines(workers, 15), 100);
  for (const name of ['s0', 's1']) workers.push(spawnNodeWorker(t.server.url, room, codeFor(room), name));
  await waitFor('two workers', async () => (await status()).members.length === 2, 90_000);
  assert.equal((await post(`/api/rooms/${room}/start`, { model: 'mlp', dataset: 'mnist-10k', secureAggregation: true, maxSteps: 5_000, resumeFrom: 'none' })).status, 200);
  await waitFor('both workers holding for a third', async () => workers.every((w) => w.output.some((l) => l.includes('secure aggregation needs 3 members'))), 60_000);
  assert.equal((await status()).step, 0, 'no step with two members');
  // The teacher's Stop ends a run that holds, though nobody steps to vote it.
  assert.equal((await post(`/api/rooms/${room}/stop`, {})).status, 200);
  await waitFor('the held run stopped', async () => (await status()).state === 'done', 30_000);
  for (const w of workers) w.output.length = 0;
  assert.equal((await post(`/api/rooms/${room}/start`, { model: 'mlp', dataset: 'mnist-10k', secureAggregation: true, maxSteps: 5_000, resumeFrom: 'none' })).status, 200);
  await waitFor('both holding again', async () => workers.every((w) => w.output.some((l) => l.includes('secure aggregation needs 3 members'))), 60_000);
  workers.push(spawnNodeWorker(t.server.url, room, codeFor(room), 's2'));
  const trained = await waitFor('ten secure steps with three', async () => {
    const s = await status();
    return s.step >= 10 && s;
  }, 120_000);
  assert.equal(trained.members.length, 3);
  // A fourth joins the training class the usual way (an admission voted at a step boundary): fresh keys, 3 partners each.
  workers.push(spawnNodeWorker(t.server.url, room, codeFor(room), 's3'));
  const joinedAt = await waitFor('the fourth admitted', async () => {
    const s = await status();
    return s.members.length === 4 && s.step;
  }, 120_000);
  const four = await waitFor('five secure steps with four', async () => {
    const s = await status();
    return s.step >= joinedAt + 5 && s.members.every((m) => m.step >= joinedAt) && s;
  }, 120_000);
  assert.deepEqual(four.dropped, []);
  assert.equal(four.consistency.mismatches, 0, lastLines(workers, 25));
  assert.ok(four.consistency.checks > 0);
  await waitFor('every worker masking with its 3 partners', async () => workers.every((w) => w.output.some((l) => l.includes('masks with 3 of 3 classmates'))), 30_000);
  // A student lost mid-run (kill -9): the step is redone on the next generation with fresh keys, and the class goes on.
  const lost = workers[1]!;
  lost.child.kill('SIGKILL');
  const lostAt = (await status()).step;
  const three = await waitFor('five secure steps after the loss', async () => {
    const s = await status();
    return s.members.length === 3 && s.step >= lostAt + 5 && s;
  }, 120_000);
  assert.equal(three.consistency.mismatches, 0);
  const survivors = workers.filter((w) => w !== lost);
  assert.ok(survivors.every((w) => w.output.filter((l) => l.includes('masks with 2 of 2 classmates')).length >= 1));
  assert.equal((await post(`/api/rooms/${room}/stop`, {})).status, 200);
  // The masked sums trained the model: the loss fell.
  const done = await waitFor('the run to finish', async () => {
    const s = await status();
    return s.state === 'done' && s;
  }, 120_000);
  assert.equal(done.config?.secureAggregation, true);
  const metrics = (await (await fetch(`${t.server.url}/api/rooms/${room}/metrics`, AS_TEACHER)).json()) as RoomMetrics;
  const losses = metrics.history.map((p) => p.loss);
  assert.ok(losses.at(-1)! < losses[0]!, `loss ${losses[0]} -> ${losses.at(-1)}`);
  for (const w of workers) assert.ok(!w.output.some((l) => l.includes('ERR_SECAGG_MISMATCH')), lastLines([w], 20));

  // Again through the hub: it sums the three students' masked words and sends the sum back.
  const hub = spawn(process.execPath, ['--import', 'tsx', 'node-worker/hub.ts', '--url', t.server.url, '--room', room, '--name', 'the-hub'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, JOIN_CODE: codeFor(room), HUB_KEY: hubKeyOf(room) },
  });
  const hubOutput: string[] = [];
  for (const stream of [hub.stdout, hub.stderr]) stream.on('data', (d: Buffer) => hubOutput.push(...d.toString().split('\n').filter(Boolean)));
  workers.push({ name: 'the-hub', child: hub, output: hubOutput });
  await waitFor('the hub in the room', async () => (await status()).hub !== null, 60_000);
  workers.push(spawnNodeWorker(t.server.url, room, codeFor(room), 's4'));
  await waitFor('four members again', async () => (await status()).members.length === 4, 90_000);
  assert.equal((await post(`/api/rooms/${room}/start`, { model: 'mlp', dataset: 'mnist-10k', secureAggregation: true, allreduce: 'hub', maxSteps: 5_000, resumeFrom: 'none' })).status, 200);
  const viaHub = await waitFor('secure steps summed by the hub', async () => {
    const s = await status();
    return s.members.length === 4 && s.members.every((m) => m.collective?.algorithm === 'hub') && s.step >= 4 && s;
  }, 120_000);
  assert.deepEqual(viaHub.dropped, []);
  assert.equal(viaHub.consistency.mismatches, 0);
  assert.ok(!hubOutput.some((l) => /non-finite|malformed|ERR_/.test(l)), hubOutput.slice(-10).join('\n'));
  assert.equal((await post(`/api/rooms/${room}/stop`, {})).status, 200);
});
