/**
 * `npm run bench:allreduce`: ring all-reduce bus bandwidth between N headless Chromium tabs
 * (N = 2, 3, 4; 1, 4 and 16 MB buffers), beside the point-to-point data-channel throughput
 * measured in the same run. Prints numbers; asserts nothing.
 *
 * Bus bandwidth follows NCCL's definition: algbw = bytes / time, busbw = algbw * 2(N-1)/N,
 * the rate each link actually carried. An ideal ring's busbw equals the link bandwidth.
 */
import os from 'node:os';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';
import { chromium, type Browser, type Page } from '@playwright/test';
import { CHROMIUM_ARGS } from '../../playwright.config';
import { buildClientIfNeeded, CLIENT_DIST } from '../../signaling-server/build-client';
import { createLogger } from '../../signaling-server/logger';
import { startServer } from '../../signaling-server/server';

const MB = 1024 * 1024;
const WORLD_SIZES = (process.env.BENCH_N ?? '2,3,4').split(',').map(Number);
const SIZES_MB = (process.env.BENCH_MB ?? '1,4,16').split(',').map(Number);
const REPS = Number(process.env.BENCH_REPS ?? 5);
const P2P_BYTES = 32 * MB;

type BenchWindow = Window & {
  benchJoin(): Promise<number>;
  benchAllReduce(bytes: number, reps: number): Promise<number[]>;
  benchSendToRight(bytes: number): Promise<number>;
  benchReceiveFromLeft(bytes: number): Promise<number>;
};

async function openRing(browser: Browser, baseUrl: string, n: number): Promise<Page[]> {
  const room = `bench-${n}-${Date.now().toString(36)}`;
  const pages: Page[] = [];
  for (let i = 0; i < n; i++) {
    const page = await (await browser.newContext()).newPage();
    page.on('pageerror', (e) => console.error(`tab ${i}: ${e.message}`));
    await page.goto(`${baseUrl}/bench.html?room=${room}&n=${n}`);
    pages.push(page);
  }
  const ranks = await Promise.all(pages.map((p) => p.evaluate(() => (window as unknown as BenchWindow).benchJoin())));
  // Order pages by rank so that index i is rank i.
  return ranks.map((_, i) => pages[ranks.indexOf(i)]!);
}

async function p2pThroughput(pages: Page[]): Promise<number> {
  const [sender, receiver] = pages as [Page, Page];
  const arrived = receiver.evaluate((b) => (window as unknown as BenchWindow).benchReceiveFromLeft(b), P2P_BYTES);
  const started = await sender.evaluate((b) => (window as unknown as BenchWindow).benchSendToRight(b), P2P_BYTES);
  return P2P_BYTES / MB / ((await arrived) - started) * 1000;
}

async function main(): Promise<void> {
  await buildClientIfNeeded((m) => console.log(m));
  const server = await startServer({
    port: 0,
    host: '127.0.0.1',
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'webring-bench-')),
    teacherToken: 'bench',
    clientDir: CLIENT_DIST,
    log: createLogger('warn'),
  });
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
  const rows: string[] = [];
  let p2p = 0;
  try {
    for (const n of WORLD_SIZES) {
      const pages = await openRing(browser, server.url, n);
      if (n === 2) {
        p2p = await p2pThroughput(pages);
        // A second sample after the link warmed up; keep the better one.
        p2p = Math.max(p2p, await p2pThroughput(pages));
      }
      for (const mb of SIZES_MB) {
        const times = await Promise.all(
          pages.map((p) => p.evaluate(([b, r]) => (window as unknown as BenchWindow).benchAllReduce(b, r), [mb * MB, REPS] as const)),
        );
        // An all-reduce ends when its slowest rank ends; report the median repetition.
        const perRep = times[0]!.map((_, i) => Math.max(...times.map((t) => t[i]!))).sort((a, b) => a - b);
        const ms = perRep[Math.floor(perRep.length / 2)]!;
        const worst = perRep[perRep.length - 1]!;
        const algbw = mb / (ms / 1000);
        const busbw = (algbw * 2 * (n - 1)) / n;
        rows.push([n, mb, ms.toFixed(1), worst.toFixed(1), algbw.toFixed(1), busbw.toFixed(1)].map(String).join('\t'));
        console.log(`N=${n} ${mb} MB: median ${ms.toFixed(1)} ms (worst ${worst.toFixed(1)}), algbw ${algbw.toFixed(1)} MB/s, busbw ${busbw.toFixed(1)} MB/s`);
      }
      await Promise.all(pages.map((p) => p.context().close()));
    }
  } finally {
    await browser.close();
    await server.close();
  }
  console.log(`\nRing all-reduce between headless Chromium tabs on ${os.cpus().length} CPU cores (${REPS} reps each)`);
  console.log(`Point-to-point data channel (64 KiB messages, one direction, ${P2P_BYTES / MB} MB): ${p2p.toFixed(1)} MB/s\n`);
  console.log(['N', 'MB', 'median ms', 'worst ms', 'algbw MB/s', 'busbw MB/s'].join('\t'));
  for (const row of rows) console.log(row);
  if (p2p > 0) console.log(`\nbusbw / point-to-point is the fraction of the link the ring uses.`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
