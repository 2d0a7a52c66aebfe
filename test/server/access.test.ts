/**
 * Access: a classroom link must not let strangers in. Every room has a join code, derived
 * from the server's secret; the socket.io auth middleware turns away a connection without its room's code, with a coded
 * error in connect_error's data; a connection may join only the room it was let in for;
 * wrong codes are rate-limited per IP; only the teacher can read a room's code.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { io as connect } from 'socket.io-client';
import type { RunningServer } from '../../signaling-server/server';
import { JOIN_SECRET_FILE, joinCodeFor, joinCodeMatches, loadOrCreateJoinSecret } from '../../signaling-server/edge/join-codes';
import { JOIN_CODE_ALPHABET, isCanonicalJoinCode, normalizeJoinCode } from '../../shared/protocol/join-code';
import type { ErrorBody } from '../../shared/protocol/errors';
import type { AckResult, JoinAccepted, RoomJoinInfo } from '../../shared/protocol';
import { AS_TEACHER, codeFor, connectClient, join, startTestServer, TEST_JOIN_SECRET, TEST_TOKEN, type TestSocket } from '../support/server';

const BAD_CODE_BUDGET = 5;
let server: RunningServer;
const sockets: TestSocket[] = [];

before(async () => {
  server = await startTestServer();
});
after(async () => {
  for (const s of sockets) s.disconnect();
  await server.close();
});

/** The coded error a refused handshake carries, or a failure if the connection was let in. */
async function refusal(auth: unknown, at: { url: string } = server, forwardedFor?: string): Promise<ErrorBody> {
  const extraHeaders = forwardedFor ? { 'x-forwarded-for': forwardedFor } : undefined;
  const socket: TestSocket = connect(at.url, { transports: ['websocket'], forceNew: true, reconnection: false, auth: auth as Record<string, unknown>, extraHeaders });
  sockets.push(socket);
  return new Promise((resolve, reject) => {
    socket.once('connect', () => reject(new Error(`let in with ${JSON.stringify(auth)}`)));
    socket.once('connect_error', (err: Error & { data?: ErrorBody }) => resolve(err.data ?? { code: 'ERR_INTERNAL', message: err.message }));
  });
}

test('join codes: six unambiguous characters, fixed per room and secret, different across rooms and secrets', () => {
  const secret = Buffer.from('a-secret-of-enough-length');
  const code = joinCodeFor(secret, 'class');
  assert.ok(isCanonicalJoinCode(code), code);
  assert.equal(joinCodeFor(secret, 'class'), code, 'the same room always has the same code');
  assert.ok(!/[01ILO]/.test(JOIN_CODE_ALPHABET), 'no look-alikes');
  const codes = new Set(Array.from({ length: 500 }, (_, i) => joinCodeFor(secret, `room-${i}`)));
  assert.ok(codes.size >= 499, `500 rooms got ${codes.size} distinct codes`);
  for (const c of codes) for (const ch of c.replace('-', '')) assert.ok(JOIN_CODE_ALPHABET.includes(ch));
  assert.notEqual(joinCodeFor(Buffer.from('another-secret-of-length'), 'class'), code, 'another secret, another code');
  assert.ok(joinCodeMatches(secret, 'class', code));
  assert.ok(!joinCodeMatches(secret, 'class', joinCodeFor(secret, 'klass')));
  // Typed loosely, read exactly.
  assert.equal(normalizeJoinCode(code.toLowerCase()), code);
  assert.equal(normalizeJoinCode(` ${code.replace('-', ' ')} `), code);
  assert.equal(normalizeJoinCode(code.replace('-', '')), code);
  for (const bad of ['', 'K7M-Q2', 'K7M-Q2PX', 'K0M-Q2P', 'KIM-Q2P', 'K7M_Q2P', '../../x']) assert.equal(normalizeJoinCode(bad), null, bad);
});

