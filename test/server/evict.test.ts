/**
 * ring:evict's trust rule (rooms/accusations.ts), over real sockets: only a reporter's own senders in the
 * current generation can be evicted on its word, once per reporter and run; everything else
 * is refused with a code and changes nothing. The evicted member is told why and is named
 * in the room API.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sendersOf, type AckResult, type EvictRequest, type RoomStatus } from '../../shared/protocol';
import { AS_TEACHER, join, nextEvent, TEST_TOKEN, useTestServer, type TestSocket } from '../support/server';

const testServer = useTestServer();
const { client } = testServer;

async function status(room: string): Promise<RoomStatus> {
  return (await (await fetch(`${testServer.server.url}/api/rooms/${room}`, AS_TEACHER)).json()) as RoomStatus;
}

function evict(socket: TestSocket, request: EvictRequest | Record<string, unknown>): Promise<AckResult<{ evicted: string[] }>> {
  return new Promise((resolve) => socket.emit('ring:evict', request as EvictRequest, resolve));
}

const refusedWith = (r: AckResult<{ evicted: string[] }>): string => (r.ok ? 'accepted' : r.error.code);

test('the senders of a rank are its left neighbour and its halving-doubling partners', () => {
  assert.deepEqual([...sendersOf(0, 5)].sort(), [1, 2, 4]);
  assert.deepEqual([...sendersOf(3, 5)].sort(), [1, 2]);
  assert.deepEqual([...sendersOf(1, 2)], [0]);
  assert.deepEqual([...sendersOf(0, 1)], []);
});

test('only a reporter\'s own sender is evicted on its word, once per run; the evicted member is told and named', async () => {
  const room = 'hostile';
  const names = ['ada', 'bob', 'cy', 'dee', 'eve'];
  const socks: TestSocket[] = [];
  const ids: string[] = [];
  for (const name of names) {
    const s = await client();
    socks.push(s);
    const j = await join(s, room, name);
    assert.ok(j.ok);
    ids.push(j.memberId);
  }
  const [ada, bob, cy, dee] = socks as [TestSocket, TestSocket, TestSocket, TestSocket, TestSocket];
  const started = nextEvent(ada, 'train:start');
  const res = await fetch(`${testServer.server.url}/api/rooms/${room}/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKEN}` },
    body: JSON.stringify({ maxSteps: 100, resumeFrom: 'none' }),
  });
  assert.equal(res.status, 200);
  const { run, generation } = await started;
  const base = { run, generation, step: 7, reason: 'non-finite', detail: 'rank 1 sent a non-finite value' } as const;
  const unchanged = async () => {
    const s = await status(room);
    assert.deepEqual([s.generation, s.members.length, s.dropped.length], [generation, 5, 0]);
  };

  // Ranks 0..4 = ada..eve. dee (rank 3) receives only from cy (2) and bob (1): naming ada is refuted.
  assert.equal(refusedWith(await evict(dee, { ...base, member: ids[0]! })), 'ERR_BAD_ACCUSATION');
  await unchanged();
  // ...and dee's later accusations in this run are refused too, even of a real sender.
  assert.equal(refusedWith(await evict(dee, { ...base, member: ids[2]! })), 'ERR_BAD_ACCUSATION');
  // Naming oneself is no accusation either.
  assert.equal(refusedWith(await evict(cy, { ...base, member: ids[2]! })), 'ERR_BAD_ACCUSATION');
  await unchanged();
  // Schema and staleness: refused, nothing changes.
  assert.equal(refusedWith(await evict(bob, { ...base, member: ids[0]!, reason: 'bogus' })), 'ERR_BAD_REQUEST');
  assert.equal(refusedWith(await evict(bob, { ...base, member: ids[0]!, generation: generation - 1 })), 'ERR_STALE_GENERATION');
  assert.equal(refusedWith(await evict(bob, { ...base, member: ids[0]!, run: run + 1 })), 'ERR_STALE_RUN');
  const outsider = await client();
  assert.equal(refusedWith(await evict(outsider, { ...base, member: ids[0]! })), 'ERR_NOT_IN_ROOM');
  await unchanged();

  // bob (rank 1) names ada (rank 0, its left neighbour): accepted.
  const told = nextEvent(ada, 'member:dropped', () => true, 500).then(
    () => 'ada was told',
    () => 'ada was not told',
  );
  const shrunk = nextEvent(cy, 'ring:generation', (g) => g.members.length === 4);
  const ok = await evict(bob, { ...base, member: ids[0]! });
  assert.deepEqual(ok, { ok: true, evicted: [ids[0]] });
  assert.equal(await told, 'ada was told');
  const g = await shrunk;
  assert.deepEqual(g.members.map((m) => m.name), ['bob', 'cy', 'dee', 'eve']);
  const s = await status(room);
  assert.deepEqual(
    s.dropped.map((d) => [d.name, d.reason, d.misbehaviour, d.reportedBy, d.step]),
    [['ada', 'evicted', 'non-finite', 'bob', 7]],
  );
  assert.equal(s.events.at(-1)?.kind, 'evicted');
  assert.deepEqual(s.events.at(-1)?.members, ['ada']);
  assert.equal(s.chief, ids[1], 'the next member is chief');
  assert.equal(s.state, 'training', 'the run goes on');

  // A second accepted accusation by bob in this run evicts bob, not the accused: ranks are
  // now bob..eve = 0..3, and bob (0) receives from eve (3, left) and cy (1, partner).
  const bobTold = nextEvent(bob, 'member:dropped');
  const second = await evict(bob, { ...base, generation: g.generation, member: ids[2]! });
  assert.deepEqual(second, { ok: true, evicted: [ids[1]] });
  const notice = await bobTold;
  assert.equal(notice.reason, 'evicted');
  assert.ok(notice.reason === 'evicted' && notice.misbehaviour === 'accusations');
  const after2 = await status(room);
  assert.deepEqual(after2.members.map((m) => m.name), ['cy', 'dee', 'eve']);
  assert.deepEqual(after2.dropped.map((d) => [d.name, d.misbehaviour]), [['ada', 'non-finite'], ['bob', 'accusations']]);

  // The evicted connection may join again, as a fresh member waiting for admission.
  const back = await join(ada, room, 'ada');
  assert.ok(back.ok && back.memberId !== ids[0]);
  assert.deepEqual((await status(room)).waiting.map((m) => m.name), ['ada']);
});
