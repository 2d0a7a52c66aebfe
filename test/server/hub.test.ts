/**
 * The hub member (kind 'hub') over real sockets: it stands apart from the ring in the
 * generation broadcast and the room API, one per room, relays signals, sends no training
 * reports, leaves without ending a run, and takes part in ring:evict's trust rule both ways.
 * And `npm start` refusing a bad HUB value.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AckResult, EvictRequest, JoinAccepted, TrainStart } from '../../shared/protocol';
import { hubKeyOf, join, nextEvent, TEST_TOKEN, useTestServer, type TestSocket } from '../support/server';

const testServer = useTestServer();
const { client, status } = testServer;

function joinHub(socket: TestSocket, room: string, name = 'hub'): Promise<AckResult<JoinAccepted>> {
  return new Promise((resolve) => socket.emit('room:join', { room, name, kind: 'hub', backend: 'cpu', hubKey: hubKeyOf(room) }, resolve));
}

function evict(socket: TestSocket, request: EvictRequest): Promise<AckResult<{ evicted: string[] }>> {
  return new Promise((resolve) => socket.emit('ring:evict', request, resolve));
}

async function startRun(room: string, first: TestSocket): Promise<TrainStart> {
  const started = nextEvent(first, 'train:start');
  const res = await fetch(`${testServer.server.url}/api/rooms/${room}/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKEN}` },
    body: JSON.stringify({ maxSteps: 100, resumeFrom: 'none' }),
  });
  assert.equal(res.status, 200);
  return started;
}

/** Students `names` in `room`, then a hub; their sockets and member ids. */
async function classWithHub(room: string, names: string[]): Promise<{ students: TestSocket[]; ids: string[]; hub: TestSocket; hubId: string }> {
  const { students, ids } = await testServer.students(room, names);
  const hub = await client(room);
  const withHub = nextEvent(hub, 'ring:generation', (g) => g.hub != null);
  const j = await joinHub(hub, room);
  assert.ok(j.ok, JSON.stringify(j));
  await withHub;
  return { students, ids, hub, hubId: j.memberId };
}

test('a hub joins: the generation names it apart from the ring, the API shows it, a student stays chief', async () => {
  const room = 'hubjoin';
  const ada = await client(room);
  const ja = await join(ada, room, 'ada');
  assert.ok(ja.ok);
  const before = await status(room);
  assert.equal(before.hub, null);

  const hub = await client(room);
  const broadcast = nextEvent(ada, 'ring:generation', (g) => g.hub != null);
  const hubHears = nextEvent(hub, 'ring:generation', (g) => g.hub != null);
  const j = await joinHub(hub, room, 'the hub');
  assert.ok(j.ok);
  assert.match(j.memberToken, /^[0-9a-f]{48}$/);
  const g = await broadcast;
  assert.equal((await hubHears).generation, g.generation, 'the hub hears the generation it joined');
  assert.equal(g.generation, before.generation + 1);
  assert.deepEqual(g.members.map((m) => m.name), ['ada']);
  assert.deepEqual([g.hub?.id, g.hub?.name, g.hub?.kind, g.hub?.rank, g.hub?.connected], [j.memberId, 'the hub', 'hub', null, true]);

  const s = await status(room);
  assert.equal(s.hub?.id, j.memberId);
  assert.equal(s.chief, ja.memberId);
  assert.deepEqual(s.members.map((m) => m.name), ['ada']);
  assert.deepEqual(s.waiting, []);
  assert.deepEqual([s.events.at(-1)?.kind, s.events.at(-1)?.members], ['hub-joined', ['the hub']]);

  // Its token reads the room, as any member's does.
  const asHub = await fetch(`${testServer.server.url}/api/rooms/${room}`, { headers: { authorization: `Bearer ${j.memberToken}` } });
  assert.equal(asHub.status, 200);

  // A student joining later comes after the hub's index but is a ring member, and the hub stays.
  const bob = await client(room);
  const jb = await join(bob, room, 'bob');
  assert.ok(jb.ok && jb.index > j.index);
  const after = await status(room);
  assert.deepEqual([after.members.map((m) => m.name), after.hub?.id], [['ada', 'bob'], j.memberId]);
});

test('a second hub is refused with ERR_HUB_TAKEN and the room is unchanged', async () => {
  const room = 'hubtaken';
  const { hubId } = await classWithHub(room, ['ada']);
  const before = await status(room);
  const other = await client(room);
  const refused = await joinHub(other, room, 'hub 2');
  assert.deepEqual(refused.ok ? 'accepted' : refused.error.code, 'ERR_HUB_TAKEN');
  const after = await status(room);
  assert.deepEqual([after.generation, after.hub?.id, after.members.length, after.events.length], [before.generation, hubId, 1, before.events.length]);
  // The connection may still join as a student.
  assert.ok((await join(other, room, 'cy')).ok);
});

