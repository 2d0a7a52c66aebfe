/**
 * Rate limits at the edge, against a real server: a flooding connection is refused with
 * ERR_RATE_LIMITED (its acks answered, told once per window, not once per event), while
 * another student on the same machine joins and trains on; /api answers 429 with
 * Retry-After past its budget, and the server stays up.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { RunningServer } from '../../signaling-server/server';
import type { AckResult, JoinAccepted } from '../../shared/protocol';
import type { ErrorBody } from '../../shared/protocol/errors';
import { AS_TEACHER, connectClient, join, startTestServer, type TestSocket } from '../support/server';

const SOCKET_BUDGET = 40;
const HTTP_BUDGET = 25;
let server: RunningServer;
const sockets: TestSocket[] = [];

before(async () => {
  server = await startTestServer({
    rateLimits: { socketEventsPerWindow: SOCKET_BUDGET, ipEventsPerWindow: 10_000, httpRequestsPerWindow: HTTP_BUDGET, windowSeconds: 30 },
  });
});
after(async () => {
  for (const s of sockets) s.disconnect();
  await server.close();
});

async function client(room?: string): Promise<TestSocket> {
  const s = await connectClient(server, room);
  sockets.push(s);
  return s;
}

test('a connection that floods events is refused past its budget, told once, and nobody else is affected', async () => {
  const flooder = await client('flood');
  const told: ErrorBody[] = [];
  flooder.on('server:error', (e) => told.push(e));
  const FLOOD = 200;
  const acks = await Promise.all(
    Array.from({ length: FLOOD }, (_, i) =>
      new Promise<AckResult<JoinAccepted>>((resolve) => flooder.emit('room:join', { room: 'flood', name: `f${i}`, kind: 'node', backend: 'cpu' }, resolve)),
    ),
  );
  const limited = acks.filter((a) => !a.ok && a.error.code === 'ERR_RATE_LIMITED');
  assert.equal(limited.length, FLOOD - SOCKET_BUDGET, 'every event past the budget is refused, and its ack answered');
  // The events within the budget reached the handlers: one join, then "already joined".
  assert.ok(acks[0]!.ok);
  assert.equal((acks[1] as { ok: false; error: ErrorBody }).error.code, 'ERR_ALREADY_JOINED');
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.deepEqual(
    told.filter((e) => e.code === 'ERR_RATE_LIMITED').length,
    1,
    `told once per window, not once per event: ${JSON.stringify(told.map((e) => e.code))}`,
  );

  // Another student on the same machine joins another room and is served as usual.
  const other = await client();
  const joined = await join(other, 'calm-room', 'ok');
  assert.ok(joined.ok, JSON.stringify(joined));
  const status = await fetch(`${server.url}/api/rooms/calm-room`, AS_TEACHER);
  assert.equal(status.status, 200);
  assert.deepEqual(((await status.json()) as { members: Array<{ name: string }> }).members.map((m) => m.name), ['ok']);
  // The flooder's one membership is all its events achieved.
  const flood = (await (await fetch(`${server.url}/api/rooms/flood`, AS_TEACHER)).json()) as { members: Array<{ name: string }> };
  assert.deepEqual(flood.members.map((m) => m.name), ['f0']);
});

test('/api past its per-IP budget answers 429 ERR_RATE_LIMITED with Retry-After; /healthz stays up', async () => {
  const codes: number[] = [];
  let body: { ok: boolean; error?: ErrorBody } | null = null;
  let retryAfter: string | null = null;
  for (let i = 0; i < HTTP_BUDGET + 10; i++) {
    const res = await fetch(`${server.url}/api/info`);
    codes.push(res.status);
    if (res.status === 429) {
      body = (await res.json()) as { ok: boolean; error?: ErrorBody };
      retryAfter = res.headers.get('retry-after');
    } else await res.arrayBuffer();
  }
  // The first test's two room-status requests count against the same IP.
  assert.ok(codes.filter((c) => c === 200).length <= HTTP_BUDGET, codes.join(','));
  assert.equal(codes.at(-1), 429);
  assert.equal(body?.error?.code, 'ERR_RATE_LIMITED');
  assert.ok(Number(retryAfter) >= 1, `Retry-After ${retryAfter}`);
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
});
