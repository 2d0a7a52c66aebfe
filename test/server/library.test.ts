/**
 * The library's entry points, used as a program uses them: `webring/server` starts the real
 * signaling server in this process, three members join it through `webring`'s joinRoom for
 * Node (real WebRTC through @roamhq/wrtc, tfjs on the CPU), learn their rank, size and the
 * chief from the room, train a short run the teacher's RoomControl starts, and see the ring
 * shrink when one leaves. Bad options and a wrong join code are coded refusals that leave
 * nothing open. openMember joins in two halves, as the student page does: a refused code,
 * then the right one, then a leaveRoom and a join again, all on one member; RoomControl
 * does what the teacher page does with it.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type EmbeddedServer } from '../../signaling-server/library';
import { joinRoom, openMember, RoomControl, WebringError, type CollectSetting, type Membership, type RoomMember } from '../../node-worker/library';

let server: EmbeddedServer;
const members: RoomMember[] = [];
after(async () => {
  // One at a time: @roamhq/wrtc has crashed closing many connections of one process at once.
  for (const m of members) await m.leave();
  await server?.close();
});

const ROOM = 'library-room';
const join = async (name: string): Promise<RoomMember> => {
  // The maths in this thread: three members share this process and its CPU backend.
  const member = await joinRoom({ url: server.url, room: ROOM, code: server.joinCode(ROOM), name, backend: 'cpu', compute: 'main' });
  members.push(member);
  return member;
};

const until = async (what: string, ok: () => boolean, timeoutMs: number): Promise<void> => {
  const end = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

test('startServer gives a listening server with a teacher token, a data folder and join codes', async () => {
  server = await startServer({ host: '127.0.0.1', logLevel: 'silent' });
  assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.ok(server.port > 0);
  assert.match(server.joinCode(ROOM), /^[2-9A-HJKMNP-Z]{3}-[2-9A-HJKMNP-Z]{3}$/);
  const health = await fetch(`${server.url}/healthz`);
  assert.equal(health.status, 200);
  // The teacher's controls answer with the token, and refuse without it.
  const refused = await fetch(`${server.url}/api/rooms/${ROOM}/join`);
  assert.equal(refused.status, 401);
  assert.equal((await server.control.joinInfo(ROOM)).code, server.joinCode(ROOM));
});

test('joinRoom refuses bad options and a wrong join code with coded errors', async () => {
  await assert.rejects(joinRoom({ url: server.url, room: 'no spaces', code: server.joinCode(ROOM), backend: 'cpu', compute: 'main' }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST' && /room/.test(e.message));
  await assert.rejects(joinRoom({ url: 'not a url', room: ROOM, code: server.joinCode(ROOM), backend: 'cpu', compute: 'main' }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST' && /url/.test(e.message));
  const wrong = server.joinCode('another-room');
  await assert.rejects(joinRoom({ url: server.url, room: ROOM, code: wrong, backend: 'cpu', compute: 'main' }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_JOIN_CODE');
  assert.equal((await server.control.status(ROOM)).members.length, 0, 'nobody joined');
});

test('three members learn rank, size and chief, train a run the teacher starts, and see the ring shrink when one leaves', async () => {
  const [a, b, c] = [await join('lib-a'), await join('lib-b'), await join('lib-c')];
  const heard: Membership[] = [];
  a.on('membership', (m) => heard.push(m));
  await until('a ring of three', () => members.every((m) => m.size === 3 && m.rank !== null), 30_000);
  assert.deepEqual(members.map((m) => m.rank).sort(), [0, 1, 2]);
  assert.equal(members.filter((m) => m.isChief).length, 1, 'one chief');
  assert.equal(members.find((m) => m.isChief)!.rank, 0, 'the chief is rank 0');

  const done = members.map((m) => m.whenDone());
  const started = await server.control.start(ROOM, { maxSteps: 6, batchSizePerWorker: 16, resumeFrom: 'none', warmupSteps: 0 });
  assert.equal(started.state, 'training');
  const finished = await Promise.all(done);
  for (const s of finished) assert.equal(s.step, 6);
  assert.equal(new Set(finished.map((s) => s.weightsHash)).size, 1, 'the replicas agree');
  const room = await server.control.status(ROOM);
  assert.equal(room.consistency.mismatches, 0);

  await c.leave();
  await until('a ring of two', () => a.size === 2 && b.size === 2, 30_000);
  assert.deepEqual([a.rank, b.rank].sort(), [0, 1]);
  assert.ok(heard.some((m) => m.size === 2), 'the membership event told of the smaller ring');
  await assert.rejects(server.control.start('no-such-room', {}), (e: unknown) => e instanceof WebringError && e.code === 'ERR_NO_WORKERS');
  await assert.rejects(server.control.start(ROOM, { epochs: -1 }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST' && e.field === 'epochs');
});

test('openMember joins in two halves, as the student page does: a refused code, the right one, and again after leaveRoom; RoomControl does the teacher page\'s work', async () => {
  const room = 'two-halves';
  const member = await openMember({ url: server.url, backend: 'cpu', compute: 'main' });
  members.push(member);
  assert.equal(member.room, null, 'joined nothing yet');
  assert.equal(member.memberToken, null);
  assert.equal(member.compute.backend, 'cpu');
  const collected: Array<CollectSetting | null> = [];
  member.on('collect', (c) => collected.push(c));
  const code = server.joinCode(room);
  const wrong = code.startsWith('A') ? `B${code.slice(1)}` : `A${code.slice(1)}`;
  await assert.rejects(member.join({ room, code: wrong, name: 'halves' }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_JOIN_CODE');
  await assert.rejects(member.join({ room: 'no spaces', code, name: 'halves' }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST' && e.field === 'room');
  const first = await member.join({ room, code, name: 'halves' });
  assert.equal(first.room, room);
  assert.equal(member.room, room);
  assert.ok(member.memberToken, 'a member token once joined');
  assert.equal(collected.length, 1);
  assert.equal(collected[0], null, 'the join reply told what the room collects: nothing');

  const control = new RoomControl({ url: server.url, teacherToken: server.teacherToken });
  await control.collect(room, { classes: ['0', '1'] });
  await until('the collect event', () => collected.length === 2, 10_000);
  assert.deepEqual(collected[1]?.classes, ['0', '1'], 'the member heard what the room collects now');
  await control.collect(room, null);
  await until('collecting closed', () => collected.length === 3, 10_000);
  assert.equal(collected[2], null);
  const snapshot = await control.statusSnapshot(room);
  assert.deepEqual(snapshot.status.members.map((m) => m.name), ['halves']);
  assert.ok(Math.abs(snapshot.clockOffsetMs) < 5_000, `the server's clock is this machine's: ${snapshot.clockOffsetMs} ms`);
  assert.equal((await control.seats(room, 2)).seats.perAddress, 2);
  assert.deepEqual(await control.checkpoints(room), [], 'no run, no checkpoint');
  assert.deepEqual((await control.metrics(room)).history, []);
  await assert.rejects(control.deleteCheckpoint(room, 'ckpt-0000000001-abcdef'), (e: unknown) => e instanceof WebringError && e.code === 'ERR_UNKNOWN_CHECKPOINT');
  await assert.rejects(control.deleteCheckpoint(room, 'not-an-id'), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST');

  member.leaveRoom();
  const deadline = Date.now() + 10_000;
  while ((await control.status(room)).members.length !== 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal((await control.status(room)).members.length, 0, 'leaveRoom said goodbye');
  const again = await member.join({ room, code, name: 'halves' });
  assert.notEqual(again.memberId, first.memberId, 'a new membership, the same member and maths');
  assert.deepEqual((await control.status(room)).members.map((m) => m.name), ['halves']);

  const nowhere = new RoomControl({ url: 'http://127.0.0.1:9', teacherToken: 'x' });
  await assert.rejects(nowhere.status(room), (e: unknown) => e instanceof WebringError && e.code === 'ERR_UNREACHABLE');
});
