/**
 * `npm run bench:slow-reader`: the slow-reader attack on the data service, against the real
 * server in a child process (so the resident memory measured is the server's alone).
 *
 * One member of a room opens ATTACK_CONNECTIONS raw TCP connections that each send bursts
 * of pipelined requests for the largest reply the data service gives (1,024 examples), at
 * a pace inside the /api rate limit, and never read a byte. Meanwhile a second member fetches
 * a step's worth of examples every HONEST_EVERY_MS, as a worker does. Prints the server's RSS
 * before, at its peak and after, the bytes the server counted as served, how many attack
 * connections the server cut, and whether the honest member was served throughout.
 * Asserts nothing.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { io as connect, type Socket } from 'socket.io-client';
import type { AckResult, ClientToServerEvents, JoinAccepted, RoomStatus, ServerToClientEvents } from '../../shared/protocol';
import { MAX_EXAMPLES_PER_REQUEST } from '../../shared/data/data-service';
import { joinCodeFor } from '../../signaling-server/edge/join-codes';
import { startServer } from '../../signaling-server/server';
import { createLogger } from '../../signaling-server/logger';

const TEACHER_TOKEN = 'bench-teacher-token';
const JOIN_SECRET = Buffer.from('bench-join-secret-0123456789');
const ROOM = 'slow-reader';
const ATTACK_CONNECTIONS = 100;
const ATTACK_MS = 20_000;
/**
 * Each attack connection writes a burst of BURST_REQUESTS pipelined requests this often: 100
 * connections make 200 requests a second, inside the 240 a second /api allows one address.
 * A burst arrives in one TCP segment, so the server parses all of it before it can pause.
 */
const BURST_EVERY_MS = 5_000;
const BURST_REQUESTS = 10;
/** What the attacker asks for each time: the largest reply one request may get. */
const ATTACK_PATH = `/api/rooms/${ROOM}/data/mnist-60k/train?ranges=0-${MAX_EXAMPLES_PER_REQUEST - 1}`;
/** The honest member fetches one step of 32 examples this often. */
const HONEST_EVERY_MS = 1_000;
const HONEST_TIMEOUT_MS = 10_000;
/** After the attack, each connection reads for this long to learn whether the server cut it. */
const DRAIN_MS = 3_000;
/** How long after the attack ends the "after" RSS is read: time for the server to let go. */
const SETTLE_MS = 5_000;
const RSS_POLL_MS = 100;

type BenchSocket = Socket<ServerToClientEvents, ClientToServerEvents>;

