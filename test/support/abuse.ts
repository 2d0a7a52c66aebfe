/**
 * The abuse suite's harness (test/class/abuse-sockets.test.ts, test/class/abuse-http.test.ts),
 * against a real server: the server with a training room next door (two real Node workers,
 * spawned, training over WebRTC) and a quiet room, the attackers' connections and raw
 * requests with the totals they throw, and the closing proof that the server stays up,
 * other rooms are unaffected, nothing on disk is corrupted and the class keeps stepping.
 *
 * The attackers connect from other loopback addresses (127.0.0.2 and up) than the training
 * room (127.0.0.1), as students of another room on other machines would: the per-IP budgets
 * are then theirs alone. Attackers behind the same NAT as the class share its per-IP budget
 * (signaling-server/rate-limits.ts); that trade-off is not what this suite measures.
 */
import { before, after } from 'node:test';
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
import { lastLines, pollUntil, spawnNodeWorker, type SpawnedWorker } from './processes';
import { RoomPersistence } from '../../signaling-server/rooms/room-persistence';
import { CHECKPOINT_TRUST_FILE } from '../../signaling-server/rooms/checkpoint-store';
import { wallClock } from '../../signaling-server/rooms/wall-clock';
import type { AckResult, RoomStatus } from '../../shared/protocol';
import { CHECKPOINT_FILE_NAMES, CHECKPOINT_FILES, type CheckpointInfo, type CheckpointMetadata } from '../../shared/checkpoints/checkpoint';
import { WeightsHasher } from '../../shared/util/weights-hash';
import { AS_TEACHER, codeFor, connectClient, join, startTestServer, TEST_TOKEN, type TestSocket } from './server';

export const TRAIN_ROOM = 'abuse-train';
export const ATTACK_ROOM = 'abuse-attackers';
export const QUIET_ROOM = 'abuse-quiet';
/** The forgers' own room: its first member is its chief, with a real member token. */
export const FORGE_ROOM = 'abuse-forgers';
/** Every attack comes from one of these; the class and the test's own checks from 127.0.0.1. */
export const IP = { random: '127.0.0.2', guesses: '127.0.0.3', flood: '127.0.0.4', http: '127.0.0.5', httpFlood: '127.0.0.6', uploads: '127.0.0.7' };

/** What the suite threw, for the closing summary. */
export const thrown = { socketEvents: 0, rawPackets: 0, httpRequests: 0, connections: 0 };
/** How the server answered. */
export const answered = { rateLimitedEvents: 0, refusedHandshakes: 0, http429: 0, disconnectedForSize: 0 };

let root: string;
let dataDir: string;
let outsideDir: string;
export let server: RunningServer;
const serverErrors: string[] = [];
const processErrors: string[] = [];
const workers: SpawnedWorker[] = [];
const sockets: TestSocket[] = [];
let quiet: TestSocket;
const quietDisconnects: string[] = [];
let healthTimer: ReturnType<typeof setInterval> | null = null;
const health = { checks: 0, failures: [] as string[], maxLatencyMs: 0, lastUptimeS: 0 };
export let pinned: { id: string; files: Map<string, string>; meta: CheckpointMetadata };
export let trainBefore: RoomStatus;
let diskBefore: Map<string, string>;
let quietBefore: RoomStatus;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
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

export interface HttpResult {
  status: number;
  body: string;
  json: { ok?: boolean; error?: { code?: string } } | null;
}