test('a hub alone cannot start a run (ERR_NO_WORKERS)', async () => {
  const room = 'hubalone';
  const hub = await client(room);
  assert.ok((await joinHub(hub, room)).ok);
  const res = await fetch(`${testServer.server.url}/api/rooms/${room}/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKEN}` },
    body: JSON.stringify({ resumeFrom: 'none' }),
  });
  assert.equal(res.status, 409);
  const body = (await res.json()) as { error: { code: string } };
  assert.equal(body.error.code, 'ERR_NO_WORKERS');
  assert.equal((await status(room)).state, 'idle');
});

test('the hub relays signals to ring members and hears theirs, but its training reports are refused and change nothing', async () => {
  const room = 'hubreports';
  const { students, ids, hub, hubId } = await classWithHub(room, ['ada', 'bob']);
  const [ada] = students as [TestSocket, TestSocket];
  const start = await startRun(room, ada);

  const toAda = nextEvent(ada, 'signal:relay');
  const sent = await new Promise<AckResult<Record<string, never>>>((resolve) => hub.emit('signal:relay', { to: ids[0]!, linkId: 'hub-0', data: { type: 'offer', sdp: 'x' } }, resolve));
  assert.ok(sent.ok);
  assert.deepEqual(await toAda, { from: hubId, linkId: 'hub-0', data: { type: 'offer', sdp: 'x' } });
  const toHub = nextEvent(hub, 'signal:relay');
  const back = await new Promise<AckResult<Record<string, never>>>((resolve) => ada.emit('signal:relay', { to: hubId, linkId: 'hub-0', data: { type: 'answer', sdp: 'y' } }, resolve));
  assert.ok(back.ok);
  assert.deepEqual(await toHub, { from: ids[0], linkId: 'hub-0', data: { type: 'answer', sdp: 'y' } });

  const before = await status(room);
  const refused = nextEvent(hub, 'server:error');
  hub.emit('worker:progress', {
    run: start.run, generation: before.generation, step: 3, epoch: 0, loss: 0.5, trainAccuracy: 0.5, examplesPerSec: 100, weightsHash: '0123456789abcdef', totalSteps: 100,
    computeMs: 10, batchShare: 0.5, linkMBps: 20, learningRate: 0.001, speedVsMedian: 1, hashChecked: false, hashMismatch: false,
    collective: { algorithm: 'hub', alphaMs: 0.5, betaMBps: 20, reason: 'test', timing: { dataMs: 0, computeMs: 10, readbackMs: 1, crossMs: 0, commMs: 5, applyMs: 1 } },
  });
  assert.equal((await refused).code, 'ERR_NOT_IN_ROOM');
  const finishRefused = nextEvent(hub, 'server:error');
  hub.emit('worker:finished', { run: start.run, generation: before.generation, step: 3, reason: 'failed', code: 'ERR_PEER_FAILED', message: 'lies' });
  assert.equal((await finishRefused).code, 'ERR_NOT_IN_ROOM');
  const after = await status(room);
  assert.deepEqual([after.state, after.step, after.metrics.loss, after.generation, after.hub?.step], ['training', before.step, before.metrics.loss, before.generation, 0]);
});

test('the hub leaving mid-run is a new generation without it; the run goes on', async () => {
  const room = 'hubleaves';
  const { students, hub } = await classWithHub(room, ['ada', 'bob']);
  const [ada] = students as [TestSocket, TestSocket];
  const start = await startRun(room, ada);
  const stopped = nextEvent(ada, 'train:stop', () => true, 500).then(
    () => 'stopped',
    () => 'not stopped',
  );
  const without = nextEvent(ada, 'ring:generation', (g) => g.hub === null);
  const left = await new Promise<AckResult<Record<string, never>>>((resolve) => hub.emit('room:leave', resolve));
  assert.ok(left.ok);
  const g = await without;
  assert.ok(g.generation > start.generation);
  assert.deepEqual(g.members.map((m) => m.name), ['ada', 'bob']);
  assert.equal(await stopped, 'not stopped');
  const s = await status(room);
  assert.deepEqual([s.state, s.hub, s.events.at(-1)?.kind, s.lastError], ['training', null, 'hub-left', null]);

  // A hub whose connection closes without a goodbye is gone the same way.
  const hub2 = await client(room);
  assert.ok((await joinHub(hub2, room, 'hub 2')).ok);
  const again = nextEvent(ada, 'ring:generation', (x) => x.hub === null);
  hub2.disconnect();
  await again;
  assert.deepEqual([(await status(room)).state, (await status(room)).hub], ['training', null]);
});