/** The child: the real server on a free loopback port, silent, printing its URL when ready. */
async function serve(): Promise<void> {
  const server = await startServer({
    port: 0,
    host: '127.0.0.1',
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'webring-slow-reader-')),
    teacherToken: TEACHER_TOKEN,
    joinSecret: JOIN_SECRET,
    clientDir: path.join(os.tmpdir(), 'webring-no-client'),
    log: createLogger('silent'),
  });
  process.send?.({ url: server.url });
}

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(0)} MB`;

async function member(url: string, name: string): Promise<{ socket: BenchSocket; token: string }> {
  const socket: BenchSocket = connect(url, { transports: ['websocket'], forceNew: true, reconnection: false, auth: { room: ROOM, code: joinCodeFor(JOIN_SECRET, ROOM) } });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('connect_error', reject);
  });
  const joined = await new Promise<AckResult<JoinAccepted>>((resolve) => socket.emit('room:join', { room: ROOM, name, kind: 'node', backend: 'cpu' }, resolve));
  if (!joined.ok) throw new Error(`${name} could not join: ${joined.error.code} ${joined.error.message}`);
  return { socket, token: joined.memberToken };
}

/** How an attack connection ended: cut by the server or still open, what it was answered, and the bytes it got. */
interface AttackEnd {
  cut: boolean;
  statuses: Map<string, number>;
  receivedBytes: number;
}

/**
 * A connection that writes a burst of requests every BURST_EVERY_MS until `until` and reads
 * nothing meanwhile. Then it reads what the kernel holds for it for DRAIN_MS: a connection
 * the server cut ends there (after the bytes already on their way); one it kept stays open.
 */
function attacker(port: number, token: string, until: number): Promise<AttackEnd> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.pause();
    let timer: NodeJS.Timeout | undefined;
    let ended = false;
    let receivedBytes = 0;
    const statuses = new Map<string, number>();
    const burst = `GET ${ATTACK_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n\r\n`.repeat(BURST_REQUESTS);
    const send = () => {
      if (Date.now() < until && !socket.destroyed) socket.write(burst);
    };
    socket.once('connect', () => {
      send();
      timer = setInterval(send, BURST_EVERY_MS);
    });
    socket.on('data', (chunk: Buffer) => {
      receivedBytes += chunk.length;
      // Status lines, counted roughly: the text around binary bodies is enough to find them.
      for (const m of chunk.toString('latin1').matchAll(/HTTP\/1\.1 (\d{3})/g)) statuses.set(m[1]!, (statuses.get(m[1]!) ?? 0) + 1);
    });
    // A reset is one way the server lets go; the outcome is read below.
    socket.on('error', () => (ended = true));
    socket.once('end', () => (ended = true));
    socket.once('close', () => (ended = true));
    setTimeout(() => {
      clearInterval(timer);
      socket.resume();
      setTimeout(() => {
        resolve({ cut: ended, statuses, receivedBytes });
        socket.destroy();
      }, DRAIN_MS);
    }, until - Date.now());
  });
}

async function main(): Promise<void> {
  const child: ChildProcess = fork(import.meta.filename, ['--serve'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.once('message', (m) => resolve((m as { url: string }).url));
      child.once('exit', (code) => reject(new Error(`the server exited with ${code}`)));
    });
    const port = Number(new URL(url).port);
    const pid = child.pid!;
    const attack = await member(url, 'attacker');
    const honest = await member(url, 'honest');
    // Load the dataset once before measuring, as the class's first request does.
    await (await fetch(`${url}/api/rooms/${ROOM}/data/mnist-60k/train?ranges=0`, { headers: { authorization: `Bearer ${honest.token}` } })).arrayBuffer();
    await new Promise((r) => setTimeout(r, 1_000));
    const before = rssOf(pid);
    let peak = before;
    const poll = setInterval(() => (peak = Math.max(peak, rssOf(pid))), RSS_POLL_MS);

    const until = Date.now() + ATTACK_MS;
    const ends = Array.from({ length: ATTACK_CONNECTIONS }, () => attacker(port, attack.token, until));
    const honestResults: Array<{ ok: boolean; ms: number; status: number }> = [];
    let step = 0;
    while (Date.now() < until) {
      const t = performance.now();
      const from = 32 * (1 + (step++ % 1_000));
      try {
        const res = await fetch(`${url}/api/rooms/${ROOM}/data/mnist-60k/train?ranges=${from}-${from + 31}`, { headers: { authorization: `Bearer ${honest.token}` }, signal: AbortSignal.timeout(HONEST_TIMEOUT_MS) });
        await res.arrayBuffer();
        honestResults.push({ ok: res.ok, ms: performance.now() - t, status: res.status });
      } catch (err) {
        honestResults.push({ ok: false, ms: performance.now() - t, status: 0 });
        console.log(`honest fetch failed: ${(err as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, HONEST_EVERY_MS));
    }
    const endings = await Promise.all(ends);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    clearInterval(poll);
    const after = rssOf(pid);
    const status = (await (await fetch(`${url}/api/rooms/${ROOM}`, { headers: { authorization: `Bearer ${TEACHER_TOKEN}` } })).json()) as RoomStatus;
    attack.socket.disconnect();
    honest.socket.disconnect();

    const served = honestResults.filter((r) => r.ok);
    const slowest = Math.max(0, ...served.map((r) => r.ms));
    console.log(`slow-reader attack: ${ATTACK_CONNECTIONS} connections, each ${BURST_REQUESTS} pipelined ${MAX_EXAMPLES_PER_REQUEST}-example requests every ${BURST_EVERY_MS / 1000} s, never read, for ${ATTACK_MS / 1000} s`);
    console.log(`server RSS: before ${mb(before)}, peak ${mb(peak)}, after ${mb(after)}`);
    console.log(`bytes of examples the server sent (or queued) for the room: ${mb(status.data.bytesServed)}; the attack connections received ${mb(endings.reduce((sum, e) => sum + e.receivedBytes, 0))} when they finally read`);
    const statuses = new Map<string, number>();
    for (const e of endings) for (const [code, n] of e.statuses) statuses.set(code, (statuses.get(code) ?? 0) + n);
    console.log(`answers the attack connections read: ${[...statuses].sort().map(([code, n]) => `${n} × ${code}`).join(', ') || 'none'}`);
    console.log(`attack connections cut by the server: ${endings.filter((e) => e.cut).length} of ${ATTACK_CONNECTIONS}`);
    console.log(`honest member: ${served.length} of ${honestResults.length} step fetches served, slowest ${slowest.toFixed(0)} ms; refusals: ${honestResults.filter((r) => !r.ok).map((r) => r.status).join(', ') || 'none'}`);
  } finally {
    child.kill('SIGKILL');
  }
}

if (process.argv.includes('--serve')) {
  serve().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