test('the secret is made once and kept in DATA_DIR (0600), JOIN_SECRET overrides it, and a damaged one is a clear error', async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'webring-secret-'));
  const first = await loadOrCreateJoinSecret(dataDir);
  assert.deepEqual(await loadOrCreateJoinSecret(dataDir), first, 'a restart keeps every code');
  const stat = await fs.stat(path.join(dataDir, JOIN_SECRET_FILE));
  assert.equal(stat.mode & 0o777, 0o600);
  // Two nodes starting together on one shared DATA_DIR agree.
  const shared = mkdtempSync(path.join(os.tmpdir(), 'webring-secret-'));
  const [a, b] = await Promise.all([loadOrCreateJoinSecret(shared), loadOrCreateJoinSecret(shared)]);
  assert.deepEqual(a, b);
  assert.deepEqual(await loadOrCreateJoinSecret(dataDir, 'from-the-environment'), Buffer.from('from-the-environment'));
  await assert.rejects(loadOrCreateJoinSecret(dataDir, 'short'), /at least 16 characters/);
  await fs.writeFile(path.join(dataDir, JOIN_SECRET_FILE), 'not hex\n');
  await assert.rejects(loadOrCreateJoinSecret(dataDir), /delete it to make a new one/);
});

test('a connection without its room\'s join code is refused with ERR_BAD_JOIN_CODE; the right code joins', async () => {
  const code = codeFor('locked');
  for (const auth of [undefined, {}, { room: 'locked' }, { code }, { room: 'locked', code: 'AAA-AAA' }, { room: '../etc', code }, { room: 'locked', code: 42 }]) {
    const e = await refusal(auth);
    assert.equal(e.code, 'ERR_BAD_JOIN_CODE', JSON.stringify(auth));
    assert.ok(e.message.length > 0);
  }
  const status = async () => (await (await fetch(`${server.url}/api/rooms/locked`, AS_TEACHER)).json()) as { members: unknown[] };
  assert.equal((await status()).members.length, 0, 'nobody got in');
  const s = await connectClient(server, 'locked');
  sockets.push(s);
  const joined = await join(s, 'locked', 'with-code');
  assert.ok(joined.ok, JSON.stringify(joined));
  assert.equal((await status()).members.length, 1);
});

test('a connection let in for one room cannot join another', async () => {
  const s = await connectClient(server, 'room-a');
  sockets.push(s);
  const refused: AckResult<JoinAccepted> = await new Promise((resolve) => s.emit('room:join', { room: 'room-b', name: 'x', kind: 'node', backend: 'cpu' }, resolve));
  assert.ok(!refused.ok);
  assert.equal(refused.error.code, 'ERR_BAD_JOIN_CODE');
  assert.equal(refused.error.field, 'room');
  const b = (await (await fetch(`${server.url}/api/rooms/room-b`, AS_TEACHER)).json()) as { members: unknown[] };
  assert.equal(b.members.length, 0);
});

test('only the teacher reads a room\'s join code and class links', async () => {
  assert.equal((await fetch(`${server.url}/api/rooms/class/join`)).status, 401);
  assert.equal((await fetch(`${server.url}/api/rooms/class/join`, { headers: { authorization: 'Bearer wrong' } })).status, 401);
  const res = await fetch(`${server.url}/api/rooms/class/join`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
  assert.equal(res.status, 200);
  const info = (await res.json()) as RoomJoinInfo;
  assert.equal(info.code, joinCodeFor(TEST_JOIN_SECRET, 'class'));
  assert.ok(info.localUrl.endsWith(`/?room=class&code=${info.code}`));
  assert.equal((await fetch(`${server.url}/api/rooms/..%2F..%2Fetc/join`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } })).status, 400);
});

test('guessing is rate-limited per IP: past the budget even the right code waits, and the server says so', async () => {
  const guarded = await startTestServer({ rateLimits: { badJoinCodesPerWindow: BAD_CODE_BUDGET, badJoinCodeWindowSeconds: 60 } });
  try {
    const member = await connectClient(guarded, 'guessed');
    sockets.push(member);
    assert.ok((await join(member, 'guessed', 'already-in')).ok);
    for (let i = 0; i < BAD_CODE_BUDGET; i++) {
      assert.equal((await refusal({ room: 'guessed', code: `AAA-AA${JOIN_CODE_ALPHABET[i]}` }, guarded)).code, 'ERR_BAD_JOIN_CODE');
    }
    const blocked = await refusal({ room: 'guessed', code: codeFor('guessed') }, guarded);
    assert.equal(blocked.code, 'ERR_RATE_LIMITED');
    assert.match(blocked.message, /try again in \d+ s/);
    // The member already in is not touched: still connected, still in the room.
    assert.ok(member.connected);
    const room = (await (await fetch(`${guarded.url}/api/rooms/guessed`, AS_TEACHER)).json()) as { members: Array<{ name: string }> };
    assert.deepEqual(room.members.map((m) => m.name), ['already-in']);
  } finally {
    await guarded.close();
  }
});

