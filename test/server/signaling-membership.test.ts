/**
 * The signaling server's membership over real sockets: indexes, ranks and the chief, new
 * generations when a member leaves or stops answering, the signal relay confined to a room,
 * malformed and oversized input answered with codes, the room API's names, and each
 * member's own-example counts. The runs a room trains are in signaling-runs.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_PING_INTERVAL_MS, DEFAULT_PING_TIMEOUT_MS } from '../../signaling-server/server';
import type { AckResult } from '../../shared/protocol';
import { AS_TEACHER, join, nextEvent, TEST_TOKEN, useTestServer } from '../support/server';

// The product's liveness: 1 s between pings, 4 s to answer.
const ts = useTestServer();

test('members get increasing indexes, ranks follow them and the chief is the lowest index', async () => {
  const [a, b, c] = [await ts.client(), await ts.client(), await ts.client()];
  const ja = await join(a, 'ranks', 'ada');
  const jb = await join(b, 'ranks', 'bob');
  const lastGeneration = nextEvent(a, 'ring:generation', (g) => g.members.length === 3);
  const jc = await join(c, 'ranks', 'cy');
  assert.ok(ja.ok && jb.ok && jc.ok);
  assert.ok(ja.index < jb.index && jb.index < jc.index);
  const g = await lastGeneration;
  assert.deepEqual(g.members.map((m) => m.name), ['ada', 'bob', 'cy']);
  assert.deepEqual(g.members.map((m) => m.rank), [0, 1, 2]);
  const s = await ts.status('ranks');
  assert.equal(s.chief, ja.memberId);
  assert.equal(s.state, 'idle');
  assert.equal(s.generation, g.generation);
});

test('the generation rises when a member leaves, and the next-lowest index becomes chief', async () => {
  const [a, b, c] = [await ts.client(), await ts.client(), await ts.client()];
  const ja = await join(a, 'leave', 'a');
  const jb = await join(b, 'leave', 'b');
  await join(c, 'leave', 'c');
  assert.ok(ja.ok && jb.ok);
  const before = await ts.status('leave');
  const next = nextEvent(b, 'ring:generation', (g) => g.members.length === 2);
  a.disconnect(); // the chief's tab closes
  const g = await next;
  assert.ok(g.generation > before.generation);
  assert.equal(g.members[0]!.id, jb.memberId);
  assert.equal((await ts.status('leave')).chief, jb.memberId);
});

test('a tab that stops answering (no disconnect packet) is dropped by the ping timeout', async () => {
  const [a, b] = [await ts.client(), await ts.client()];
  await join(a, 'vanish', 'a');
  await join(b, 'vanish', 'b');
  const next = nextEvent(a, 'ring:generation', (g) => g.members.length === 1, 8_000);
  // Silence b entirely: no pongs, no goodbye, as a frozen or unplugged laptop behaves.
  (b.io.engine as unknown as { _sendPacket: () => void })._sendPacket = () => {};
  const started = Date.now();
  await next;
  // The product's pingInterval 1 s + pingTimeout 4 s; socket.io's own defaults would take
  // 45 s. The bound is loose on purpose: it tells the product's liveness from socket.io's.
  const windowMs = DEFAULT_PING_INTERVAL_MS + DEFAULT_PING_TIMEOUT_MS;
  assert.ok(Date.now() - started < windowMs + 2_000, `noticed after ${Date.now() - started} ms`);
});

test('signals are relayed within a room and refused across rooms', async () => {
  const [a, b, x] = [await ts.client(), await ts.client(), await ts.client()];
  const ja = await join(a, 'relay-1', 'a');
  const jb = await join(b, 'relay-1', 'b');
  const jx = await join(x, 'relay-2', 'x');
  assert.ok(ja.ok && jb.ok && jx.ok);
  const got = nextEvent(b, 'signal:relay');
  const ok = await new Promise<unknown>((r) => a.emit('signal:relay', { to: jb.memberId, linkId: 'l-1', data: { type: 'offer', sdp: 'v=0' } }, r));
  assert.deepEqual(ok, { ok: true });
  assert.deepEqual(await got, { from: ja.memberId, linkId: 'l-1', data: { type: 'offer', sdp: 'v=0' } });

  let leaked = false;
  x.on('signal:relay', () => (leaked = true));
  const refused = await new Promise<AckResult<Record<string, never>>>((r) =>
    a.emit('signal:relay', { to: jx.memberId, linkId: 'l-2', data: { type: 'offer' } }, r),
  );
  assert.ok(!refused.ok);
  assert.equal(refused.error.code, 'ERR_NOT_IN_ROOM');
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(leaked, false);
});

test('malformed events get coded errors and never crash the server or disturb another room', async () => {
  const [good, bad] = [await ts.client(), await ts.client()];
  const jg = await join(good, 'calm', 'steady');
  assert.ok(jg.ok);
  const before = await ts.status('calm');

  const ack = (event: string, ...args: unknown[]) =>
    new Promise<{ ok: boolean; error?: { code: string; field?: string } }>((r) =>
      (bad.emit as (e: string, ...a: unknown[]) => void)(event, ...args, r),
    );
  const wrongTypes = await ack('room:join', { room: 42, name: ['x'], kind: 'browser', backend: 'webgpu' });
  assert.equal(wrongTypes.error?.code, 'ERR_BAD_REQUEST');
  assert.equal(wrongTypes.error?.field, 'room');
  assert.equal((await ack('room:join', null)).error?.code, 'ERR_BAD_REQUEST');
  assert.equal((await ack('room:join', { room: '../etc', name: 'x', kind: 'browser', backend: 'cpu' })).error?.code, 'ERR_BAD_REQUEST');
  assert.equal((await ack('room:join', { room: 'r', name: 'x', kind: 'browser', backend: 'tpu' })).error?.field, 'backend');
  assert.equal((await ack('signal:relay', { to: 'aaaaaaaaaaaaaaaa', linkId: 'x', data: {} })).error?.code, 'ERR_NOT_IN_ROOM');
  assert.equal((await ack('room:leave')).error?.code, 'ERR_NOT_IN_ROOM');

  // Events without an ack are answered with 'server:error'.
  const serverError = nextEvent(bad, 'server:error');
  bad.emit('worker:progress', { step: 'nope' } as never);
  assert.equal((await serverError).code, 'ERR_NOT_IN_ROOM');
  const unknown = nextEvent(bad, 'server:error');
  (bad.emit as (e: string, ...a: unknown[]) => void)('room:explode', 1, 2, 3);
  assert.equal((await unknown).code, 'ERR_BAD_REQUEST');

  // A join to a real room after all that still works, and an oversized signal is refused.
  const jb = await join(bad, 'calm', 'recovered');
  assert.ok(jb.ok);
  const huge = await ack('signal:relay', { to: jg.memberId, linkId: 'x', data: { sdp: 'a'.repeat(40_000) } });
  assert.equal(huge.error?.code, 'ERR_PAYLOAD_TOO_LARGE');

  // A payload above the socket.io packet cap closes only that connection.
  const flooder = await ts.client();
  const closed = new Promise<void>((r) => flooder.once('disconnect', () => r()));
  (flooder.emit as (e: string, ...a: unknown[]) => void)('room:join', { room: 'calm', name: 'x'.repeat(300_000), kind: 'node', backend: 'cpu' });
  await closed;

  const after = await ts.status('calm');
  assert.equal(after.members.length, before.members.length + 1);
  assert.equal(after.chief, jg.memberId);
  const health = await fetch(`${ts.server.url}/healthz`);
  assert.equal(health.status, 200);
});

test('the API rejects bad room names and shows a room nobody joined as empty and idle', async () => {
  assert.equal((await fetch(`${ts.server.url}/api/rooms/${encodeURIComponent('../../etc')}`, AS_TEACHER)).status, 400);
  const empty = await ts.status('nobody-here');
  assert.deepEqual([empty.state, empty.members.length, empty.chief], ['idle', 0, null]);
  assert.deepEqual(empty.data, { dataset: null, datasetBytes: 0, bytesServed: 0, trainBytesServed: 0, exampleBytes: 0, refused: [] });
});

test("each member's own examples per class show in the room API, counts only; a bad report is refused and changes nothing", async () => {
  const [a, b] = [await ts.client(), await ts.client()];
  await join(a, 'collecting', 'ana');
  await join(b, 'collecting', 'ben');
  // Counts are taken only for the classes the room collects for (small-defects.test.ts shows the refusals).
  const opened = await fetch(`${ts.server.url}/api/rooms/collecting/collect`, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKEN}` }, body: JSON.stringify({ classes: ['cat', 'house', 'sun'] }) });
  assert.equal(opened.status, 200);
  a.emit('worker:own-examples', { counts: { cat: 12, sun: 3 } });
  b.emit('worker:own-examples', { counts: { cat: 0, house: 7 } });
  // A later report replaces the earlier one (a deletion lowers a count).
  a.emit('worker:own-examples', { counts: { cat: 11, sun: 3 } });
  await new Promise((r) => setTimeout(r, 150));
  const shown = (await ts.status('collecting')).members.map((m) => [m.name, m.ownExamples]);
  assert.deepEqual(shown, [['ana', { cat: 11, sun: 3 }], ['ben', { cat: 0, house: 7 }]]);

  for (const bad of [{ counts: { cat: -1 } }, { counts: { cat: 1.5 } }, { counts: { '': 1 } }, { counts: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`c${i}`, 1])) }, { counts: { cat: 1 }, pixels: [0.5] }]) {
    const refused = nextEvent(a, 'server:error');
    a.emit('worker:own-examples', bad as never);
    assert.equal((await refused).code, 'ERR_BAD_REQUEST', JSON.stringify(bad).slice(0, 80));
  }
  assert.deepEqual((await ts.status('collecting')).members.map((m) => [m.name, m.ownExamples]), shown);
  // Someone not in the room holds nothing the room lists.
  const outsider = await ts.client();
  const notIn = nextEvent(outsider, 'server:error');
  outsider.emit('worker:own-examples', { counts: { cat: 1 } });
  assert.equal((await notIn).code, 'ERR_NOT_IN_ROOM');
});
