/**
 * The abuse suite, against a real server. What it throws: random and malformed
 * socket events, floods, oversized packets and uploads, path traversal, forged chief uploads,
 * stale and replayed messages. What it proves: the server stays up, other rooms are
 * unaffected, nothing on disk is corrupted, and a training room next door (two real Node
 * workers, spawned, training over WebRTC) keeps stepping. It prints the totals it threw.
 *
 * The attackers connect from other loopback addresses (127.0.0.2 and up) than the training
 * room (127.0.0.1), as students of another room on other machines would: the per-IP budgets
 * are then theirs alone. Attackers behind the same NAT as the class share its per-IP budget
 * (signaling-server/rate-limits.ts); that trade-off is not what this suite measures.
 * Replayed peer-to-peer ring messages are covered in test/unit/ring-allreduce.test.ts.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHash } from 'node:crypto';
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { io as connect } from 'socket.io-client';
import type { RunningServer } from '../../signaling-server/server';
import type { Logger } from '../../signaling-server/rooms/room-context';
import { lastLines, pollUntil, spawnNodeWorker, type SpawnedWorker } from '../support/processes';
import { RoomPersistence } from '../../signaling-server/rooms/room-persistence';
import { CHECKPOINT_TRUST_FILE } from '../../signaling-server/rooms/checkpoint-store';
import { wallClock } from '../../signaling-server/rooms/wall-clock';
import { DEFAULT_RATE_LIMITS } from '../../signaling-server/edge/rate-limits';
import {
  CLIENT_EVENT_NAMES,
  MAX_HTTP_JSON_BYTES,
  MAX_SOCKET_PACKET_BYTES,
  MAX_SIGNAL_BYTES,
  startConfigSchema,
  type AckResult,
  type JoinAccepted,
  type RoomStatus,
} from '../../shared/protocol';
import { CHECKPOINT_FILE_NAMES, CHECKPOINT_FILES, sha256Hex, type CheckpointInfo, type CheckpointMetadata } from '../../shared/checkpoints/checkpoint';
import { WeightsHasher } from '../../shared/util/weights-hash';
import { mulberry32 } from '../../shared/util/random';
import { AS_TEACHER, codeFor, connectClient, join, startTestServer, TEST_TOKEN, type TestSocket } from '../support/server';

const TRAIN_ROOM = 'abuse-train';
const ATTACK_ROOM = 'abuse-attackers';
const QUIET_ROOM = 'abuse-quiet';
/** The forgers' own room: its first member is its chief, with a real member token. */
const FORGE_ROOM = 'abuse-forgers';
const ROOMS = [TRAIN_ROOM, ATTACK_ROOM, QUIET_ROOM, FORGE_ROOM].sort();
/** Every attack comes from one of these; the class and the test's own checks from 127.0.0.1. */
const IP = { random: '127.0.0.2', guesses: '127.0.0.3', flood: '127.0.0.4', http: '127.0.0.5', httpFlood: '127.0.0.6', uploads: '127.0.0.7' };
const SEED = 20_240_607;

/** What the suite threw, for the closing summary. */
const thrown = { socketEvents: 0, rawPackets: 0, httpRequests: 0, connections: 0 };
/** How the server answered. */
const answered = { rateLimitedEvents: 0, refusedHandshakes: 0, http429: 0, disconnectedForSize: 0 };

let root: string;
let dataDir: string;
let outsideDir: string;
let server: RunningServer;
const serverErrors: string[] = [];
const processErrors: string[] = [];
const workers: SpawnedWorker[] = [];
const sockets: TestSocket[] = [];
let quiet: TestSocket;
const quietDisconnects: string[] = [];
let healthTimer: ReturnType<typeof setInterval> | null = null;
const health = { checks: 0, failures: [] as string[], maxLatencyMs: 0, lastUptimeS: 0 };
let pinned: { id: string; files: Map<string, string>; meta: CheckpointMetadata };
let trainBefore: RoomStatus;
let diskBefore: Map<string, string>;
let quietBefore: RoomStatus;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex');

/** A snapshot taken when no checkpoint or room.json is half-written (no temp files). */
async function settledSnapshot(dir: string): Promise<Map<string, string>> {
  for (let attempt = 0; ; attempt++) {
    const snap = snapshot(dir);
    if (![...snap.keys()].some((f) => f.includes('.tmp')) || attempt >= 50) return snap;
    await sleep(50);
  }
}

/** Every file under `dir`, relative path → sha256. */
function snapshot(dir: string, base = dir, out = new Map<string, string>()): Map<string, string> {
  for (const entry of readdirSync(dir)) {
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) snapshot(full, base, out);
    else out.set(path.relative(base, full), sha(readFileSync(full)));
  }
  return out;
}

interface HttpResult {
  status: number;
  body: string;
  json: { ok?: boolean; error?: { code?: string } } | null;
}

/** One raw HTTP request from `ip`: no URL normalisation, so `..` reaches the server as typed. */
function request(
  method: string,
  rawPath: string,
  options: { ip?: string; headers?: Record<string, string>; body?: Buffer | string; agent?: http.Agent } = {},
): Promise<HttpResult> {
  thrown.httpRequests++;
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: server.port, method, path: rawPath, headers: options.headers, localAddress: options.ip ?? IP.http, agent: options.agent ?? false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          let json = null;
          try {
            json = JSON.parse(body) as HttpResult['json'];
          } catch {
            // not JSON (static 404s)
          }
          if (res.statusCode === 429) answered.http429++;
          resolve({ status: res.statusCode ?? 0, body, json });
        });
      },
    );
    req.on('error', reject);
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}

const teacher = { authorization: `Bearer ${TEST_TOKEN}` };

async function roomStatus(room: string): Promise<RoomStatus> {
  return (await (await fetch(`${server.url}/api/rooms/${room}`, AS_TEACHER)).json()) as RoomStatus;
}

async function checkpoints(room: string): Promise<CheckpointInfo[]> {
  return (await (await fetch(`${server.url}/api/rooms/${room}/checkpoints`, AS_TEACHER)).json()) as CheckpointInfo[];
}

/** A socket.io connection from `ip`; resolves connected, or with the refusal's coded data. */
function attacker(ip: string, auth: unknown): Promise<{ socket: TestSocket; refused: { code?: string } | null }> {
  thrown.connections++;
  const socket = connect(server.url, {
    transports: ['websocket'],
    forceNew: true,
    reconnection: false,
    auth: auth as Record<string, unknown>,
    localAddress: ip,
  } as Parameters<typeof connect>[1]) as TestSocket;
  sockets.push(socket);
  return new Promise((resolve) => {
    socket.once('connect', () => resolve({ socket, refused: null }));
    socket.once('connect_error', (err: Error & { data?: { code?: string } }) => {
      answered.refusedHandshakes++;
      socket.disconnect();
      resolve({ socket, refused: err.data ?? { code: `no data: ${err.message}` } });
    });
  });
}