test('behind a trusted load balancer the wrong-code budget is per student; an untrusted X-Forwarded-For is ignored', async () => {
  const wrong = (i: number) => ({ room: 'proxied', code: `AAA-AA${JOIN_CODE_ALPHABET[i]}` });
  const right = { room: 'proxied', code: codeFor('proxied') };
  const letIn = async (at: RunningServer, forwardedFor: string) => {
    const socket: TestSocket = connect(at.url, { transports: ['websocket'], forceNew: true, reconnection: false, auth: right, extraHeaders: { 'x-forwarded-for': forwardedFor } });
    sockets.push(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', () => resolve());
      socket.once('connect_error', reject);
    });
  };
  const limits = { badJoinCodesPerWindow: 2, badJoinCodeWindowSeconds: 60 };
  const behindBalancer = await startTestServer({ rateLimits: limits, trustProxy: 'loopback' });
  const direct = await startTestServer({ rateLimits: limits });
  try {
    // Trusted: one student spends their own budget, the next student is not blocked.
    for (let i = 0; i < 2; i++) assert.equal((await refusal(wrong(i), behindBalancer, '203.0.113.9')).code, 'ERR_BAD_JOIN_CODE');
    assert.equal((await refusal(right, behindBalancer, '203.0.113.9')).code, 'ERR_RATE_LIMITED');
    await letIn(behindBalancer, '203.0.113.10');
    // Not trusted: a guesser cannot escape its budget by claiming another address.
    for (let i = 0; i < 2; i++) assert.equal((await refusal(wrong(i), direct, `198.51.100.${i}`)).code, 'ERR_BAD_JOIN_CODE');
    assert.equal((await refusal(right, direct, '198.51.100.77')).code, 'ERR_RATE_LIMITED');
  } finally {
    await behindBalancer.close();
    await direct.close();
  }
});

test('reading a room takes its join code, a member token or the teacher token; a wrong code is a counted guess', async () => {
  const s = await connectClient(server, 'private');
  sockets.push(s);
  const member = await join(s, 'private', 'quiet');
  assert.ok(member.ok);
  const other = await connectClient(server, 'elsewhere');
  sockets.push(other);
  const stranger = await join(other, 'elsewhere', 'stranger');
  assert.ok(stranger.ok);
  const read = (path: string, headers: Record<string, string> = {}) => fetch(`${server.url}/api/rooms/private${path}`, { headers });
  for (const path of ['', '/metrics', '/checkpoints', '/checkpoints/latest/model.json']) {
    const refused = await read(path);
    assert.equal(refused.status, 401, path);
    assert.equal(((await refused.json()) as { error: ErrorBody }).error.code, 'ERR_UNAUTHORIZED');
  }
  const wrong = await read('', { 'x-join-code': 'AAA-AAA' });
  assert.equal(wrong.status, 403);
  assert.equal(((await wrong.json()) as { error: ErrorBody }).error.code, 'ERR_BAD_JOIN_CODE');
  assert.equal((await read('', { authorization: `Bearer ${stranger.memberToken}` })).status, 401, "another room's member token");
  const code = codeFor('private');
  const readers: Array<Record<string, string>> = [{ 'x-join-code': code.toLowerCase() }, { authorization: `Bearer ${member.memberToken}` }, { authorization: `Bearer ${TEST_TOKEN}` }];
  for (const headers of readers) {
    const res = await read('', headers);
    assert.equal(res.status, 200, JSON.stringify(headers));
    assert.deepEqual(((await res.json()) as { members: Array<{ name: string }> }).members.map((m) => m.name), ['quiet']);
  }
  // A download link carries the code in its query.
  assert.equal((await read(`/metrics?code=${code}`)).status, 200);
});
