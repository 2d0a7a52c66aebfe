/**
 * The relay through the real server (signaling-server/handlers/link-relay.ts): link:data
 * passes a member's bytes, unread, to another member of its room, and refuses anything else
 * with a code, leaving other rooms alone; relayed bytes count against a budget of their own.
 * Then three members of the library with WebRTC off (real TrainingWorkers, tfjs on the CPU)
 * train through it: a plain run, and a secure one whose gradients the server, tapping every
 * relayed message, only ever sees as masked words. The teacher's room API lists them as
 * relayed. Spawned Node workers and a kill -9: test/class/relay-class.test.ts.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { codeFor, join, TEST_TOKEN, useTestServer, type TestSocket } from '../support/server';
import { joinRoom, RoomControl, type RoomMember } from '../../node-worker/library';
import type { AckResult } from '../../shared/protocol';
import { COLLECTIVE_TAG } from '../../shared/collectives/collective';
import { RELAY_SIGNAL } from '../../shared/network/relay-link';
import { HEADER_BYTES, PHASE_ALL_GATHER, PHASE_REDUCE_SCATTER, WIRE_FP32, WIRE_U32 } from '../../shared/collectives/wire';

// 32 MiB per 30 s: room for two short runs of three relayed members (about 1.6 MB a step each), and a flood to overrun.
const t = useTestServer({ rateLimits: { relayedBytesPerWindow: 32 * 1024 * 1024, windowSeconds: 30 } });
const members: RoomMember[] = [];
after(async () => {
  for (const m of members) await m.leave();
});

type Relayed = { from: string; linkId: string; bytes: ArrayBuffer | Uint8Array };

function relay(socket: TestSocket, payload: unknown): Promise<AckResult<Record<string, never>>> {
  return new Promise((resolve) => (socket.emit as (e: string, p: unknown, ack: (r: AckResult<Record<string, never>>) => void) => void)('link:data', payload, resolve));
}
const codeOf = (r: AckResult<object>): string | null => (r.ok ? null : r.error.code);
/** `socket`'s member says it relays its link `linkId` to `to`, as a page whose direct link would not open does. */
function sayRelay(socket: TestSocket, to: string, linkId: string): Promise<AckResult<Record<string, never>>> {
  return new Promise((resolve) => (socket.emit as (e: string, p: unknown, ack: (r: AckResult<Record<string, never>>) => void) => void)('signal:relay', { to, linkId, data: { type: RELAY_SIGNAL } }, resolve));
}