async function attackerIn(room: string, ip: string): Promise<TestSocket> {
  const { socket, refused } = await attacker(ip, { room, code: codeFor(room) });
  assert.equal(refused, null);
  return socket;
}

function emitWithAck(socket: TestSocket, event: string, ...args: unknown[]): Promise<AckResult<Record<string, unknown>>> {
  thrown.socketEvents++;
  return new Promise((resolve) => (socket.emit as (e: string, ...a: unknown[]) => void)(event, ...args, resolve));
}

/** A socket.io packet written straight onto the engine, bypassing the client's encoder. */
function rawPacket(socket: TestSocket, packet: string | Buffer): void {
  thrown.rawPackets++;
  (socket.io.engine as unknown as { write(d: string | Buffer): void }).write(packet);
}

function disconnected(socket: TestSocket, timeoutMs = 5_000): Promise<string> {
  return new Promise((resolve, reject) => {
    if (!socket.connected) return resolve('already');
    const timer = setTimeout(() => reject(new Error(`still connected after ${timeoutMs} ms`)), timeoutMs);
    socket.once('disconnect', (reason) => {
      clearTimeout(timer);
      resolve(reason);
    });
  });
}

/** Members of `room` that reported one and the same step, with their weights hashes. */
async function hashesAtOneStep(room: string, n: number): Promise<{ step: number; hashes: Array<string | null> }> {
  for (let attempt = 0; attempt < 400; attempt++) {
    const members = (await roomStatus(room)).members;
    if (members.length === n && members.every((m) => m.step === members[0]!.step && m.step > 0)) {
      return { step: members[0]!.step, hashes: members.map((m) => m.weightsHash) };
    }
    await sleep(25);
  }
  throw new Error('the members never reported the same step at once');
}

const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> => pollUntil(what, probe, timeoutMs, () => lastLines(workers, 15));

function spawnWorker(name: string): void {
  workers.push(spawnNodeWorker(server.url, TRAIN_ROOM, codeFor(TRAIN_ROOM), name));
}

// ---------------------------------------------------------------------------
// The server, the training room next door, and the quiet room
// ---------------------------------------------------------------------------
before(async () => {
  process.on('unhandledRejection', (reason) => processErrors.push(`unhandledRejection: ${String((reason as Error)?.stack ?? reason)}`));
  process.on('uncaughtException', (err) => processErrors.push(`uncaughtException: ${err.stack ?? String(err)}`));
  root = mkdtempSync(path.join(os.tmpdir(), 'webring-abuse-'));
  dataDir = path.join(root, 'data');
  outsideDir = path.join(root, 'outside');
  mkdirSync(outsideDir);
  writeFileSync(path.join(outsideDir, 'sentinel.txt'), 'nothing may be written next to DATA_DIR\n');
  const log: Logger = {
    info: () => {},
    warn: (m) => process.env.LOG_LEVEL === 'warn' && console.warn(m),
    error: (m) => serverErrors.push(m),
  };
  // Production rate limits, for the training room's sake.
  server = await startTestServer({ dataDir, log });

  for (const name of ['lab-0', 'lab-1']) spawnWorker(name);
  quiet = await connectClient(server, QUIET_ROOM);
  quiet.on('disconnect', (reason) => quietDisconnects.push(reason));
  sockets.push(quiet);
  assert.ok((await join(quiet, QUIET_ROOM, 'quiet')).ok);
  await waitFor('two workers in the training room', async () => (await roomStatus(TRAIN_ROOM)).members.length === 2, 60_000);

  const start = await fetch(`${server.url}/api/rooms/${TRAIN_ROOM}/start`, {
    method: 'POST',
    headers: { ...teacher, 'content-type': 'application/json' },
    // SGD keeps checkpoints small; maxToKeep keeps the pinned one from being pruned.
    body: JSON.stringify({ model: 'mlp', optimizer: 'sgd', learningRate: 0.05, batchSizePerWorker: 16, epochs: 100, saveEverySteps: 20, maxToKeep: 100, resumeFrom: 'none' }),
  });
  assert.equal(start.status, 200, await start.text());
  const first = await waitFor('the chief\'s first checkpoint', async () => (await checkpoints(TRAIN_ROOM)).at(-1), 90_000);
  const dir = path.join(dataDir, 'rooms', TRAIN_ROOM, 'checkpoints', first.id);
  pinned = {
    id: first.id,
    files: new Map(CHECKPOINT_FILE_NAMES.map((f) => [f, sha(readFileSync(path.join(dir, f)))])),
    meta: JSON.parse(readFileSync(path.join(dir, CHECKPOINT_FILES.metadata), 'utf8')) as CheckpointMetadata,
  };
  quietBefore = await roomStatus(QUIET_ROOM);
  trainBefore = await roomStatus(TRAIN_ROOM);
  diskBefore = await settledSnapshot(root);

  healthTimer = setInterval(() => {
    const t0 = Date.now();
    fetch(`${server.url}/healthz`).then(
      async (res) => {
        const body = (await res.json()) as { ok: boolean; uptimeS: number };
        health.checks++;
        health.maxLatencyMs = Math.max(health.maxLatencyMs, Date.now() - t0);
        if (res.status !== 200 || !body.ok) health.failures.push(`HTTP ${res.status}`);
        if (body.uptimeS < health.lastUptimeS) health.failures.push(`uptime went back: ${body.uptimeS} after ${health.lastUptimeS}`);
        health.lastUptimeS = body.uptimeS;
      },
      (err: unknown) => health.failures.push(String(err)),
    );
  }, 250);
});

after(async () => {
  if (healthTimer) clearInterval(healthTimer);
  for (const s of sockets) s.disconnect();
  for (const w of workers) w.child.kill('SIGKILL');
  await server?.close();
});

