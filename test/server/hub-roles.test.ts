/**
 * The hub is the teacher's (issue 25), against a real server: a `kind: 'hub'` join needs the
 * room's hub key, which only the teacher's server hands out; a ring member's ring:evict of
 * the hub is recorded but removes nobody (the original attack: evict the real hub, then join
 * a fake one, fails at both steps); a majority of the ring's accusations removes it for the
 * rest of the run; the teacher removes it, and it stays out until the teacher allows a hub
 * again; the hub key is the teacher's to read; and a real HubMember that the server let go
 * comes back by itself, while one the teacher removed waits to be allowed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { io as connect } from 'socket.io-client';
import type { AckResult, EvictRequest, HubKeyInfo, JoinAccepted, RoomStatus, TrainStart } from '../../shared/protocol';
import { HubMember } from '../../shared/training/hub-member';
import type { PeerFactory } from '../../shared/network/peer';
import { AS_TEACHER, codeFor, hubKeyOf, join, nextEvent, startTestRun, TEST_TOKEN, useTestServer, type TestSocket } from '../support/server';

const testServer = useTestServer();
const { client, status } = testServer;

function joinAsHub(socket: TestSocket, room: string, hubKey?: string, name = 'hub'): Promise<AckResult<JoinAccepted>> {
  return new Promise((resolve) => socket.emit('room:join', { room, name, kind: 'hub', backend: 'cpu', ...(hubKey === undefined ? {} : { hubKey }) }, resolve));
}

function evict(socket: TestSocket, request: EvictRequest): Promise<AckResult<{ evicted: string[] }>> {
  return new Promise((resolve) => socket.emit('ring:evict', request, resolve));
}

const codeOf = (r: AckResult<unknown>): string => (r.ok ? 'accepted' : r.error.code);

const teacher = (method: string) => ({ method, headers: { authorization: `Bearer ${TEST_TOKEN}` } });

const startRun = (room: string, first: TestSocket): Promise<TrainStart> => startTestRun(testServer.server, room, first, { maxSteps: 100, resumeFrom: 'none' });

/** Students `names`, then the real hub (with the key); a run started. */
async function trainingClassWithHub(room: string, names: string[]) {
  const { students, ids } = await testServer.students(room, names);
  const hub = await client(room);
  const j = await joinAsHub(hub, room, hubKeyOf(room), 'teacher-hub');
  assert.ok(j.ok, JSON.stringify(j));
  const start = await startRun(room, students[0]!);
  const generation = (await status(room)).generation;
  return { students, ids, hub, hubId: j.memberId, start, generation };
}

test("a student's kind:'hub' join without the key, or with a wrong one, is refused with ERR_HUB_NOT_AUTHORIZED and changes nothing; with the key it joins", async () => {
  const room = 'hubkey-join';
  const ada = await client(room);
  assert.ok((await join(ada, room, 'ada')).ok);
  const before = await status(room);

  const mallory = await client(room);
  for (const key of [undefined, '0'.repeat(64), hubKeyOf('another-room')]) {
    const refused = await joinAsHub(mallory, room, key, 'not the hub');
    assert.equal(codeOf(refused), 'ERR_HUB_NOT_AUTHORIZED', `key ${key}`);
    assert.ok(!refused.ok && refused.error.field === 'hubKey');
  }
  // A key that is not even 64 hex digits is a malformed request.
  assert.equal(codeOf(await joinAsHub(mallory, room, 'guess')), 'ERR_BAD_REQUEST');
  const after = await status(room);
  assert.deepEqual([after.hub, after.generation, after.members.length, after.events.length], [null, before.generation, 1, before.events.length]);

  // The same connection may still join as a student; the teacher's hub, with the key, joins as the hub.
  assert.ok((await join(mallory, room, 'mallory')).ok);
  const hub = await client(room);
  const joined = await joinAsHub(hub, room, hubKeyOf(room), 'teacher-hub');
  assert.ok(joined.ok);
  assert.equal((await status(room)).hub?.id, joined.memberId);

  // Its reconnect needs only its member token, as any member's does.
  const again = await client(room);
  const back = await new Promise<AckResult<JoinAccepted>>((resolve) =>
    again.emit('room:join', { room, name: 'teacher-hub', kind: 'hub', backend: 'cpu', rejoin: { memberId: joined.memberId, memberToken: joined.memberToken } }, resolve),
  );
  assert.ok(back.ok && back.memberId === joined.memberId);
});

