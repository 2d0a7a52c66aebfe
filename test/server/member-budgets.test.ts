/**
 * Budgets follow the member, not the address (issue 57, defect 4), against a real server
 * with scaled-down budgets: every client here is on 127.0.0.1, as a class behind one school
 * NAT is on one address. One member's flood of requests or events is refused while a
 * classmate's reads, events and join-code reads go on; made-up tokens and connections that
 * have not joined spend the address's budget, which a member coming back passes; and behind a trusted proxy, two IPv6 addresses of one /64 share a budget (issue
 * 57, point 9).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { codeFor, connectClient, join, startTestServer, useTestServer, type TestSocket } from '../support/server';
import type { AckResult, JoinAccepted } from '../../shared/protocol';
import type { ErrorBody } from '../../shared/protocol/errors';

const SOCKET_BUDGET = 40;
const ADDRESS_EVENT_BUDGET = 60;
const HTTP_BUDGET = 20;
const t = useTestServer({ rateLimits: { socketEventsPerWindow: SOCKET_BUDGET, ipEventsPerWindow: ADDRESS_EVENT_BUDGET, httpRequestsPerWindow: HTTP_BUDGET, windowSeconds: 60 } });

async function member(room: string, name: string): Promise<{ socket: TestSocket; joined: JoinAccepted }> {
  const socket = await t.client(room);
  const joined = (await join(socket, room, name)) as AckResult<JoinAccepted>;
  assert.ok(joined.ok, JSON.stringify(joined));
  return { socket, joined };
}

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

async function statusOf(url: string, init?: RequestInit): Promise<{ status: number; code?: string }> {
  const res = await fetch(url, init);
  const body = (await res.json()) as { error?: ErrorBody };
  return { status: res.status, code: body.error?.code };
}

test('one member flooding /api is refused; a classmate on the same address reads with its token, and a join-code reader with its code', async () => {
  const room = 'nat-http';
  const ann = await member(room, 'ann');
  const bo = await member(room, 'bo');
  const url = `${t.server.url}/api/rooms/${room}`;
  const flood = [];
  for (let i = 0; i < HTTP_BUDGET * 2; i++) flood.push(await statusOf(url, bearer(ann.joined.memberToken)));
  assert.equal(flood.filter((r) => r.status === 200).length, HTTP_BUDGET, 'the flooder gets its own budget');
  assert.deepEqual(flood.at(-1), { status: 429, code: 'ERR_RATE_LIMITED' });

  for (const path of ['', '/metrics', '/checkpoints']) {
    assert.deepEqual(await statusOf(`${url}${path}`, bearer(bo.joined.memberToken)), { status: 200, code: undefined }, `bo reads ${path || 'the room'}`);
  }
  assert.deepEqual(await statusOf(url, { headers: { 'x-join-code': codeFor(room) } }), { status: 200, code: undefined }, 'a join-code reader on the same address');
});

test('made-up tokens spend the address\'s budget, and a member\'s budget is untouched by them', async () => {
  const room = 'nat-forged';
  const cy = await member(room, 'cy');
  const url = `${t.server.url}/api/rooms/${room}`;
  // The address's budget: the first test's join-code read spent one.
  const forged = [];
  for (let i = 0; i < HTTP_BUDGET; i++) forged.push((await statusOf(url, bearer(`made-up-${i}`))).status);
  assert.ok(forged.includes(401), 'a made-up token reads nothing');
  assert.equal(forged.at(-1), 429, `the address's budget is spent: ${forged.join(',')}`);
  assert.deepEqual(await statusOf(url, { headers: { 'x-join-code': codeFor(room) } }), { status: 429, code: 'ERR_RATE_LIMITED' });
  assert.deepEqual(await statusOf(url, bearer(cy.joined.memberToken)), { status: 200, code: undefined }, 'the member reads on');
});

test('one member flooding socket events is refused; a classmate on the same address sends its events', async () => {
  const room = 'nat-events';
  const ann = await member(room, 'ann');
  const bo = await member(room, 'bo');
  const ice = (socket: TestSocket) => new Promise<AckResult<unknown>>((resolve) => socket.emit('ice:config', resolve as never));
  // More than the address's budget for connections that have not joined, all from one member.
  const flood = await Promise.all(Array.from({ length: ADDRESS_EVENT_BUDGET + 40 }, () => ice(ann.socket)));
  const refused = flood.filter((a) => !a.ok && a.error.code === 'ERR_RATE_LIMITED').length;
  assert.equal(refused, ADDRESS_EVENT_BUDGET + 40 - (SOCKET_BUDGET - 1), 'past its own budget (its join spent one)');
  const classmate = await Promise.all(Array.from({ length: SOCKET_BUDGET - 1 }, () => ice(bo.socket)));
  assert.deepEqual(classmate.filter((a) => !a.ok).map((a) => (a as { error: ErrorBody }).error.code), [], 'every one of bo\'s events is served');
});

test('connections that have not joined spend the address\'s budget; a member coming back with its token rejoins past it', async () => {
  const room = 'nat-returning';
  const dee = await member(room, 'dee');
  const ice = (socket: TestSocket) => new Promise<AckResult<unknown>>((resolve) => socket.emit('ice:config', resolve as never));
  // Connections that never join: each within its own budget, together past the address's.
  const strangers = await Promise.all([0, 1].map(() => t.client(room)));
  const answers = await Promise.all(strangers.flatMap((s) => Array.from({ length: SOCKET_BUDGET }, () => ice(s))));
  assert.ok(answers.some((a) => !a.ok && a.error.code === 'ERR_RATE_LIMITED'), 'the address\'s budget is spent');
  const late = await ice(await t.client(room));
  assert.equal(late.ok ? 'served' : late.error.code, 'ERR_RATE_LIMITED', 'a fresh connection that has not joined is refused');

  // Dee's Wi-Fi blips (it reconnects before the server notices the old connection is gone):
  // its handshake carries its token, and its rejoin is its own event, not its address's.
  const again = t.keep(await connectClient(t.server, room, { room, code: codeFor(room), memberToken: dee.joined.memberToken }));
  const back = await new Promise<AckResult<JoinAccepted>>((resolve) =>
    again.emit('room:join', { room, name: 'dee', kind: 'node', backend: 'cpu', rejoin: { memberId: dee.joined.memberId, memberToken: dee.joined.memberToken } }, resolve),
  );
  assert.ok(back.ok, JSON.stringify(back));
  assert.ok((await ice(again)).ok, 'and its events are served');
});

test('behind a trusted proxy, two IPv6 addresses of one /64 share a budget; another /64 has its own', async () => {
  const budget = 5;
  const server = await startTestServer({ trustProxy: 'loopback', rateLimits: { httpRequestsPerWindow: budget, windowSeconds: 60 } });
  try {
    const from = (address: string) => fetch(`${server.url}/api/info`, { headers: { 'x-forwarded-for': address } }).then((r) => r.status);
    for (let i = 0; i < budget; i++) assert.equal(await from('2001:db8:1:2::a'), 200);
    assert.equal(await from('2001:db8:1:2:ffff::b'), 429, 'another address of the same /64');
    assert.equal(await from('2001:db8:1:3::a'), 200, 'another /64');
    assert.equal(await from('203.0.113.7'), 200, 'an IPv4 address');
  } finally {
    await server.close();
  }
});