// ---------------------------------------------------------------------------
// Attacks
// ---------------------------------------------------------------------------
test('handshakes without the room\'s join code are refused; guessing is rate-limited per address', async () => {
  const bad: unknown[] = [
    undefined,
    {},
    { room: TRAIN_ROOM },
    { room: '../../etc/passwd', code: codeFor(TRAIN_ROOM) },
    { room: TRAIN_ROOM, code: 'x'.repeat(10_000) },
    { room: TRAIN_ROOM, code: { $ne: null } },
    { room: [TRAIN_ROOM], code: [codeFor(TRAIN_ROOM)] },
    { room: `${TRAIN_ROOM}\u0000`, code: codeFor(TRAIN_ROOM) },
    { ['__proto__']: { room: TRAIN_ROOM, code: codeFor(TRAIN_ROOM) } },
  ];
  for (const auth of bad) {
    const { refused } = await attacker(IP.guesses, auth);
    assert.equal(refused?.code, 'ERR_BAD_JOIN_CODE', JSON.stringify(auth));
  }
  // Wrong codes, including the attackers' own room's code for the training room.
  const wrong = [codeFor(ATTACK_ROOM), codeFor('another-room'), 'K7M-Q2P'];
  const budget = DEFAULT_RATE_LIMITS.badJoinCodesPerWindow;
  // All at once, as a guesser would: the budget holds for concurrent handshakes too.
  const GUESSES = budget + 40;
  const results = await Promise.all(Array.from({ length: GUESSES }, (_, i) => attacker(IP.guesses, { room: TRAIN_ROOM, code: wrong[i % wrong.length] })));
  const codes = results.map((r) => r.refused?.code ?? 'connected');
  assert.equal(codes.filter((c) => c === 'ERR_BAD_JOIN_CODE').length, budget, JSON.stringify(codes));
  assert.equal(codes.filter((c) => c === 'ERR_RATE_LIMITED').length, GUESSES - budget);
  // Past its budget the address is refused even with the right code; the class is not.
  assert.equal((await attacker(IP.guesses, { room: TRAIN_ROOM, code: codeFor(TRAIN_ROOM) })).refused?.code, 'ERR_RATE_LIMITED');
  assert.equal((await roomStatus(TRAIN_ROOM)).members.length, 2);
});