test('the original attack: a ring member evicts the real hub, then a second tab joins as the hub; both fail, and training goes on with the real hub', async () => {
  const room = 'hub-takeover';
  const { students, ids, hubId, hub, start, generation } = await trainingClassWithHub(room, ['ada', 'bob', 'mallory']);
  const mallory = students[2]!;
  const hubNotTold = nextEvent(hub, 'member:dropped', () => true, 500).then(
    () => 'told',
    () => 'not told',
  );

  // Step 1: mallory (a ring member, so the hub is one of its senders) names the hub.
  const accused = await evict(mallory, { run: start.run, generation, member: hubId, step: 3, reason: 'non-finite', detail: 'made up' });
  assert.deepEqual(accused, { ok: true, evicted: [] }, 'answered, and nobody evicted');
  assert.equal(await hubNotTold, 'not told');
  let s = await status(room);
  assert.deepEqual([s.hub?.id, s.generation, s.state], [hubId, generation, 'training']);
  assert.deepEqual(s.hubAccess.accusers, ['mallory']);
  assert.deepEqual([s.events.at(-1)?.kind, s.events.at(-1)?.members], ['hub-accused', ['mallory']]);
  assert.match(s.events.at(-1)!.detail, /1 of the 2 ring members/);
  // Saying it again is the same one accuser.
  assert.deepEqual(await evict(mallory, { run: start.run, generation, member: hubId, step: 4, reason: 'length', detail: 'again' }), { ok: true, evicted: [] });
  s = await status(room);
  assert.deepEqual([s.hub?.id, s.hubAccess.accusers], [hubId, ['mallory']]);
  // Accusing the hub cost mallory none of its allowance: its accusation of its real sender is judged as before.
  assert.equal(s.dropped.length, 0);

  // Step 2: a second tab joins as the hub: without the key it is refused; the role is the real hub's anyway.
  const fake = await client(room);
  assert.equal(codeOf(await joinAsHub(fake, room, undefined, 'fake hub')), 'ERR_HUB_NOT_AUTHORIZED');
  assert.equal(codeOf(await joinAsHub(fake, room, 'f'.repeat(64), 'fake hub')), 'ERR_HUB_NOT_AUTHORIZED');
  s = await status(room);
  assert.deepEqual([s.hub?.id, s.hub?.name, s.members.map((m) => m.id), s.state, s.generation], [hubId, 'teacher-hub', ids, 'training', generation]);
});

