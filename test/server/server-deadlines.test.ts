/**
 * The server's own deadlines, where one member could stall the class forever (issue 38).
 * Each test failed on the previous main: nothing came. Real server, real sockets, the
 * members' reports and keys sent as a training ring sends them.
 * - Admission: one member that always votes "not ready" kept every joiner out for the rest
 *   of the run (an admission switches only on the ring's unanimous tail vote). Now, past
 *   the deadline and ADMISSION_DEADLINE_TURNS turns, it applies as a generation every
 *   member switches to at once (switchNow).
 * - Keys: a member of a secure run that publishes no key stalled its partners 15 s per
 *   generation, forever, and they were the ones blamed. Now the server, which relays every
 *   key, evicts it at the key deadline.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { RunningServer } from '../../signaling-server/server';
import { ADMISSION_DEADLINE_TURNS } from '../../signaling-server/rooms/formation';
import { AS_TEACHER, connectClient, join, nextEvent, startTestServer, type TestSocket } from '../support/server';
import { extendsRing } from '../../shared/training/generation-tracker';
import { makeKeyPair } from '../../shared/secagg/pair-keys';
import type { AckResult, RoomStatus } from '../../shared/protocol';

/** The deadlines, shortened for the test (30 s and 15 s by default). */
const DEADLINE_MS = 1_500;
const KEY_DEADLINE_MS = 1_500;

let server: RunningServer;
const sockets: TestSocket[] = [];
before(async () => {
  server = await startTestServer({ admissionDeadlineMs: DEADLINE_MS, keyDeadlineMs: KEY_DEADLINE_MS });
});
after(async () => {
  for (const s of sockets) s.disconnect();
  await server.close();
});

async function client(): Promise<TestSocket> {
  const s = await connectClient(server);
  sockets.push(s);
  return s;
}

const COLLECTIVE = { algorithm: 'ring' as const, alphaMs: 0, betaMBps: 0, reason: 'test', timing: { dataMs: 0, computeMs: 0, readbackMs: 0, crossMs: 0, commMs: 0, applyMs: 0 } };

async function start(room: string, member: TestSocket, config: Record<string, unknown>): Promise<{ run: number; generation: number }> {
  const started = nextEvent(member, 'train:start');
  const res = await fetch(`${server.url}/api/rooms/${room}/start`, { method: 'POST', headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' }, body: JSON.stringify(config) });
  assert.equal(res.status, 200);
  return started;
}

function progress(s: TestSocket, run: number, generation: number, step: number): void {
  s.emit('worker:progress', {
    run, generation, step, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 10, weightsHash: '0123456789abcdef', computeMs: 30,
    totalSteps: 1_000, hashChecked: false, hashMismatch: false, batchShare: 0.33, linkMBps: 1, learningRate: 0.001, speedVsMedian: 1, collective: COLLECTIVE,
  });
}

test('issue 38 (3): a "never ready" voter cannot keep a joiner out past the deadline: the admission applies without the vote (failed on the previous main)', async () => {
  const room = 'never-ready';
  const ring = [await client(), await client(), await client()];
  for (const [i, s] of ring.entries()) assert.ok((await join(s, room, `m${i}`)).ok);
  const { run, generation } = await start(room, ring[0]!, {});
  // The chief first, a step at a time: no report runs far ahead of the room's step (progress-bounds.ts).
  for (let step = 1; step <= 5; step++) progress(ring[0]!, run, generation, step);
  await new Promise((r) => setTimeout(r, 100));
  for (const s of ring.slice(1)) progress(s, run, generation, 5);

  // A student arrives: the admission goes out, extending the ring.
  const admission = nextEvent(ring[0]!, 'ring:generation');
  const joiner = await client();
  const joined = await join(joiner, room, 'joiner');
  assert.ok(joined.ok);
  const admitting = await admission;
  assert.equal(admitting.members.length, 4);
  assert.ok(!admitting.switchNow, 'an admission switches on the vote');
  const sentAt = Date.now();

  // The ring trains on in its old generation: m2 never votes ready, so it never switches.
  const forced = nextEvent(ring[0]!, 'ring:generation', () => true, DEADLINE_MS * 4);
  for (let step = 6; step <= 6 + ADMISSION_DEADLINE_TURNS; step++) for (const s of ring) progress(s, run, generation, step);
  const g = await forced;
  assert.ok(Date.now() - sentAt >= DEADLINE_MS * 0.9, 'not before the deadline');
  assert.equal(g.switchNow, true);
  assert.ok(g.generation > admitting.generation);
  assert.deepEqual(g.members.map((m) => m.name), ['m0', 'm1', 'm2', 'joiner']);
  assert.ok(extendsRing({ ...admitting, generation: generation, members: admitting.members.slice(0, 3) }, g), 'it extends the ring, and still applies at once');
  const status = (await (await fetch(`${server.url}/api/rooms/${room}`, AS_TEACHER)).json()) as { generation: number };
  assert.equal(status.generation, g.generation);
});

test('issue 38 (5): a member of a secure run that publishes no key is evicted at the key deadline, named, and the class re-forms without it (failed on the previous main)', async () => {
  const room = 'withholder';
  const ring = [await client(), await client(), await client()];
  const ids: string[] = [];
  for (const [i, s] of ring.entries()) {
    const joined = await join(s, room, `k${i}`);
    assert.ok(joined.ok);
    ids.push(joined.memberId);
  }
  const { run, generation } = await start(room, ring[0]!, { data: 'dataset', secureAggregation: true });
  const dropped = nextEvent(ring[2]!, 'member:dropped', () => true, KEY_DEADLINE_MS * 4);
  const reformed = nextEvent(ring[0]!, 'ring:generation', () => true, KEY_DEADLINE_MS * 4);
  // k0 and k1 publish their keys; k2 withholds its own.
  for (const s of ring.slice(0, 2)) {
    const { publicKey } = await makeKeyPair();
    const ack = await new Promise<AckResult<object>>((resolve) => (s.emit as (e: string, k: unknown, a: (r: AckResult<object>) => void) => void)('secagg:key', { run, generation, publicKey }, resolve));
    assert.ok(ack.ok);
  }
  const notice = await dropped;
  assert.equal(notice.reason, 'evicted');
  assert.equal(notice.reason === 'evicted' && notice.misbehaviour, 'no-key');
  const g = await reformed;
  assert.deepEqual(g.members.map((m) => m.name), ['k0', 'k1']);
  const status = (await (await fetch(`${server.url}/api/rooms/${room}`, AS_TEACHER)).json()) as RoomStatus;
  const record = status.dropped.find((d) => d.id === ids[2]);
  assert.equal(record?.misbehaviour, 'no-key');
  assert.match(record!.detail, /published no secure-aggregation key for generation \d+/);
  // The two left publish nothing for their new generation (a secure ring of two holds): nobody else is evicted.
  await new Promise((r) => setTimeout(r, KEY_DEADLINE_MS * 1.5));
  const after = (await (await fetch(`${server.url}/api/rooms/${room}`, AS_TEACHER)).json()) as RoomStatus;
  assert.deepEqual(after.members.map((m) => m.name), ['k0', 'k1']);
});