async function until<T>(what: string, check: () => Promise<T | false> | T | false, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== false) return v;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('link:data passes bytes unread to a member of the same room, counts them for the teacher, and refuses the rest with a code', async () => {
  const { students, ids } = await t.students('relay-edge', ['r0', 'r1']);
  const other = await t.students('relay-other', ['o0']);
  const heard: Relayed[] = [];
  students[1]!.on('link:data', (d, taken) => {
    heard.push(d);
    taken?.();
  });
  const bytes = Uint8Array.from({ length: 5000 }, (_, i) => (i * 7) & 255);
  // Only on a link the other end said it relays (rooms/relay-partners.ts).
  assert.equal(codeOf(await relay(students[0]!, { to: ids[1], linkId: 'abc-1', bytes })), 'ERR_RELAY_REFUSED');
  assert.deepEqual(await sayRelay(students[1]!, ids[0]!, 'abc-1'), { ok: true });
  assert.equal(codeOf(await relay(students[0]!, { to: ids[1], linkId: 'abc-9', bytes })), 'ERR_RELAY_REFUSED', 'another link of the pair is not agreed');
  assert.deepEqual(await relay(students[0]!, { to: ids[1], linkId: 'abc-1', bytes }), { ok: true });
  await until('the bytes arrive', () => heard.length === 1, 5_000);
  assert.equal(heard[0]!.from, ids[0]);
  assert.equal(heard[0]!.linkId, 'abc-1');
  assert.deepEqual(new Uint8Array(heard[0]!.bytes as ArrayBuffer), bytes, 'the same bytes, unread');
  const status = await t.status('relay-edge');
  assert.deepEqual(status.relay.members, [{ id: ids[0], bytesSent: 5000, peers: [ids[1]] }], 'the teacher sees who relays, to whom, and how much');

  // To a member of another room, to itself, to nobody; not bytes; too many bytes; not in a room.
  assert.equal(codeOf(await relay(students[0]!, { to: other.ids[0], linkId: 'abc-1', bytes })), 'ERR_NOT_IN_ROOM');
  assert.equal(codeOf(await relay(students[0]!, { to: ids[0], linkId: 'abc-1', bytes })), 'ERR_BAD_REQUEST');
  assert.equal(codeOf(await relay(students[0]!, { to: ids[1], linkId: 'abc-1', bytes: 'not bytes' })), 'ERR_BAD_REQUEST');
  assert.equal(codeOf(await relay(students[0]!, { to: ids[1], linkId: 'ABC 1', bytes })), 'ERR_BAD_REQUEST');
  assert.equal(codeOf(await relay(students[0]!, { to: ids[1], linkId: 'abc-1', bytes: new Uint8Array(100 * 1024) })), 'ERR_BAD_REQUEST');
  assert.equal(codeOf(await relay(students[0]!, { to: ids[1], linkId: 'abc-1', bytes, extra: 1 })), 'ERR_BAD_REQUEST');
  const stranger = await t.client('relay-edge');
  assert.equal(codeOf(await relay(stranger, { to: ids[1], linkId: 'abc-1', bytes })), 'ERR_NOT_IN_ROOM');
  // A member's old connection, once the member came back on a new one, no longer relays.
  const old = await t.client('relay-edge');
  const first = await join(old, 'relay-edge', 'r2');
  assert.ok(first.ok);
  const fresh = await t.client('relay-edge');
  assert.ok((await join(fresh, 'relay-edge', 'r2', { rejoin: { memberId: first.memberId, memberToken: first.memberToken } })).ok);
  assert.equal(codeOf(await relay(old, { to: ids[1], linkId: 'abc-2', bytes })), 'ERR_NOT_IN_ROOM');
  assert.deepEqual(await sayRelay(students[1]!, first.memberId, 'abc-2'), { ok: true });
  assert.deepEqual(await relay(fresh, { to: ids[1], linkId: 'abc-2', bytes }), { ok: true });
  await until('the new connection\'s bytes arrive', () => heard.length === 2, 5_000);
  assert.equal(heard.length, 2, 'nothing refused reached the member');

  // The relay budget (32 MiB per window here): a flood is refused, and other rooms go on.
  let refused: string | null = null;
  const big = new Uint8Array(64 * 1024);
  for (let i = 0; i < 800 && refused === null; i++) refused = codeOf(await relay(students[0]!, { to: ids[1], linkId: 'abc-1', bytes: big }));
  assert.equal(refused, 'ERR_RATE_LIMITED');
  const otherStatus = await t.status('relay-other');
  assert.deepEqual(otherStatus.relay.members, []);
  assert.equal(otherStatus.members.length, 1, 'the other room is untouched');
});

/** Every relayed ring message the server passes on, tapped beside its own handler. */
function tapRelay(): Array<{ tag: number; wire: number; phase: number; words: Uint32Array | Float32Array }> {
  const seen: Array<{ tag: number; wire: number; phase: number; words: Uint32Array | Float32Array }> = [];
  t.server.io.on('connection', (socket) => {
    socket.on('link:data', (payload: { bytes?: unknown }) => {
      const b = payload?.bytes;
      if (!(b instanceof Uint8Array) || b.byteLength < HEADER_BYTES) return;
      const copy = b.slice();
      const body = copy.buffer.slice(HEADER_BYTES, HEADER_BYTES + Math.floor((copy.byteLength - HEADER_BYTES) / 4) * 4);
      const wire = copy[3]! & 0x7f;
      seen.push({ phase: copy[0]!, tag: copy[2]!, wire, words: wire === WIRE_U32 ? new Uint32Array(body) : new Float32Array(body) });
    });
  });
  return seen;
}