test('ring:evict with a hub: the hub may name any ring member; a ring member naming the hub is recorded and the hub stays; the teacher removes it', async () => {
  const room = 'hubevict';
  const { students, ids, hub, hubId } = await classWithHub(room, ['ada', 'bob', 'cy', 'dee']);
  const [ada, , , dee] = students as [TestSocket, TestSocket, TestSocket, TestSocket];
  const start = await startRun(room, ada);
  const generation = (await status(room)).generation;
  const base = { run: start.run, generation, step: 4, reason: 'non-finite', detail: 'test' } as const;

  // The hub names cy (rank 2): every rank sends to the hub, so it is believed.
  const cyGone = nextEvent(ada, 'ring:generation', (g) => g.members.length === 3);
  assert.deepEqual(await evict(hub, { ...base, member: ids[2]! }), { ok: true, evicted: [ids[2]] });
  const g = await cyGone;
  assert.deepEqual([g.members.map((m) => m.name), g.hub?.id], [['ada', 'bob', 'dee'], hubId]);
  let s = await status(room);
  assert.deepEqual(s.dropped.map((d) => [d.name, d.reason, d.reportedBy]), [['cy', 'evicted', 'hub']]);

  // dee names the hub: one student's word is recorded and answered, and the teacher's hub stays.
  const hubNotTold = nextEvent(hub, 'member:dropped', () => true, 500).then(
    () => 'told',
    () => 'not told',
  );
  assert.deepEqual(await evict(dee, { ...base, generation: g.generation, member: hubId, reason: 'length' }), { ok: true, evicted: [] });
  assert.equal(await hubNotTold, 'not told');
  s = await status(room);
  assert.deepEqual([s.state, s.hub?.id, s.generation, s.events.at(-1)?.kind, s.events.at(-1)?.members], ['training', hubId, g.generation, 'hub-accused', ['dee']]);
  assert.deepEqual(s.hubAccess, { barred: null, accusers: ['dee'], accusersNeeded: 2 });
  assert.deepEqual(s.dropped.map((d) => [d.name, d.reason, d.misbehaviour, d.reportedBy]), [['cy', 'evicted', 'non-finite', 'hub']]);

  // The teacher removes it: a generation without it follows; the run goes on.
  const hubTold = nextEvent(hub, 'member:dropped');
  const hubGone = nextEvent(ada, 'ring:generation', (x) => x.hub === null);
  const removed = await fetch(`${testServer.server.url}/api/rooms/${room}/hub`, { method: 'DELETE', headers: { authorization: `Bearer ${TEST_TOKEN}` } });
  assert.equal(removed.status, 200);
  assert.equal((await hubTold).reason, 'removed');
  const without = await hubGone;
  assert.deepEqual(without.members.map((m) => m.name), ['ada', 'bob', 'dee']);
  s = await status(room);
  assert.deepEqual([s.state, s.hub, s.events.at(-1)?.kind, s.hubAccess.barred?.by], ['training', null, 'hub-removed', 'teacher']);

  // Without a hub in the generation, naming it is refused and mutes the reporter.
  const refused = await evict(ada, { ...base, generation: without.generation, member: hubId });
  assert.equal(refused.ok ? 'accepted' : refused.error.code, 'ERR_BAD_ACCUSATION');
  assert.equal((await status(room)).generation, without.generation);
});

test('a hub naming itself is refused; a hub\'s second accepted accusation in a run evicts the hub', async () => {
  const room = 'hubliar';
  const { students, hub, hubId } = await classWithHub(room, ['ada', 'bob', 'cy']);
  const [ada] = students as [TestSocket, TestSocket, TestSocket];
  const start = await startRun(room, ada);
  let generation = (await status(room)).generation;
  const base = { run: start.run, step: 2, reason: 'duplicate', detail: 'test' } as const;

  // Naming itself is no accusation: refused with a code, nothing changes (and the hub is muted).
  const self = await evict(hub, { ...base, generation, member: hubId });
  assert.equal(self.ok ? 'accepted' : self.error.code, 'ERR_BAD_ACCUSATION');
  assert.equal((await status(room)).members.length, 3);

  // A fresh room for the allowance: the first accusation evicts the accused, the second the hub.
  const room2 = 'hubliar2';
  const c2 = await classWithHub(room2, ['ada', 'bob', 'cy']);
  const start2 = await startRun(room2, c2.students[0]!);
  generation = (await status(room2)).generation;
  const first = await evict(c2.hub, { ...base, run: start2.run, generation, member: c2.ids[0]! });
  assert.ok(first.ok);
  generation = (await status(room2)).generation;
  const hubTold = nextEvent(c2.hub, 'member:dropped');
  const second = await evict(c2.hub, { ...base, run: start2.run, generation, member: c2.ids[1]! });
  assert.deepEqual(second, { ok: true, evicted: [c2.hubId] });
  const notice = await hubTold;
  assert.ok(notice.reason === 'evicted' && notice.misbehaviour === 'accusations');
  const s = await status(room2);
  assert.deepEqual([s.state, s.hub, s.members.map((m) => m.name)], ['training', null, ['bob', 'cy']]);
});

test('npm start refuses a HUB value other than 0, 1, true or false, before it builds or listens', async () => {
  const root = path.resolve(import.meta.dirname, '../..');
  const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = execFile(
      process.execPath,
      ['--import', 'tsx', 'signaling-server/main.ts'],
      { cwd: root, env: { ...process.env, PORT: '0', HTTPS_PORT: '0', DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'webring-hub-main-')), HUB: 'yes' }, timeout: 30_000 },
      (_err, _stdout, stderr) => resolve({ code: child.exitCode, stderr }),
    );
  });
  assert.equal(result.code, 2, result.stderr);
  assert.match(result.stderr, /ERR_HUB_CONFIG: HUB must be 0, 1, true or false, got "yes"/);
});
