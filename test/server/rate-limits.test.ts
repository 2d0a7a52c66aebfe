/**
 * Rate limits at the edge, against a real server: a flooding connection is refused with
 * ERR_RATE_LIMITED (its acks answered, told once per window, not once per event), while
 * another student on the same machine joins and trains on; /api answers 429 with
 * Retry-After past its budget, and the server stays up. A limiter that fails (its store is
 * down) answers every event with ERR_INTERNAL instead of leaving it unanswered.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { RunningServer } from '../../signaling-server/server';
import type { AckResult, JoinAccepted } from '../../shared/protocol';
import type { ErrorBody } from '../../shared/protocol/errors';
import { RateLimits } from '../../signaling-server/edge/rate-limits';
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

/** A limiter whose counters cannot be reached, as one backed by a Redis that is down. */
class FailingLimits extends RateLimits {
  override socketEvent(): Promise<never> {
    return Promise.reject(new Error('connection to the limiter store lost'));
  }
}

test('when the rate limiter itself fails, every ack hears ERR_INTERNAL, and the failure is logged once per connection', async () => {
  const errors: string[] = [];
  const failing = await startTestServer({ rateLimiter: new FailingLimits(), log: { info: () => {}, warn: () => {}, error: (m) => errors.push(m) } });
  const socket = await connectClient(failing, 'limiter-down');
  try {
    const toldOnce: ErrorBody[] = [];
    socket.on('server:error', (body) => toldOnce.push(body));
    const acks = await Promise.all(
      [0, 1, 2].map(() => new Promise<AckResult<JoinAccepted>>((resolve) => socket.emit('room:join', { room: 'limiter-down', name: 'a', kind: 'node', backend: 'cpu' }, resolve))),
    );
    for (const ack of acks) assert.deepEqual(ack.ok ? 'accepted' : ack.error.code, 'ERR_INTERNAL');
    assert.equal(errors.filter((m) => m.includes('rate limiter failed')).length, 1, errors.join('\n'));
    assert.deepEqual(toldOnce, [], 'an ack was there to answer; no extra event');
  } finally {
    socket.disconnect();
    await failing.close();
  }
});