/** One raw HTTP request from `ip`: no URL normalisation, so `..` reaches the server as typed. */
export function request(
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

export const teacher = { authorization: `Bearer ${TEST_TOKEN}` };

export async function roomStatus(room: string): Promise<RoomStatus> {
  return (await (await fetch(`${server.url}/api/rooms/${room}`, AS_TEACHER)).json()) as RoomStatus;
}

export async function checkpoints(room: string): Promise<CheckpointInfo[]> {
  return (await (await fetch(`${server.url}/api/rooms/${room}/checkpoints`, AS_TEACHER)).json()) as CheckpointInfo[];
}

/** A socket.io connection from `ip`; resolves connected, or with the refusal's coded data. */
export function attacker(ip: string, auth: unknown): Promise<{ socket: TestSocket; refused: { code?: string } | null }> {
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

export async function attackerIn(room: string, ip: string): Promise<TestSocket> {
  const { socket, refused } = await attacker(ip, { room, code: codeFor(room) });
  assert.equal(refused, null);
  return socket;
}

export function emitWithAck(socket: TestSocket, event: string, ...args: unknown[]): Promise<AckResult<Record<string, unknown>>> {
  thrown.socketEvents++;
  return new Promise((resolve) => (socket.emit as (e: string, ...a: unknown[]) => void)(event, ...args, resolve));
}

/** A socket.io packet written straight onto the engine, bypassing the client's encoder. */
export function rawPacket(socket: TestSocket, packet: string | Buffer): void {
  thrown.rawPackets++;
  (socket.io.engine as unknown as { write(d: string | Buffer): void }).write(packet);
}

export function disconnected(socket: TestSocket, timeoutMs = 5_000): Promise<string> {
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

export const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> => pollUntil(what, probe, timeoutMs, () => lastLines(workers, 15));

function spawnWorker(name: string): void {
  workers.push(spawnNodeWorker(server.url, TRAIN_ROOM, codeFor(TRAIN_ROOM), name));
}

/**
 * The server, the training room next door and the quiet room, for one abuse file: started in
 * node:test's before() (two Node workers training to their first checkpoint, the pinned
 * checkpoint and the disk recorded, /healthz polled every 250 ms), stopped in after(). Call
 * it at the file's top level.
 */
export function useAbuseServer(): void {
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
}

/**
 * What an abuse file proves once its attacks are thrown: the server is up, the other rooms
 * are unaffected, the disk is intact, the class kept stepping. `roomNames` are the rooms the
 * setup and the file's attacks leave on disk (each writes its room.json); `name` heads the
 * totals it prints.
 */
export async function proveUnharmed(name: string, roomNames: string[]): Promise<void> {
  const rooms = [...roomNames].sort();
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
    new RegExp(`^data/rooms/(${rooms.join('|')})/room\\.json$`),
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
  assert.deepEqual(readdirSync(path.join(dataDir, 'rooms')).sort(), rooms);
  // Every room.json parses with the server's own schema (the loader warns about any that does not).
  const warnings: string[] = [];
  const loaded = await new RoomPersistence(dataDir, { info: () => {}, warn: (m) => warnings.push(m), error: (m) => warnings.push(m) }, wallClock).loadAll();
  assert.deepEqual(warnings, []);
  assert.deepEqual(loaded.map((r) => r.name).sort(), rooms);

  // The server: the same instance answered every health check, and nothing went wrong inside it.
  // A file whose barrage is over in seconds polls on until there are enough checks to count.
  await waitFor('more than 20 health checks', async () => health.checks > 20, 15_000).catch(() => {});
  assert.ok(health.checks > 20, `${health.checks} health checks`);
  assert.deepEqual(health.failures, []);
  assert.deepEqual(serverErrors, []);
  assert.deepEqual(processErrors, []);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);

  const summary =
    `${name}: ${thrown.socketEvents + thrown.rawPackets} socket events (${thrown.rawPackets} of them raw packets), ${thrown.httpRequests} HTTP requests, ` +
    `${thrown.connections} connections; refused: ${answered.rateLimitedEvents} events rate-limited, ${answered.refusedHandshakes} handshakes, ` +
    `${answered.http429} HTTP 429s, ${answered.disconnectedForSize} connections dropped for size; training room stepped ${trainBefore.step} -> ${after.step}, ` +
    `/healthz worst ${health.maxLatencyMs} ms over ${health.checks} checks`;
  console.log(summary);
}