test('accusations from a majority of the ring remove the hub, which may not rejoin until the run ends', async () => {
  const room = 'hub-majority';
  const { students, hubId, hub, start, generation } = await trainingClassWithHub(room, ['ada', 'bob', 'cy']);
  const [ada, bob] = students as [TestSocket, TestSocket, TestSocket];
  const base = { run: start.run, generation, member: hubId, step: 5, detail: 'test' } as const;
  assert.deepEqual(await evict(ada, { ...base, reason: 'non-finite' }), { ok: true, evicted: [] });

  const hubTold = nextEvent(hub, 'member:dropped');
  const without = nextEvent(ada, 'ring:generation', (g) => g.hub === null);
  assert.deepEqual(await evict(bob, { ...base, reason: 'length' }), { ok: true, evicted: [hubId] });
  const notice = await hubTold;
  assert.ok(notice.reason === 'evicted' && notice.misbehaviour === 'length', JSON.stringify(notice));
  assert.deepEqual((await without).members.map((m) => m.name), ['ada', 'bob', 'cy']);
  let s = await status(room);
  assert.deepEqual([s.state, s.hub, s.events.at(-1)?.kind, s.hubAccess.barred?.by], ['training', null, 'hub-removed', 'server']);
  assert.deepEqual(s.dropped.map((d) => [d.name, d.reason, d.reportedBy]), [['teacher-hub', 'evicted', 'ada, bob']]);

  // Even with the key, the hub is refused for the rest of this run.
  assert.equal(codeOf(await joinAsHub(hub, room, hubKeyOf(room), 'teacher-hub')), 'ERR_HUB_REMOVED');

  // The run ends (the chief reports its last step): the server's bar ends with it.
  const done = nextEvent(ada, 'ring:generation', () => true, 500).catch(() => null);
  ada.emit('worker:finished', { run: start.run, generation: s.generation, step: 6, reason: 'stopped' });
  await done;
  s = await status(room);
  assert.deepEqual([s.state, s.hubAccess.barred], ['done', null]);
  assert.ok((await joinAsHub(hub, room, hubKeyOf(room), 'teacher-hub')).ok);
});

test('the teacher removes the hub: it is told, the run goes on, and its key is refused until the teacher allows a hub again', async () => {
  const room = 'hub-teacher';
  const { students, hub, generation } = await trainingClassWithHub(room, ['ada', 'bob']);
  const ada = students[0]!;

  // Only the teacher: no token, a member's token, or the join code are not enough.
  const memberToken = ((await join(await client(room), room, 'cy')) as JoinAccepted).memberToken;
  const notTeacher: Array<Record<string, string>> = [{}, { authorization: `Bearer ${memberToken}` }, { 'x-join-code': codeFor(room) }];
  for (const headers of notTeacher) {
    const res = await fetch(`${testServer.server.url}/api/rooms/${room}/hub`, { method: 'DELETE', headers });
    assert.equal(res.status, 401);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'ERR_UNAUTHORIZED');
  }
  assert.ok((await status(room)).hub !== null);

  const hubTold = nextEvent(hub, 'member:dropped');
  const without = nextEvent(ada, 'ring:generation', (g) => g.hub === null);
  const res = await fetch(`${testServer.server.url}/api/rooms/${room}/hub`, teacher('DELETE'));
  assert.equal(res.status, 200);
  const body = (await res.json()) as { status: RoomStatus };
  assert.deepEqual([body.status.hub, body.status.hubAccess.barred?.by, body.status.state], [null, 'teacher', 'training']);
  const notice = await hubTold;
  assert.equal(notice.reason, 'removed');
  assert.ok((await without).generation > generation);

  const refused = await joinAsHub(hub, room, hubKeyOf(room), 'teacher-hub');
  assert.equal(codeOf(refused), 'ERR_HUB_REMOVED');
  assert.ok(!refused.ok && /until the teacher lets a hub in again/.test(refused.error.message));
  assert.equal((await status(room)).hub, null);

  const allowed = await fetch(`${testServer.server.url}/api/rooms/${room}/hub/allow`, teacher('POST'));
  assert.equal(allowed.status, 200);
  let s = await status(room);
  assert.deepEqual([s.hubAccess.barred, s.events.at(-1)?.kind], [null, 'hub-allowed']);
  assert.ok((await joinAsHub(hub, room, hubKeyOf(room), 'teacher-hub')).ok);
  s = await status(room);
  assert.deepEqual([s.hub?.name, s.state], ['teacher-hub', 'training']);
});

test('a room the teacher barred hubs from keeps the bar with nobody in it', async () => {
  const room = 'hub-barred-empty';
  assert.equal((await fetch(`${testServer.server.url}/api/rooms/${room}/hub`, teacher('DELETE'))).status, 200);
  const hub = await client(room);
  assert.equal(codeOf(await joinAsHub(hub, room, hubKeyOf(room))), 'ERR_HUB_REMOVED');
  assert.equal((await status(room)).hubAccess.barred?.by, 'teacher');
});

