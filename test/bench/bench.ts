/**
 * `npm run bench`: how fast the collectives are on this machine, against the bounds that
 * matter. Prints numbers and writes bench/results.json, bench/results.md and
 * bench/chart.svg; asserts nothing (targets are reported, never tested against timings).
 *
 * - allreduce: the ring between N = 2, 3, 4 Chromium tabs on 1, 4 and 16 MB, beside the
 *   ring-shift link throughput measured in the same run (every tab sends to its right
 *   neighbour at once: the physical limit of a ring here) and the same all-reduce relayed
 *   through a socket.io server (the naive star).
 * - small: 128 and 512 KB, ring against halving-doubling, on 2, 4 and 8 tabs and on 16 and
 *   30 headless Node peers (and the CNN's 23 KB gradient there), with the α and β the peers
 *   measured, what 'auto' picks and how far that is from the faster of the two.
 * - split: one training step of the MLP and the CNN on 1 to 4 tabs, split into compute,
 *   read-back, all-reduce and apply, as the chief reports it to the room API.
 *
 * BENCH_PARTS (default allreduce,small,split; small-tabs and small-node run half of small), BENCH_REPS (5) and BENCH_BACKEND (the tabs'
 * backend for the split, default webgpu) narrow or change a run.
 */
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { Server } from 'socket.io';
import { chromium, type Browser, type Page } from '@playwright/test';
import { CHROMIUM_ARGS } from '../../playwright.config';
import { buildClientIfNeeded, CLIENT_DIST } from '../../signaling-server/build-client';
import { createLogger } from '../../signaling-server/logger';
import { startServer, type RunningServer } from '../../signaling-server/server';
import { chooseAlgorithm, type LinkModel, type LinkModels } from '../../shared/collectives/choice';
import type { Algorithm, RoomStatus, StepTimingReport } from '../../shared/protocol';
import { chartSvg, markdown, type AllReduceRow, type BenchResults, type SmallBufferRow, type StepSplitRow } from './report';
import type { NodePeerCommand, NodePeerReply } from './node-peers';
import { joinCodeFor } from '../../signaling-server/edge/join-codes';

/** A command without its id (distributes over the union, which Omit does not). */
type NodePeerRequest = NodePeerCommand extends infer C ? (C extends unknown ? Omit<C, 'id'> : never) : never;

const MB = 1024 * 1024;
const KB = 1024;
const PARTS = new Set((process.env.BENCH_PARTS ?? 'allreduce,small,split').split(','));
const REPS = Number(process.env.BENCH_REPS ?? 5);
const SPLIT_BACKEND = process.env.BENCH_BACKEND ?? 'webgpu';
const OUT_DIR = path.resolve(import.meta.dirname, '../../bench');
const TOKEN = 'bench';
/** A fresh secret per bench run: the bench derives every room's join code from it, as the server does. */
const JOIN_SECRET = randomBytes(32);
/** Bytes every tab sends its right neighbour in the ring-shift measurement. */
const SHIFT_BYTES = 16 * MB;
const NODE_PEERS_PER_PROCESS = 8;
/** Classes of Node peers: a large class and a class of thirty, where the α term decides. */
const NODE_CLASS_SIZES = [16, 30];
/** The CNN's gradient (23 KiB), then 128 and 512 KB: where the α term gives way to the bytes. */
const NODE_BUFFER_BYTES = [23 * KB, 128 * KB, 512 * KB];
const SPLIT_STEPS = { mlp: 40, cnn: 16 } as const;
/** Steps before these are left out of the split: the first steps compile kernels and measure links. */
const SPLIT_WARMUP_STEPS = 4;
const RELAY_MAX_BYTES = 64 * MB;
/** Child processes of the Node peers; killed on the way out, whatever happened. */
const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

