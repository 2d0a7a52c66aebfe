/**
 * Issue 38 (3): one member that always votes "not ready" kept every joiner out for the rest
 * of the run: an admission switches only on the ring's unanimous tail vote, and no server
 * timer cleared it. Now, past the server's deadline and ADMISSION_DEADLINE_TURNS turns, the
 * admission applies as a generation every member switches to at once (switchNow). The
 * test failed on the previous main: no generation came. Real server, real sockets, the
 * members' progress reports sent as a training ring sends them.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { RunningServer } from '../../signaling-server/server';
import { ADMISSION_DEADLINE_TURNS } from '../../signaling-server/rooms/formation';
import { AS_TEACHER, connectClient, join, nextEvent, startTestServer, type TestSocket } from '../support/server';
import { extendsRing } from '../../shared/training/generation-tracker';

/** The deadline, shortened for the test (30 s by default). */
const DEADLINE_MS = 1_500;

let server: RunningServer;
const sockets: TestSocket[] = [];
before(async () => {
  server = await startTestServer({ admissionDeadlineMs: DEADLINE_MS });
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
  const started = nextEvent(ring[0]!, 'train:start');
  const res = await fetch(`${server.url}/api/rooms/${room}/start`, { method: 'POST', headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' }, body: '{}' });
  assert.equal(res.status, 200);
  const { run, generation } = await started;
  for (const s of ring) progress(s, run, generation, 5);

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