test('the hub key is the teacher\'s: GET /api/rooms/:room/hub-key needs the teacher token, and its key lets a hub in', async () => {
  const room = 'hubkey-api';
  const ada = await client(room);
  const j = await join(ada, room, 'ada');
  assert.ok(j.ok);
  const notTeacher: Array<Record<string, string>> = [{}, { authorization: `Bearer ${j.memberToken}` }, { 'x-join-code': codeFor(room) }, { authorization: 'Bearer wrong' }];
  for (const headers of notTeacher) {
    const res = await fetch(`${testServer.server.url}/api/rooms/${room}/hub-key`, { headers });
    assert.equal(res.status, 401, JSON.stringify(headers));
    const text = await res.text();
    assert.ok(!text.includes(hubKeyOf(room)));
  }
  const res = await fetch(`${testServer.server.url}/api/rooms/${room}/hub-key`, AS_TEACHER);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('cache-control'), 'no-store');
  const info = (await res.json()) as HubKeyInfo;
  assert.deepEqual(info, { room, hubKey: hubKeyOf(room) });
  assert.notEqual(info.hubKey, hubKeyOf('another-room'), 'each room has its own key');
  const hub = await client(room);
  assert.ok((await joinAsHub(hub, room, info.hubKey)).ok);
});

/** A hub with no ring members to link to never dials: a factory that must not be called. */
const noPeers: PeerFactory = () => {
  throw new Error('a hub alone dials no peer');
};

async function until(what: string, ok: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('a real hub the server let go joins again by itself; one the teacher removed waits, and comes back once allowed', async () => {
  const room = 'hub-comeback';
  const socket: TestSocket = connect(testServer.server.url, { transports: ['websocket'], forceNew: true, autoConnect: false, reconnectionDelay: 100, reconnectionDelayMax: 200 });
  testServer.keep(socket);
  const logged: string[] = [];
  const member = new HubMember({ socket, factory: noPeers, log: (m) => logged.push(m) });
  try {
    const first = await member.join(room, 'teacher-hub', codeFor(room), hubKeyOf(room));
    assert.equal((await status(room)).hub?.id, first.memberId);

    // Its connection breaks (as after missed heartbeats): the server lets the hub go at once;
    // the hub's reconnect finds itself unknown and joins afresh.
    socket.io.engine.close();
    await until('the hub back after the drop', async () => {
      const hub = (await status(room)).hub;
      return hub !== null && hub.id !== first.memberId;
    });
    assert.ok(logged.some((l) => l.includes('rejoin refused: ERR_NOT_IN_ROOM')), logged.join('\n'));
    // The server closes its connection (socket.io does not reconnect by itself then): back all the same.
    const second = (await status(room)).hub!.id;
    testServer.server.io.in(socket.id!).disconnectSockets(true);
    await until('the hub back after the server closed its connection', async () => {
      const hub = (await status(room)).hub;
      return hub !== null && hub.id !== second;
    });
    assert.deepEqual((await status(room)).hubAccess.barred, null, 'a drop bars nothing');

    // The teacher removes it: it stays out, and is back within the back-off once allowed.
    assert.equal((await fetch(`${testServer.server.url}/api/rooms/${room}/hub`, teacher('DELETE'))).status, 200);
    await until('a refused retry', async () => logged.some((l) => l.includes('ERR_HUB_REMOVED')));
    assert.equal((await status(room)).hub, null);
    assert.equal(member.joined, false);
    assert.equal((await fetch(`${testServer.server.url}/api/rooms/${room}/hub/allow`, teacher('POST'))).status, 200);
    await until('the hub back after the teacher allowed it', async () => (await status(room)).hub?.name === 'teacher-hub');
    assert.equal(member.joined, true);
  } finally {
    member.leave();
  }
});