type BenchWindow = Window & {
  benchJoin(): Promise<number>;
  benchAllReduce(bytes: number, reps: number, algorithm: Algorithm): Promise<number[]>;
  benchMeasure(bytes: number): Promise<LinkModels>;
  benchStar(bytes: number, reps: number): Promise<number[]>;
  benchSendToRight(bytes: number): Promise<number>;
  benchReceiveFromLeft(bytes: number): Promise<number>;
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** A collective ends when its slowest rank ends: the max over ranks of each repetition, then the median. */
const collectiveMs = (perRank: number[][]) => median(perRank[0]!.map((_, i) => Math.max(...perRank.map((t) => t[i]!))));
/** The mean over ranks, as the gradient tail agrees it. */
const meanModels = (all: LinkModels[]): LinkModels => {
  const mean = (pick: (m: LinkModels) => LinkModel | null): LinkModel | null => {
    const ok = all.map(pick).filter((l): l is LinkModel => l !== null);
    if (ok.length === 0) return null;
    return { alphaMs: ok.reduce((s, l) => s + l.alphaMs, 0) / ok.length, betaBytesPerMs: ok.reduce((s, l) => s + l.betaBytesPerMs, 0) / ok.length };
  };
  return { ring: mean((m) => m.ring), halvingDoubling: mean((m) => m.halvingDoubling), hub: mean((m) => m.hub) };
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let roomCounter = 0;
const newRoom = (what: string) => `bench-${what}-${Date.now().toString(36)}-${roomCounter++}`;

/** The naive alternative: a socket.io server that relays every rank's buffer to rank 0 and the sum back. */
async function startRelay(): Promise<{ url: string; close(): Promise<void> }> {
  const httpServer = http.createServer();
  const io = new Server(httpServer, { maxHttpBufferSize: RELAY_MAX_BYTES, cors: { origin: '*' } });
  io.on('connection', (socket) => {
    let room = '';
    socket.on('hello', (m: { room: string; rank: number }, ack: () => void) => {
      room = m.room;
      void socket.join(room);
      if (m.rank === 0) void socket.join(`${room}:root`);
      ack();
    });
    socket.on('up', (m: unknown) => io.to(`${room}:root`).emit('up', m));
    socket.on('down', (m: unknown) => socket.to(room).emit('down', m));
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => io.close(() => resolve())),
  };
}

async function openTabs(browser: Browser, baseUrl: string, n: number, relayUrl: string): Promise<Page[]> {
  const room = newRoom(`tabs${n}`);
  const pages: Page[] = [];
  for (let i = 0; i < n; i++) {
    const page = await (await browser.newContext()).newPage();
    page.on('pageerror', (e) => console.error(`tab ${i}: ${e.message}`));
    await page.goto(`${baseUrl}/bench.html?room=${room}&code=${joinCodeFor(JOIN_SECRET, room)}&n=${n}&relay=${encodeURIComponent(relayUrl)}`);
    pages.push(page);
  }
  const ranks = await Promise.all(pages.map((p) => p.evaluate(() => (window as unknown as BenchWindow).benchJoin())));
  // Index i is rank i.
  return ranks.map((_, i) => pages[ranks.indexOf(i)]!);
}

/**
 * Runs `fn` in every tab at once. Playwright sends its source text, so it may use only its
 * argument and the page's globals (the bench functions on `window`).
 */
const onTabs = <T, A>(pages: Page[], fn: (arg: A) => Promise<T>, arg: A): Promise<T[]> =>
  Promise.all(pages.map((p) => (p.evaluate as (f: (a: A) => Promise<T>, a: A) => Promise<T>).call(p, fn, arg)));

/** Every tab sends SHIFT_BYTES to its right neighbour at once; MB/s of the slowest link. */
async function ringShiftMBps(pages: Page[]): Promise<number> {
  const arrivals = onTabs(pages, (bytes) => (window as unknown as BenchWindow).benchReceiveFromLeft(bytes), SHIFT_BYTES);
  const starts = await onTabs(pages, (bytes) => (window as unknown as BenchWindow).benchSendToRight(bytes), SHIFT_BYTES);
  const ends = await arrivals;
  const n = pages.length;
  // Tab r receives from tab r-1.
  const perLink = ends.map((end, r) => end - starts[(r - 1 + n) % n]!);
  return SHIFT_BYTES / MB / (Math.max(...perLink) / 1000);
}

async function allReduceRows(browser: Browser, server: RunningServer, relayUrl: string): Promise<AllReduceRow[]> {
  const rows: AllReduceRow[] = [];
  for (const n of [2, 3, 4]) {
    const pages = await openTabs(browser, server.url, n, relayUrl);
    // Two samples of the link; the better one is the limit.
    const linkMBps = Math.max(await ringShiftMBps(pages), await ringShiftMBps(pages));
    for (const mb of [1, 4, 16]) {
      const bytes = mb * MB;
      const allreduceMs = collectiveMs(await onTabs(pages, ([b, r]) => (window as unknown as BenchWindow).benchAllReduce(b, r, 'ring'), [bytes, REPS] as const));
      const starMs = collectiveMs(await onTabs(pages, ([b, r]) => (window as unknown as BenchWindow).benchStar(b, r), [bytes, REPS] as const));
      const busMBps = (mb / (allreduceMs / 1000)) * ((2 * (n - 1)) / n);
      const row = { n, bytes, allreduceMs, busMBps, linkMBps, ratio: busMBps / linkMBps, starMs, speedupVsStar: starMs / allreduceMs };
      console.log(`N=${n} ${mb} MB: ring ${allreduceMs.toFixed(1)} ms, bus ${busMBps.toFixed(1)} MB/s, link ${linkMBps.toFixed(1)} MB/s (${(row.ratio * 100).toFixed(0)} %), star ${starMs.toFixed(1)} ms (ring ${row.speedupVsStar.toFixed(2)}x)`);
      rows.push(row);
    }
    await Promise.all(pages.map((p) => p.context().close()));
  }
  return rows;
}

function smallRow(n: number, peers: SmallBufferRow['peers'], bytes: number, models: LinkModels, ringMs: number, halvingDoublingMs: number): SmallBufferRow {
  // No hub in these rooms: the choice is between the ring and halving-doubling.
  const auto = chooseAlgorithm('auto', n, bytes, models, { mesh: true, hub: false });
  if (auto === 'hub') throw new Error('no hub in a bench room, yet the choice named it');
  const autoMs = auto === 'ring' ? ringMs : halvingDoublingMs;
  const autoVsBest = autoMs / Math.min(ringMs, halvingDoublingMs);
  const ring = models.ring!;
  const hd = models.halvingDoubling!;
  const row: SmallBufferRow = {
    n,
    peers,
    bytes,
    alphaMs: ring.alphaMs,
    betaMBps: ring.betaBytesPerMs / 1e3,
    hdAlphaMs: hd.alphaMs,
    hdBetaMBps: hd.betaBytesPerMs / 1e3,
    ringMs,
    halvingDoublingMs,
    auto,
    autoMs,
    speedupAutoVsRing: ringMs / autoMs,
    autoVsBest,
  };
  console.log(
    `N=${n} ${peers} ${bytes / KB} KB: ring ${ringMs.toFixed(1)} ms, halving-doubling ${halvingDoublingMs.toFixed(1)} ms; ring α ${ring.alphaMs.toFixed(2)} ms β ${row.betaMBps.toFixed(1)} MB/s, halving-doubling α ${hd.alphaMs.toFixed(2)} ms β ${row.hdBetaMBps.toFixed(1)} MB/s -> auto ${auto} (${row.speedupAutoVsRing.toFixed(2)}x the ring, ${autoVsBest.toFixed(2)}x the faster)`,
  );
  return row;
}

async function smallRowsTabs(browser: Browser, server: RunningServer, relayUrl: string): Promise<SmallBufferRow[]> {
  const rows: SmallBufferRow[] = [];
  for (const n of [2, 4, 8]) {
    const pages = await openTabs(browser, server.url, n, relayUrl);
    for (const bytes of NODE_BUFFER_BYTES) {
      const models = meanModels(await onTabs(pages, (b) => (window as unknown as BenchWindow).benchMeasure(b), bytes));
      const ringMs = collectiveMs(await onTabs(pages, ([b, r]) => (window as unknown as BenchWindow).benchAllReduce(b, r, 'ring'), [bytes, REPS] as const));
      const hdMs = collectiveMs(await onTabs(pages, ([b, r]) => (window as unknown as BenchWindow).benchAllReduce(b, r, 'halving-doubling'), [bytes, REPS] as const));
      rows.push(smallRow(n, 'tabs', bytes, models, ringMs, hdMs));
    }
    await Promise.all(pages.map((p) => p.context().close()));
  }
  return rows;
}

/** One child process hosting several Node bench peers, driven over IPC. */
class NodePeerHost {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(r: NodePeerReply): void }>();
  private readonly ready: Promise<void>;

  constructor(private readonly child: ChildProcess) {
    let started: () => void;
    this.ready = new Promise((resolve) => (started = resolve));
    child.on('message', (reply: NodePeerReply) => {
      if (reply.id === 0) return started();
      this.pending.get(reply.id)?.resolve(reply);
      this.pending.delete(reply.id);
    });
  }

  async run(command: NodePeerRequest): Promise<Array<{ rank: number; value: unknown }>> {
    await this.ready;
    const id = this.nextId++;
    const reply = await new Promise<NodePeerReply>((resolve) => {
      this.pending.set(id, { resolve });
      this.child.send({ ...command, id });
    });
    if (reply.error) throw new Error(reply.error);
    return reply.results!;
  }
}

async function smallRowsNode(server: RunningServer): Promise<SmallBufferRow[]> {
  const rows: SmallBufferRow[] = [];
  for (const n of NODE_CLASS_SIZES) {
    const room = newRoom(`node${n}`);
    const hosts: NodePeerHost[] = [];
    for (let placed = 0, p = 0; placed < n; placed += NODE_PEERS_PER_PROCESS, p++) {
      const count = Math.min(NODE_PEERS_PER_PROCESS, n - placed);
      const child = fork(path.join(import.meta.dirname, 'node-peers.ts'), ['--url', server.url, '--room', room, '--code', joinCodeFor(JOIN_SECRET, room), '--count', String(count), '--n', String(n), '--name', `p${p}`], {
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(child);
      hosts.push(new NodePeerHost(child));
    }
    const all = async (command: NodePeerRequest) => (await Promise.all(hosts.map((h) => h.run(command)))).flat();
    await all({ cmd: 'join' });
    for (const bytes of NODE_BUFFER_BYTES) {
      const models = meanModels((await all({ cmd: 'measure', bytes })).map((r) => r.value as LinkModels));
      const time = async (algorithm: Algorithm) => collectiveMs((await all({ cmd: 'allReduce', bytes, reps: REPS, algorithm })).map((r) => r.value as number[]));
      const ringMs = await time('ring');
      const hdMs = await time('halving-doubling');
      rows.push(smallRow(n, 'node', bytes, models, ringMs, hdMs));
    }
    await all({ cmd: 'close' });
    await sleep(500);
  }
  return rows;
}

async function post(server: RunningServer, urlPath: string, body: unknown): Promise<void> {
  const res = await fetch(`${server.url}${urlPath}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${urlPath}: ${res.status} ${await res.text()}`);
}

async function splitRows(browser: Browser, server: RunningServer): Promise<StepSplitRow[]> {
  const rows: StepSplitRow[] = [];
  for (const model of ['mlp', 'cnn'] as const) {
    for (let n = 1; n <= 4; n++) {
      const room = newRoom(`${model}${n}`);
      const pages: Page[] = [];
      for (let i = 0; i < n; i++) {
        const page = await (await browser.newContext()).newPage();
        page.on('pageerror', (e) => console.error(`student ${i}: ${e.message}`));
        await page.goto(`${server.url}/?room=${room}&code=${joinCodeFor(JOIN_SECRET, room)}&name=s${i}&backend=${SPLIT_BACKEND}`);
        await page.getByRole('button', { name: 'Join' }).click();
        await page.waitForFunction(() => /^\d+$/.test(document.querySelector<HTMLElement>('[data-testid="worker-status"]')?.dataset.rank ?? ''), null, { timeout: 120_000 });
        pages.push(page);
      }
      await post(server, `/api/rooms/${room}/start`, { model, maxSteps: SPLIT_STEPS[model], resumeFrom: 'none', saveEverySteps: 1_000_000 });
      const samples = new Map<number, StepTimingReport>();
      let backend = SPLIT_BACKEND;
      for (;;) {
        const status = (await (await fetch(`${server.url}/api/rooms/${room}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as RoomStatus;
        const chief = status.members[0];
        if (chief?.collective && chief.step > SPLIT_WARMUP_STEPS) samples.set(chief.step, chief.collective.timing);
        if (chief) backend = chief.backend;
        if (status.state === 'done' || status.state === 'idle') break;
        await sleep(100);
      }
      const mean = (key: keyof StepTimingReport) => [...samples.values()].reduce((sum, t) => sum + t[key], 0) / Math.max(samples.size, 1);
      const row: StepSplitRow = { model, n, backend, steps: samples.size, computeMs: mean('computeMs'), readbackMs: mean('readbackMs'), commMs: mean('commMs'), applyMs: mean('applyMs'), commShare: 0 };
      row.commShare = row.commMs / (row.computeMs + row.readbackMs + row.commMs + row.applyMs);
      console.log(`${model} on ${n} ${backend} tab(s), ${row.steps} steps sampled: compute ${row.computeMs.toFixed(1)}, read-back ${row.readbackMs.toFixed(1)}, all-reduce ${row.commMs.toFixed(1)}, apply ${row.applyMs.toFixed(1)} ms (${(row.commShare * 100).toFixed(0)} % all-reduce)`);
      rows.push(row);
      await Promise.all(pages.map((p) => p.context().close()));
    }
  }
  return rows;
}

async function main(): Promise<void> {
  await buildClientIfNeeded((m) => console.log(m));
  const server = await startServer({
    port: 0,
    host: '127.0.0.1',
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'webring-bench-')),
    teacherToken: TOKEN,
    joinSecret: JOIN_SECRET,
    clientDir: CLIENT_DIST,
    log: createLogger('warn'),
  });
  const relay = await startRelay();
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
  // A run of some parts keeps the other parts' rows from the last run.
  const resultsPath = path.join(OUT_DIR, 'results.json');
  const previous: Partial<BenchResults> = existsSync(resultsPath) ? (JSON.parse(readFileSync(resultsPath, 'utf8')) as BenchResults) : {};
  const results: BenchResults = {
    machine: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? 'unknown', node: process.version, date: new Date().toISOString().slice(0, 10), reps: REPS },
    allreduce: previous.allreduce ?? [],
    small: previous.small ?? [],
    split: previous.split ?? [],
  };
  /** Written after every part, so a failure later keeps what was measured. */
  const save = () => {
    mkdirSync(OUT_DIR, { recursive: true });
    writeFileSync(resultsPath, `${JSON.stringify(results, null, 2)}\n`);
    writeFileSync(path.join(OUT_DIR, 'results.md'), markdown(results));
    writeFileSync(path.join(OUT_DIR, 'chart.svg'), chartSvg(results));
  };
  const smallTabs = PARTS.has('small') || PARTS.has('small-tabs');
  const smallNode = PARTS.has('small') || PARTS.has('small-node');
  try {
    if (PARTS.has('allreduce')) {
      results.allreduce = await allReduceRows(browser, server, relay.url);
      save();
    }
    if (smallTabs || smallNode) {
      const tabs = smallTabs ? await smallRowsTabs(browser, server, relay.url) : results.small.filter((r) => r.peers === 'tabs');
      results.small = [...tabs, ...results.small.filter((r) => r.peers === 'node')];
      save();
      const node = smallNode ? await smallRowsNode(server) : results.small.filter((r) => r.peers === 'node');
      results.small = [...tabs, ...node];
      save();
    }
    if (PARTS.has('split')) {
      results.split = await splitRows(browser, server);
      save();
    }
  } finally {
    await browser.close();
    await relay.close();
    await server.close();
  }
  console.log(`\n${markdown(results)}\nWrote bench/results.json, bench/results.md and bench/chart.svg`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