/** An own property, even named __proto__ (as JSON.parse makes it on the server), never the prototype. */
function ownKey(o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Payloads that are each wrong in their own way. */
function garbage(rand: () => number, depth = 0): unknown {
  const nasty = ['', '../../etc/passwd', '%2e%2e%2f%2e%2e%2f', '..%5c..%5c', '/etc/passwd', 'C:\\Windows\\win.ini', 'a\u0000b', 'ＡＢＣ', '．．／．．／', '..∕..∕', '<script>alert(1)</script>', '__proto__', 'constructor'];
  const numbers = [0, -0, -1, 0.5, 1e308, -1e308, 2 ** 53 + 2, 4_294_967_296, Number.MAX_VALUE, Number.MIN_VALUE];
  switch (Math.floor(rand() * (depth > 3 ? 6 : 11))) {
    case 0:
      return null;
    case 1:
      return rand() < 0.5;
    case 2:
      return numbers[Math.floor(rand() * numbers.length)];
    case 3:
      return nasty[Math.floor(rand() * nasty.length)];
    case 4:
      return 'x'.repeat(Math.floor(rand() * 20_000));
    case 5:
      return Buffer.from(Array.from({ length: Math.floor(rand() * 512) }, () => Math.floor(rand() * 256)));
    case 6:
      return Array.from({ length: Math.floor(rand() * 5) }, () => garbage(rand, depth + 1));
    case 7: {
      const keys = ['__proto__', 'constructor', 'prototype', 'room', 'name', 'run', 'generation', 'step', 'to', 'data', 'toString', 'valueOf', 'linkId', 'member'];
      const o: Record<string, unknown> = {};
      for (let i = Math.floor(rand() * 5); i >= 0; i--) ownKey(o, keys[Math.floor(rand() * keys.length)]!, garbage(rand, depth + 1));
      return o;
    }
    case 8: {
      let v: unknown = 'deep';
      for (let i = Math.floor(rand() * 200); i > 0; i--) v = rand() < 0.5 ? [v] : { a: v };
      return v;
    }
    default:
      return nearlyValid(rand, CLIENT_EVENT_NAMES[Math.floor(rand() * CLIENT_EVENT_NAMES.length)]!);
  }
}

/** A valid-looking payload of `event`, with one field broken (or none: then it is valid, from a non-member or for a stale run). */
function nearlyValid(rand: () => number, event: string, targets: string[] = []): unknown {
  const timing = { computeMs: 1, readbackMs: 1, crossMs: 0, commMs: 1, applyMs: 1 };
  const run = 1 + Math.floor(rand() * 3);
  const valid: Record<string, Record<string, unknown>> = {
    'room:join': { room: rand() < 0.8 ? ATTACK_ROOM : TRAIN_ROOM, name: `bot-${Math.floor(rand() * 1000)}`, kind: 'node', backend: 'cpu' },
    'signal:relay': { to: targets[Math.floor(rand() * targets.length)] ?? 'abcdef0123456789', linkId: 'l-1', data: { type: 'offer', sdp: 'v=0' } },
    'worker:progress': {
      run, generation: 1, step: 5, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 10, weightsHash: '0123456789abcdef', totalSteps: 100, computeMs: 1,
      hashChecked: false, hashMismatch: false, batchShare: 0.5, linkMBps: 1, learningRate: 0.001, speedVsMedian: 1, collective: { algorithm: 'ring', alphaMs: 0, betaMBps: 0, reason: 'test', timing },
    },
    'worker:evaluated': { run, generation: 1, step: 5, epoch: 0, accuracy: 0.9 },
    'worker:finished': { run, generation: 1, step: 5, reason: rand() < 0.5 ? 'failed' : 'completed' },
    'ring:drop': { run, generation: 1, member: targets[0] ?? 'abcdef0123456789', step: 5, computeMs: 9000, deadlineMs: 1000 },
    'ring:reform': { generation: Math.floor(rand() * 5), reason: 'link broke' },
  };
  const payload = { ...(valid[event] ?? { what: 'unknown' }) };
  const keys = Object.keys(payload);
  const r = rand();
  if (r < 0.4 && keys.length > 0) payload[keys[Math.floor(rand() * keys.length)]!] = garbage(rand, 4);
  else if (r < 0.55 && keys.length > 0) delete payload[keys[Math.floor(rand() * keys.length)]!];
  else if (r < 0.7) ownKey(payload, rand() < 0.5 ? '__proto__' : 'extra', { polluted: true });
  return payload;
}

test(`random and malformed socket events (seed ${SEED}) get coded answers, and the server stays up`, async () => {
  const rand = mulberry32(SEED);
  const trainIds = (await roomStatus(TRAIN_ROOM)).members.map((m) => m.id);
  const unknownNames = ['', 'room:', 'room:join ', 'ROOM:JOIN', 'admin:shutdown', '__proto__', 'constructor', 'x'.repeat(5_000), 'ring:generation', 'train:start', 'server:error'];
  const ATTACKERS = 4;
  const PER_ATTACKER = 750; // past the per-connection budget of 600 per window on purpose
  const acked = { expected: 0, answered: 0 };
  const codes = new Map<string, number>();
  const attackers = await Promise.all(Array.from({ length: ATTACKERS }, () => attackerIn(ATTACK_ROOM, IP.random)));
  await Promise.all(
    attackers.map(async (socket) => {
      socket.on('server:error', () => {});
      for (let i = 0; i < PER_ATTACKER; i++) {
        const known = rand() < 0.85;
        const event = known ? CLIENT_EVENT_NAMES[Math.floor(rand() * CLIENT_EVENT_NAMES.length)]! : unknownNames[Math.floor(rand() * unknownNames.length)]!;
        const payload = rand() < 0.5 ? nearlyValid(rand, event, trainIds) : garbage(rand);
        const shape = rand();
        const args: unknown[] = shape < 0.1 ? [] : shape < 0.2 ? [payload, garbage(rand), garbage(rand)] : [payload];
        // Acks: a function (the protocol's ack, or one on an event that has none), garbage where the ack goes, or none.
        const ackKind = rand();
        if (ackKind < 0.5) {
          const expectsAnswer = !known || (event === 'room:leave' ? args.length === 0 : (event === 'room:join' || event === 'signal:relay') && args.length === 1);
          if (expectsAnswer) acked.expected++;
          thrown.socketEvents++;
          (socket.emit as (e: string, ...a: unknown[]) => void)(event, ...args, (result: AckResult<object>) => {
            const code = result.ok ? 'ok' : result.error.code;
            codes.set(code, (codes.get(code) ?? 0) + 1);
            if (code === 'ERR_RATE_LIMITED') answered.rateLimitedEvents++;
            if (expectsAnswer) acked.answered++;
          });
        } else {
          if (ackKind < 0.75) args.push(garbage(rand));
          thrown.socketEvents++;
          (socket.emit as (e: string, ...a: unknown[]) => void)(event, ...args);
        }
        if (i % 25 === 24) await new Promise((r) => setImmediate(r));
      }
    }),
  );
  await waitFor('an answer to every ack the protocol promises', async () => acked.answered >= acked.expected, 10_000).catch(() => {});
  assert.equal(acked.answered, acked.expected, `acks answered: ${JSON.stringify(Object.fromEntries(codes))}`);
  assert.ok((codes.get('ERR_RATE_LIMITED') ?? 0) > 0, 'the events past the budget were refused');
  assert.ok((codes.get('ERR_BAD_REQUEST') ?? 0) > 0);
  for (const code of codes.keys()) assert.notEqual(code, 'ERR_INTERNAL');

  // Malformed socket.io packets straight onto the engine (which adds engine.io's "4"): each
  // is ignored or closes only its own connection.
  const malformed: Array<string | Buffer> = [
    '2', '4', '9', '2[', '2{"a":1}', '2[null]', '2[{}]', '2[1]', '2["connect"]', '2["disconnect"]', '2["newListener"]', '0', '0{"token":1}', '1', '4{"message":"x"}',
    '51-["room:join"]', '51-["room:join",{"_placeholder":true,"num":0}]', '51-["room:join",{"_placeholder":true,"num":5}]', '599999-["x"]', '5-1-["x"]',
    '2/admin,["room:join"]', '2/,["room:join"]', `2["room:join",${'['.repeat(40_000)}${']'.repeat(40_000)}]`, '3["not an ack"]', '31["late ack"]',
    '212345678901234567890["room:leave"]', '2-1["room:leave"]', '6', '61-[{"_placeholder":true,"num":0}]', Buffer.from([0, 1, 2, 3]), '\u0000\u0001', '',
  ];
  for (const packet of malformed) {
    const socket = await attackerIn(ATTACK_ROOM, IP.random);
    rawPacket(socket, packet);
    // Either the server ignores it or drops this one connection; it answers the next one either way.
    await Promise.race([disconnected(socket, 300).catch(() => null), sleep(300)]);
  }
  // A deep signal inside a valid packet, from a member of the attackers' room.
  const member = await attackerIn(ATTACK_ROOM, IP.random);
  const joined = await emitWithAck(member, 'room:join', { room: ATTACK_ROOM, name: 'deep', kind: 'node', backend: 'cpu' });
  if (joined.ok) {
    const deep = `{"a":${'['.repeat(20_000)}1${']'.repeat(20_000)}}`;
    const reply = new Promise<AckResult<object>>((resolve) => {
      const id = 777_777;
      (member.io.engine as unknown as { on(e: string, h: (d: unknown) => void): void }).on('message', (d) => {
        if (typeof d === 'string' && d.startsWith(`3${id}`)) resolve((JSON.parse(d.slice(`3${id}`.length)) as [AckResult<object>])[0]);
      });
      rawPacket(member, `2${id}["signal:relay",{"to":"${joined.memberId as string}","linkId":"l-1","data":${deep}}]`);
    });
    const answer = await Promise.race([reply, sleep(5_000).then(() => null)]);
    assert.ok(answer && !answer.ok, 'the deep signal is answered');
    assert.equal(answer.error.code, 'ERR_BAD_REQUEST');
  }
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
});

test('floods past the budget are refused with ERR_RATE_LIMITED, told once, and /healthz answers throughout', async () => {
  const flooder = await attackerIn(ATTACK_ROOM, IP.flood);
  const told: string[] = [];
  flooder.on('server:error', (e) => told.push(e.code));
  const FLOOD = 3_000;
  const latencies: number[] = [];
  const probe = (async () => {
    for (let i = 0; i < 10; i++) {
      const t0 = Date.now();
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
      latencies.push(Date.now() - t0);
      await sleep(50);
    }
  })();
  // Sent in bursts of 100 with a turn of the event loop between: the attacker shares this
  // process with the server, and its own encoding must not be what /healthz measures.
  const pending: Array<Promise<AckResult<Record<string, unknown>>>> = [];
  for (let i = 0; i < FLOOD; i++) {
    pending.push(emitWithAck(flooder, 'room:join', { room: ATTACK_ROOM, name: `flood-${i}`, kind: 'node', backend: 'cpu' }));
    if (i % 100 === 99) await new Promise((r) => setImmediate(r));
  }
  const acks = await Promise.all(pending);
  await probe;
  const limited = acks.filter((a) => !a.ok && a.error.code === 'ERR_RATE_LIMITED').length;
  answered.rateLimitedEvents += limited;
  assert.equal(limited, FLOOD - DEFAULT_RATE_LIMITS.socketEventsPerWindow);
  // Unknown events past the budget are refused too, not answered one for one.
  const unknownFlooder = await attackerIn(ATTACK_ROOM, IP.flood);
  const unknownTold: string[] = [];
  unknownFlooder.on('server:error', (e) => unknownTold.push(e.code));
  for (let i = 0; i < FLOOD; i++) {
    thrown.socketEvents++;
    (unknownFlooder.emit as (e: string, ...a: unknown[]) => void)('no:such-event', i);
    if (i % 100 === 99) await new Promise((r) => setImmediate(r));
  }
  await emitWithAck(unknownFlooder, 'room:leave').then((r) => assert.ok(!r.ok));
  await sleep(200);
  assert.ok(unknownTold.length <= DEFAULT_RATE_LIMITS.socketEventsPerWindow + 1, `${unknownTold.length} server:error replies to ${FLOOD} unknown events`);
  assert.equal(unknownTold.filter((c) => c === 'ERR_RATE_LIMITED').length, 1);
  assert.equal(told.filter((c) => c === 'ERR_RATE_LIMITED').length, 1);
  assert.ok(Math.max(...latencies) < 1_000, `/healthz latencies during the flood: ${latencies.join(', ')} ms`);

  // HTTP: past the per-address budget, 429; /healthz is not behind it. Kept-alive
  // connections, 100 at a time, until 300 requests were refused (how many that takes
  // depends on how fast this machine gets through a window's budget).
  const agent = new http.Agent({ keepAlive: true, maxSockets: 100, localAddress: IP.httpFlood } as http.AgentOptions);
  const statuses: number[] = [];
  const t0 = Date.now();
  while (statuses.filter((s) => s === 429).length < 300 && statuses.length < 8_000) {
    // A student of the room flooding it: reads need the join code.
    const batch = await Promise.all(Array.from({ length: 100 }, () => request('GET', `/api/rooms/${TRAIN_ROOM}`, { ip: IP.httpFlood, agent, headers: { 'x-join-code': codeFor(TRAIN_ROOM) } })));
    statuses.push(...batch.map((r) => r.status));
  }
  agent.destroy();
  assert.ok(statuses.filter((s) => s === 429).length >= 300, `429s: ${statuses.filter((s) => s === 429).length} of ${statuses.length} in ${(Date.now() - t0) / 1000} s`);
  assert.ok(statuses.every((s) => s === 200 || s === 429));
  assert.equal((await request('GET', '/healthz', { ip: IP.httpFlood })).status, 200);
});

test('oversized packets drop their connection; oversized and bomb-shaped HTTP bodies get 413 and 400', async () => {
  const member = await attackerIn(ATTACK_ROOM, IP.random);
  const joined = await emitWithAck(member, 'room:join', { room: ATTACK_ROOM, name: 'big', kind: 'node', backend: 'cpu' });
  if (joined.ok) {
    // Over MAX_SIGNAL_BYTES but within a packet: a coded refusal, the connection stays.
    const big = await emitWithAck(member, 'signal:relay', { to: joined.memberId, linkId: 'l-1', data: { sdp: 'x'.repeat(MAX_SIGNAL_BYTES + 10) } });
    assert.equal(!big.ok && big.error.code, 'ERR_PAYLOAD_TOO_LARGE');
    assert.ok(member.connected);
  }
  for (const payload of ['x'.repeat(MAX_SOCKET_PACKET_BYTES + 1), Buffer.alloc(MAX_SOCKET_PACKET_BYTES + 1)]) {
    const socket = await attackerIn(ATTACK_ROOM, IP.random);
    const gone = disconnected(socket);
    thrown.socketEvents++;
    socket.emit('signal:relay' as 'room:leave', payload as never);
    await gone;
    answered.disconnectedForSize++;
  }

  const json = { ...teacher, 'content-type': 'application/json' };
  const tooBig = await request('POST', `/api/rooms/${TRAIN_ROOM}/start`, { headers: json, body: JSON.stringify({ model: 'mlp', pad: 'x'.repeat(MAX_HTTP_JSON_BYTES) }) });
  assert.deepEqual([tooBig.status, tooBig.json?.error?.code], [413, 'ERR_PAYLOAD_TOO_LARGE']);
  const depth = MAX_HTTP_JSON_BYTES / 2 - 10;
  for (const body of [
    '['.repeat(depth) + ']'.repeat(depth),
    '{"model":' + '{"a":'.repeat(2_000) + '1' + '}'.repeat(2_001),
    '{"model":"mlp","__proto__":{"polluted":true}}',
    '{"constructor":{"prototype":{"polluted":true}}}',
    '{"model":"mlp",',
    '{"learningRate":1e999}',
    'null',
  ]) {
    const res = await request('POST', `/api/rooms/${TRAIN_ROOM}/start`, { headers: json, body });
    assert.deepEqual([res.status, res.json?.error?.code], [400, 'ERR_BAD_REQUEST'], body.slice(0, 60));
  }
  // Without the teacher token nothing is even parsed.
  const anon = await request('POST', `/api/rooms/${TRAIN_ROOM}/start`, { headers: { 'content-type': 'application/json' }, body: '['.repeat(depth) });
  assert.equal(anon.status, 401);
  // A valid config against the running room changes nothing.
  const again = await request('POST', `/api/rooms/${TRAIN_ROOM}/start`, { headers: json, body: '{}' });
  assert.deepEqual([again.status, again.json?.error?.code], [409, 'ERR_BAD_STATE']);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

test('path traversal in room names, checkpoint ids and file names gets coded 4xx, in events and routes', async () => {
  const evil = [
    '../../etc/passwd', '..%2F..%2Fetc%2Fpasswd', '%2e%2e%2f%2e%2e%2fetc', '%252e%252e%252f', '..%5c..%5cwin.ini', '..\\..\\win.ini', '/etc/passwd', '%2Fetc%2Fpasswd',
    'room%00.json', '%00', '%EF%BC%8E%EF%BC%8E%EF%BC%8F', '..%E2%88%95..%E2%88%95', '%C0%AE%C0%AE%2F', '.', '..', '...', '~', 'room.json',
  ];
  const ckpt = pinned.id;
  const routes: Array<[string, string]> = [];
  for (const e of evil) {
    routes.push(['GET', `/api/rooms/${e}`], ['GET', `/api/rooms/${e}/checkpoints`], ['GET', `/api/rooms/${e}/checkpoints/latest/model.json`]);
    routes.push(['GET', `/api/rooms/${TRAIN_ROOM}/checkpoints/${e}/model.json`], ['GET', `/api/rooms/${TRAIN_ROOM}/checkpoints/${ckpt}/${e}`]);
    routes.push(['GET', `/api/rooms/${TRAIN_ROOM}/checkpoints/latest/${e}`], ['POST', `/api/rooms/${e}/checkpoints`], ['POST', `/api/rooms/${e}/stop`]);
  }
  for (const raw of ['/api/rooms/abuse-train/checkpoints/../../../../../etc/passwd', '/../../../../etc/passwd', '/data/../../../etc/passwd', '/api/../../etc/passwd', `/api/rooms/${TRAIN_ROOM}/checkpoints/${ckpt}/../room.json`]) {
    routes.push(['GET', raw]);
  }
  for (const [method, route] of routes) {
    const res = await request(method, route, method === 'POST' ? { headers: teacher, body: '' } : {});
    assert.ok(res.status >= 400 && res.status < 500, `${method} ${route}: ${res.status} ${res.body.slice(0, 100)}`);
    assert.ok(!res.body.includes('root:'), `${method} ${route} leaked a file`);
    if (route.startsWith('/api/') && res.json) assert.ok(res.json.error?.code?.startsWith('ERR_'), `${method} ${route}: ${res.body.slice(0, 100)}`);
  }
  // In events: a room name with a traversal never gets past the schema, nor the handshake.
  const member = await attackerIn(ATTACK_ROOM, IP.random);
  for (const room of evil.map(decodeURIComponentSafe)) {
    const res = await emitWithAck(member, 'room:join', { room, name: 'trav', kind: 'node', backend: 'cpu' });
    assert.ok(!res.ok && ['ERR_BAD_REQUEST', 'ERR_BAD_JOIN_CODE'].includes(res.error.code), `${room}: ${JSON.stringify(res)}`);
    const { refused } = await attacker(IP.random, { room, code: codeFor(ATTACK_ROOM) });
    assert.equal(refused?.code, 'ERR_BAD_JOIN_CODE');
  }
});

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** A checkpoint upload the store would accept for `room` (small, made up, self-consistent). */
function fakeCheckpoint(room: string, step: number, weightFloats = 4): Record<string, Buffer> {
  const weights = Buffer.from(new Float32Array(weightFloats).fill(0.25).buffer);
  const optimizerData = Buffer.alloc(0);
  const meta: CheckpointMetadata = {
    format: 1, room, run: 1, step, epoch: 0, dataCursor: { epoch: 0, offset: 0 }, worldSize: 1, members: [],
    config: startConfigSchema.parse({ optimizer: 'sgd' }), backend: 'cpu', createdAt: new Date().toISOString(),
    weightsSha256: sha256Hex(weights), optimizerSha256: sha256Hex(optimizerData),
    weightsHash: new WeightsHasher().update(new Float32Array(weights.buffer, weights.byteOffset, weightFloats)).digest(),
  };
  return {
    [CHECKPOINT_FILES.model]: Buffer.from(JSON.stringify({ modelTopology: { class_name: 'Sequential' }, format: 'layers-model', weightsManifest: [{ paths: ['./model.weights.bin'], weights: [{ name: 'w', shape: [4], dtype: 'float32' }] }] })),
    [CHECKPOINT_FILES.weights]: weights,
    [CHECKPOINT_FILES.optimizerSpecs]: Buffer.from(JSON.stringify({ optimizer: 'sgd', weightSpecs: [] })),
    [CHECKPOINT_FILES.optimizerData]: optimizerData,
    [CHECKPOINT_FILES.metadata]: Buffer.from(JSON.stringify(meta)),
  };
}

function multipart(files: Record<string, Buffer>, boundary = 'abuse-boundary-7'): { body: Buffer; type: string } {
  const parts: Buffer[] = [];
  for (const [name, bytes] of Object.entries(files)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`), bytes, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), type: `multipart/form-data; boundary=${boundary}` };
}

function upload(room: string, token: string | null, files: Record<string, Buffer>, extra: { type?: string; body?: Buffer } = {}): Promise<HttpResult> {
  const form = multipart(files);
  const headers: Record<string, string> = { 'content-type': extra.type ?? form.type };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  return request('POST', `/api/rooms/${encodeURIComponent(room)}/checkpoints`, { ip: IP.uploads, headers, body: extra.body ?? form.body });
}

test('forged chief uploads are refused, and no checkpoint lands but the real chiefs\'', async () => {
  const trainChief = (await roomStatus(TRAIN_ROOM)).chief!;
  const join = async (name: string) => {
    const socket = await attackerIn(FORGE_ROOM, IP.uploads);
    const res = (await emitWithAck(socket, 'room:join', { room: FORGE_ROOM, name, kind: 'node', backend: 'cpu' })) as AckResult<JoinAccepted>;
    assert.ok(res.ok, JSON.stringify(res));
    return { socket, ...res };
  };
  const mine = await join('forger-a');
  const other = await join('forger-b');
  assert.equal((await roomStatus(FORGE_ROOM)).chief, mine.memberId);
  const forged = fakeCheckpoint(TRAIN_ROOM, 999_999);

  const refusals: Array<[string, Promise<HttpResult>, number]> = [
    ['no token', upload(TRAIN_ROOM, null, forged), 403],
    ['a wrong token', upload(TRAIN_ROOM, 'f'.repeat(48), forged), 403],
    ['an empty bearer', upload(TRAIN_ROOM, '', forged), 403],
    ['the teacher token', upload(TRAIN_ROOM, TEST_TOKEN, forged), 403],
    ['another room\'s member token', upload(TRAIN_ROOM, mine.memberToken, forged), 403],
    ['another room\'s member token, other', upload(TRAIN_ROOM, other.memberToken, forged), 403],
    ['a non-chief member token', upload(FORGE_ROOM, other.memberToken, fakeCheckpoint(FORGE_ROOM, 5)), 403],
    ['a member id as token', upload(TRAIN_ROOM, trainChief, forged), 403],
  ];
  for (const [what, res, want] of refusals) {
    const r = await res;
    assert.equal(r.status, want, `${what}: ${r.body.slice(0, 200)}`);
    assert.equal(r.json?.error?.code, 'ERR_NOT_CHIEF', what);
  }

  // The forgers' own chief: everything malformed or mismatched is a 400 or 413, nothing stored.
  // Its room trains (run 1, as the forged metadata says): checkpoints are stored only during a run.
  const forgersRun = await fetch(`${server.url}/api/rooms/${FORGE_ROOM}/start`, {
    method: 'POST',
    headers: { ...teacher, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'mlp', optimizer: 'sgd', resumeFrom: 'none' }),
  });
  assert.equal(forgersRun.status, 200, await forgersRun.text());
  const chiefToken = mine.memberToken;
  {
    const listBefore = (await checkpoints(FORGE_ROOM)).map((c) => c.id);
    const good = fakeCheckpoint(FORGE_ROOM, 3);
    const tamper = (file: string, bytes: Buffer) => ({ ...good, [file]: bytes });
    const metaWith = (patch: Record<string, unknown>) => Buffer.from(JSON.stringify({ ...JSON.parse(good[CHECKPOINT_FILES.metadata]!.toString()), ...patch }));
    const bad: Array<[string, Promise<HttpResult>, number]> = [
      ['metadata for the training room', upload(FORGE_ROOM, chiefToken, fakeCheckpoint(TRAIN_ROOM, 3)), 400],
      ['into the training room', upload(TRAIN_ROOM, chiefToken, fakeCheckpoint(TRAIN_ROOM, 3)), 403],
      ['weights not matching their sha256', upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.weights, Buffer.alloc(16, 1))), 400],
      ['weights shorter than the manifest', upload(FORGE_ROOM, chiefToken, fakeCheckpoint(FORGE_ROOM, 3, 3)), 400],
      ['weights longer than the manifest', upload(FORGE_ROOM, chiefToken, fakeCheckpoint(FORGE_ROOM, 3, 5)), 400],
      ['a manifest naming another file', upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.model, Buffer.from(JSON.stringify({ modelTopology: {}, weightsManifest: [{ paths: ['../../../../etc/passwd'], weights: [{ name: 'w', shape: [4], dtype: 'float32' }] }] })))), 400],
      ['metadata that is not JSON', upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.metadata, Buffer.from('{"format":1,'))), 400],
      ['metadata of a negative step', upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.metadata, metaWith({ step: -1 }))), 400],
      ['metadata with a path for a room', upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.metadata, metaWith({ room: '../../outside' }))), 400],
      ['a missing file', upload(FORGE_ROOM, chiefToken, Object.fromEntries(Object.entries(good).slice(1))), 400],
      ['an extra file field', upload(FORGE_ROOM, chiefToken, { ...good, '../../outside/evil.bin': Buffer.from('x') }), 400],
      ['a field that is not a file', request('POST', `/api/rooms/${FORGE_ROOM}/checkpoints`, { ip: IP.uploads, headers: { authorization: `Bearer ${chiefToken}`, 'content-type': 'multipart/form-data; boundary=b' }, body: Buffer.from('--b\r\nContent-Disposition: form-data; name="metadata.json"\r\n\r\n{}\r\n--b--\r\n') }), 400],
      ['a truncated multipart body', upload(FORGE_ROOM, chiefToken, good, { body: multipart(good).body.subarray(0, 300) }), 400],
      ['a multipart body with another boundary', upload(FORGE_ROOM, chiefToken, good, { type: 'multipart/form-data; boundary=nope' }), 400],
      ['multipart without a boundary', upload(FORGE_ROOM, chiefToken, good, { type: 'multipart/form-data' }), 400],
      ['JSON instead of multipart', upload(FORGE_ROOM, chiefToken, good, { type: 'application/json', body: Buffer.from('{}') }), 400],
      ['a file over the cap', upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.optimizerData, Buffer.alloc(32 * 1024 * 1024 + 1))), 413],
    ];
    for (const [what, res, want] of bad) {
      const r = await res;
      assert.equal(r.status, want, `${what}: ${r.body.slice(0, 200)}`);
      assert.ok(r.json?.error?.code?.startsWith('ERR_') && r.json.error.code !== 'ERR_INTERNAL', `${what}: ${r.body.slice(0, 200)}`);
    }
    assert.deepEqual((await checkpoints(FORGE_ROOM)).map((c) => c.id), listBefore);

    // A stale chief: once it has left, its token writes nothing.
    const left = new Promise<void>((resolve) => mine.socket.once('disconnect', () => resolve()));
    mine.socket.disconnect();
    await left;
    await waitFor('the forgers\' second member to be chief', async () => (await roomStatus(FORGE_ROOM)).chief === other.memberId, 5_000);
    const stale = await upload(FORGE_ROOM, chiefToken, good);
    assert.deepEqual([stale.status, stale.json?.error?.code], [403, 'ERR_NOT_CHIEF']);
    assert.deepEqual((await checkpoints(FORGE_ROOM)).map((c) => c.id), listBefore);
  }
  // The training room's checkpoints are all its own chief's.
  const list = await checkpoints(TRAIN_ROOM);
  assert.ok(list.length > 0);
  for (const c of list) assert.equal(c.writer, trainBefore.chief, `checkpoint ${c.id} written by ${c.writer}`);
  assert.ok(list.every((c) => c.step < 999_999));
});

test('stale and replayed room messages from strangers and other rooms\' members leave the training room alone', async () => {
  const train = await roomStatus(TRAIN_ROOM);
  const [chief, second] = train.members;
  const run = train.run;
  const generation = train.generation;
  // A member of the attackers' room replays what a real member of the training room would send.
  const outsider = await attackerIn(ATTACK_ROOM, IP.random);
  const outsiderJoin = await emitWithAck(outsider, 'room:join', { room: ATTACK_ROOM, name: 'replayer', kind: 'node', backend: 'cpu' });
  // A stranger: let in with the attackers' code, never joined.
  const stranger = await attackerIn(ATTACK_ROOM, IP.random);
  const replays: Array<[string, unknown]> = [
    ['worker:progress', { run, generation, step: train.step + 1_000, epoch: 0, loss: 0, trainAccuracy: 1, examplesPerSec: 1e9, weightsHash: 'ffffffffffffffff', totalSteps: 1, computeMs: 0, hashChecked: true, hashMismatch: true, batchShare: 1, linkMBps: 0, learningRate: 0.001, speedVsMedian: 1, collective: { algorithm: 'ring', alphaMs: 0, betaMBps: 0, reason: 'test', timing: { dataMs: 0, computeMs: 0, readbackMs: 0, crossMs: 0, commMs: 0, applyMs: 0 } } }],
    ['worker:finished', { run, generation, step: train.step, reason: 'failed', code: 'ERR_TIMEOUT' }],
    ['worker:finished', { run: Math.max(1, run - 1), generation: Math.max(0, generation - 1), step: 0, reason: 'completed' }],
    ['worker:evaluated', { run, generation, step: train.step, epoch: 0, accuracy: 0 }],
    ['ring:drop', { run, generation, member: second!.id, step: train.step, computeMs: 99_999, deadlineMs: 1 }],
    ['ring:drop', { run, generation, member: chief!.id, step: train.step, computeMs: 99_999, deadlineMs: 1 }],
    ['ring:reform', { generation, reason: 'replayed' }],
    ['ring:reform', { generation: generation - 1, reason: 'stale' }],
  ];
  const told: string[] = [];
  outsider.on('server:error', (e) => told.push(e.code));
  stranger.on('server:error', (e) => told.push(e.code));
  for (let round = 0; round < 20; round++) {
    for (const [event, payload] of replays) {
      for (const s of [outsider, stranger]) {
        thrown.socketEvents++;
        (s.emit as (e: string, p: unknown) => void)(event, payload);
      }
    }
  }
  // Replayed signals: to the training room's members (refused), and a valid earlier one within the attackers' room.
  for (const to of [chief!.id, second!.id]) {
    const r = await emitWithAck(outsider, 'signal:relay', { to, linkId: 'g1-0-1', data: { type: 'offer', sdp: 'v=0' } });
    assert.equal(!r.ok && r.error.code, 'ERR_NOT_IN_ROOM');
    const s = await emitWithAck(stranger, 'signal:relay', { to, linkId: 'g1-0-1', data: { type: 'offer', sdp: 'v=0' } });
    assert.equal(!s.ok && s.error.code, 'ERR_NOT_IN_ROOM');
  }
  if (outsiderJoin.ok) {
    const self = outsiderJoin.memberId as string;
    const relayed: unknown[] = [];
    outsider.on('signal:relay', (r) => relayed.push(r));
    for (let i = 0; i < 3; i++) assert.ok((await emitWithAck(outsider, 'signal:relay', { to: self, linkId: 'g1-0-1', data: { type: 'offer', sdp: 'v=0' } })).ok);
    await sleep(100);
    // The server relays what a member of the room sends; the peers drop replaced link ids (shared/ring-network.ts).
    assert.equal(relayed.length, 3);
  }
  // A rejoin claim on the training room's chief, from a stranger holding only another room's code.
  const claim = await emitWithAck(stranger, 'room:join', { room: TRAIN_ROOM, name: 'imposter', kind: 'node', backend: 'cpu', rejoin: { memberId: chief!.id, memberToken: 'a'.repeat(48) } });
  assert.equal(!claim.ok && claim.error.code, 'ERR_BAD_JOIN_CODE');
  await sleep(300);
  assert.ok(told.length > 0 && told.every((c) => ['ERR_NOT_IN_ROOM', 'ERR_STALE_RUN', 'ERR_NOT_CHIEF', 'ERR_BAD_REQUEST'].includes(c)), told.join(','));

  const after = await roomStatus(TRAIN_ROOM);
  assert.equal(after.generation, generation, 'no re-form, no drop');
  assert.equal(after.run, run);
  assert.equal(after.state, 'training');
  assert.deepEqual(after.members.map((m) => m.id), train.members.map((m) => m.id));
  assert.ok(after.step >= train.step, 'the step never goes back');
  assert.ok(after.step < train.step + 1_000);
  assert.equal(after.consistency.mismatches, 0);
  assert.deepEqual(after.dropped, []);
});

// ---------------------------------------------------------------------------
// What it proves
// ---------------------------------------------------------------------------
test('what it proves: the server is up, the other rooms are unaffected, the disk is intact, the class kept stepping', async () => {
  // The training room: stepping, nobody dropped, replicas identical.
  const after = await waitFor('the training room to step on', async () => {
    const s = await roomStatus(TRAIN_ROOM);
    return s.step >= trainBefore.step + 20 ? s : null;
  }, 30_000);
  assert.equal(after.state, 'training');
  assert.equal(after.generation, trainBefore.generation, `the ring never re-formed: ${JSON.stringify(after.events.slice(-4))}\n${lastLines(workers, 20)}`);
  assert.deepEqual(after.members.map((m) => m.id), trainBefore.members.map((m) => m.id));
  assert.ok(after.members.every((m) => m.connected));
  assert.deepEqual(after.dropped, []);
  assert.ok(!after.events.some((e) => ['left', 'dropped', 'reformed', 'resynced'].includes(e.kind) && e.at >= trainBefore.events.at(-1)!.at), JSON.stringify(after.events.slice(-5)));
  const together = await hashesAtOneStep(TRAIN_ROOM, 2);
  assert.equal(new Set(together.hashes).size, 1, `hashes at step ${together.step}: ${together.hashes.join(', ')}`);
  for (const w of workers) assert.equal(w.child.exitCode, null, w.output.slice(-10).join('\n'));

  // The quiet room: the same member, the same generation.
  const quietAfter = await roomStatus(QUIET_ROOM);
  assert.equal(quietAfter.generation, quietBefore.generation);
  assert.deepEqual(quietAfter.members.map((m) => [m.id, m.connected]), quietBefore.members.map((m) => [m.id, true]));
  assert.deepEqual(quietDisconnects, []);
  assert.ok(quiet.connected);

  // The disk: the pinned checkpoint byte for byte, and it still loads as a model.
  const dir = path.join(dataDir, 'rooms', TRAIN_ROOM, 'checkpoints', pinned.id);
  for (const [file, digest] of pinned.files) assert.equal(sha(readFileSync(path.join(dir, file))), digest, `${pinned.id}/${file} changed`);
  await tf.setBackend('cpu');
  const model = await tf.loadLayersModel(`${server.url}/api/rooms/${TRAIN_ROOM}/checkpoints/${pinned.id}/model.json`, { requestInit: AS_TEACHER });
  const hasher = new WeightsHasher();
  for (const w of model.getWeights()) hasher.update((await w.data()) as Float32Array);
  assert.equal(hasher.digest(), pinned.meta.weightsHash);
  model.dispose();

  // Every file written since the barrage began is one the server should write, in its place.
  const diskAfter = await settledSnapshot(root);
  const allowed = [
    new RegExp(`^data/rooms/(${ROOMS.join('|')})/room\\.json$`),
    // A checkpoint's five files, and the server's verdict on it (which a later report may rewrite).
    new RegExp(`^data/rooms/${TRAIN_ROOM}/checkpoints/ckpt-[0-9]{10}-[a-z0-9]{6}/(${[...CHECKPOINT_FILE_NAMES, CHECKPOINT_TRUST_FILE].map((f) => f.replace('.', '\\.')).join('|')})$`),
  ];
  for (const [file, digest] of diskAfter) {
    if (diskBefore.get(file) === digest) continue;
    assert.ok(allowed.some((re) => re.test(file)), `unexpected file written: ${file}`);
  }
  for (const file of diskBefore.keys()) {
    assert.ok(diskAfter.has(file), `file removed: ${file}`);
  }
  assert.deepEqual(readdirSync(outsideDir), ['sentinel.txt']);
  assert.deepEqual(readdirSync(path.join(dataDir, 'rooms')).sort(), ROOMS);
  // Every room.json parses with the server's own schema (the loader warns about any that does not).
  const warnings: string[] = [];
  const loaded = await new RoomPersistence(dataDir, { info: () => {}, warn: (m) => warnings.push(m), error: (m) => warnings.push(m) }, wallClock).loadAll();
  assert.deepEqual(warnings, []);
  assert.deepEqual(loaded.map((r) => r.name).sort(), ROOMS);

  // The server: the same instance answered every health check, and nothing went wrong inside it.
  assert.ok(health.checks > 20, `${health.checks} health checks`);
  assert.deepEqual(health.failures, []);
  assert.deepEqual(serverErrors, []);
  assert.deepEqual(processErrors, []);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);

  const summary =
    `abuse: ${thrown.socketEvents + thrown.rawPackets} socket events (${thrown.rawPackets} of them raw packets), ${thrown.httpRequests} HTTP requests, ` +
    `${thrown.connections} connections; refused: ${answered.rateLimitedEvents} events rate-limited, ${answered.refusedHandshakes} handshakes, ` +
    `${answered.http429} HTTP 429s, ${answered.disconnectedForSize} connections dropped for size; training room stepped ${trainBefore.step} -> ${after.step}, ` +
    `/healthz worst ${health.maxLatencyMs} ms over ${health.checks} checks`;
  console.log(summary);
});