/** The share of 32-bit words whose top byte is 0x00 or 0xff: near 1 for small fixed-point numbers, 2/256 for uniform masks. */
function nearZeroShare(words: Uint32Array[]): number {
  let near = 0;
  let all = 0;
  for (const w of words)
    for (const x of w) {
      const top = x >>> 24;
      if (top === 0 || top === 0xff) near++;
      all++;
    }
  return near / all;
}

test('three members with WebRTC off train through the relay, plain and then secure: the server passes only masked words of the gradients', async () => {
  const seen = tapRelay();
  const room = 'relay-train';
  for (const name of ['a', 'b', 'c']) {
    members.push(await joinRoom({ url: t.server.url, room, code: codeFor(room), name, backend: 'cpu', compute: 'main', webrtc: false }));
  }
  await until('a ring of three', () => members.every((m) => m.size === 3 && m.rank !== null) || false, 30_000);
  const control = new RoomControl({ url: t.server.url, teacherToken: TEST_TOKEN });

  const plainDone = members.map((m) => m.whenDone());
  await control.start(room, { model: 'mlp', maxSteps: 4, batchSizePerWorker: 16, resumeFrom: 'none', warmupSteps: 0 });
  const plain = await Promise.all(plainDone);
  for (const s of plain) assert.equal(s.step, 4);
  assert.equal(new Set(plain.map((s) => s.weightsHash)).size, 1, 'the same bits on every replica');
  const relayed = await control.status(room);
  assert.deepEqual(relayed.relay.members.map((m) => m.id).sort(), relayed.members.map((m) => m.id).sort(), 'every member is shown as relayed');
  assert.ok(relayed.relay.members.every((m) => m.bytesSent > 0));
  const plainGradients = seen.filter((m) => m.tag === COLLECTIVE_TAG.gradients);
  assert.ok(plainGradients.length > 0, 'the gradients went through the server');
  assert.ok(plainGradients.every((m) => m.wire === WIRE_FP32), 'a plain run relays float32 gradients');

  seen.length = 0;
  const secureDone = members.map((m) => m.whenDone());
  const started = await control.start(room, { model: 'mlp', maxSteps: 4, batchSizePerWorker: 16, resumeFrom: 'none', warmupSteps: 0, secureAggregation: true });
  assert.equal(started.config?.secureAggregation, true);
  const secure = await Promise.all(secureDone);
  for (const s of secure) assert.equal(s.step, 4);
  assert.equal(new Set(secure.map((s) => s.weightsHash)).size, 1);
  const gradients = seen.filter((m) => m.tag === COLLECTIVE_TAG.gradients);
  assert.ok(gradients.length > 0, 'the secure gradients went through the server');
  assert.deepEqual([...new Set(gradients.map((m) => m.wire))], [WIRE_U32], 'only masked words of the gradients');
  // A ring's reduce-scatter carries partial sums, still masked; its all-gather carries the
  // class's sum, where the masks cancel: what secure aggregation lets every member learn.
  // Fixed-point numbers as small as a sum of gradients nearly all start 0x00 or 0xff.
  const partial = nearZeroShare(gradients.filter((m) => m.phase === PHASE_REDUCE_SCATTER).map((m) => m.words as Uint32Array));
  const sum = nearZeroShare(gradients.filter((m) => m.phase === PHASE_ALL_GATHER).map((m) => m.words as Uint32Array));
  assert.ok(sum > 0.5, `the class's sum is plain small numbers: ${(sum * 100).toFixed(1)} % start 0x00 or 0xff`);
  assert.ok(partial < 0.05, `the partial sums look uniform: ${(partial * 100).toFixed(2)} % start 0x00 or 0xff`);
});
