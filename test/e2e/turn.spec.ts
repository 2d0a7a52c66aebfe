/**
 * TURN, for real: a coturn process on loopback with `use-auth-secret`, a signaling server
 * of its own with TURN_URL, TURN_SECRET and ICE_TRANSPORT_POLICY=relay, and three tabs that
 * train an MNIST MLP together with every data channel relayed through coturn.
 *
 * What proves the relay: each tab's connected RTCPeerConnections report, in getStats(), a
 * selected candidate pair whose local and remote candidates are both of type 'relay' and
 * that carried the gradients; coturn's log shows an allocation for every member, under the
 * member's own `<expiry>:<id>` username. A control run on the ordinary server (no TURN)
 * must report 'host' pairs, so the candidate check cannot pass by accident, and coturn must
 * refuse a credential signed with the wrong secret.
 *
 * This spec starts its own server rather than changing the shared webServer's env: relay
 * for every other spec would only slow them down and hide direct-path bugs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { programNeed, skipUnless } from '../support/requirements';
import { test, expect, type Browser, type Page } from '@playwright/test';
import { E2E_PORT, E2E_TOKEN } from '../../playwright.config';
import { joinCodeFor } from '../../signaling-server/edge/join-codes';
import type { RoomMetrics, RoomStatus } from '../../shared/protocol';
import { codeFor, openStudent, readStatus, status, type Student } from './helpers';
import { capture, freePort, stopProcess, waitForOutput } from '../support/processes';

const TURN_SECRET = 'e2e-turn-secret-0123456789abcdef';
const TURN_REALM = 'webring.test';
const TURN_TTL_S = 3_600;
const TOKEN = 'e2e-turn-teacher-token';
const JOIN_SECRET = 'e2e-turn-join-secret-0123456789';
const STEPS = 8;
/**
 * One step's fp32 gradient of the MLP (101,770 parameters × 4 bytes): by step 3 every link
 * has carried more than this, mostly one way (the ring sends to the right).
 */
const MIN_LINK_BYTES = 400_000;
const STARTUP_TIMEOUT_MS = 30_000;

interface LinkStats {
  state: string;
  policy: string | null;
  urls: string[];
  username: string | null;
  local: string | null;
  remote: string | null;
  localProtocol: string | null;
  bytesSent: number;
  bytesReceived: number;
}

/** Keeps every RTCPeerConnection a page makes, with its config, for getStats() later. Runs before the page's scripts. */
function trackPeerConnections(): void {
  const Native = window.RTCPeerConnection;
  const tracked: Array<{ pc: RTCPeerConnection; config: RTCConfiguration | undefined }> = [];
  (window as unknown as { __webringPeers: typeof tracked }).__webringPeers = tracked;
  window.RTCPeerConnection = class extends Native {
    constructor(config?: RTCConfiguration) {
      super(config);
      tracked.push({ pc: this, config });
    }
  } as typeof RTCPeerConnection;
}

/** The selected candidate pair of every connected peer connection in the page. */
function linkStats(page: Page): Promise<LinkStats[]> {
  return page.evaluate(async () => {
    const tracked = (window as unknown as { __webringPeers: Array<{ pc: RTCPeerConnection; config: RTCConfiguration | undefined }> }).__webringPeers;
    const out: LinkStats[] = [];
    for (const { pc, config } of tracked) {
      if (pc.connectionState !== 'connected') continue;
      const stats = await pc.getStats();
      let pair: Record<string, unknown> | undefined;
      stats.forEach((r: Record<string, unknown>) => {
        if (r.type === 'transport' && typeof r.selectedCandidatePairId === 'string') pair = stats.get(r.selectedCandidatePairId);
      });
      const local = pair ? stats.get(pair.localCandidateId as string) : undefined;
      const remote = pair ? stats.get(pair.remoteCandidateId as string) : undefined;
      const server = config?.iceServers?.[0];
      out.push({
        state: pc.connectionState,
        policy: config?.iceTransportPolicy ?? null,
        urls: server ? [server.urls].flat() : [],
        username: server?.username ?? null,
        local: local?.candidateType ?? null,
        remote: remote?.candidateType ?? null,
        localProtocol: local?.relayProtocol ?? local?.protocol ?? null,
        bytesSent: Number(pair?.bytesSent ?? 0),
        bytesReceived: Number(pair?.bytesReceived ?? 0),
      });
    }
    return out;
  });
}

/** A student whose page records its RTCPeerConnections, for getStats() mid-run. */
const openTrackedStudent = (browser: Browser, origin: string, room: string, code: string, name: string): Promise<Student> =>
  openStudent(browser, room, name, '', origin, { code, initScript: trackPeerConnections });

interface RunResult {
  students: Student[];
  links: LinkStats[][];
  firstStepMs: number;
  stepsPerSec: number;
  room: RoomStatus;
}

/** Three tabs join, the teacher API starts a short MLP run, and the links are inspected mid-run. */
async function trainThreeTabs(browser: Browser, origin: string, token: string, room: string, code: string): Promise<RunResult> {
  const students: Student[] = [];
  for (const name of ['ada', 'bao', 'cyd']) students.push(await openTrackedStudent(browser, origin, room, code, name));
  const ctx = students[0]!.context.request;
  const t0 = Date.now();
  const started = await ctx.post(`${origin}/api/rooms/${room}/start`, {
    headers: { authorization: `Bearer ${token}` },
    data: { model: 'mlp', maxSteps: STEPS, resumeFrom: 'none', allreduce: 'ring' },
  });
  expect(started.status(), await started.text()).toBe(200);
  const step = async (s: Student) => Number((await readStatus(s.page)).step);
  await expect.poll(async () => Math.min(...(await Promise.all(students.map(step)))), { timeout: 120_000, intervals: [100] }).toBeGreaterThanOrEqual(1);
  const firstStepMs = Date.now() - t0;
  // Mid-run, while every link is open and has carried gradients.
  await expect.poll(async () => Math.min(...(await Promise.all(students.map(step)))), { timeout: 120_000 }).toBeGreaterThanOrEqual(3);
  const links = await Promise.all(students.map((s) => linkStats(s.page)));
  for (const s of students) {
    await expect(status(s.page)).toHaveAttribute('data-step', String(STEPS), { timeout: 120_000 });
    await expect(status(s.page)).toHaveAttribute('data-state', 'done');
  }
  const metrics = (await (await ctx.get(`${origin}/api/rooms/${room}/metrics`, { headers: { 'x-join-code': code } })).json()) as RoomMetrics;
  const history = metrics.history;
  const stepsPerSec = (history.length - 1) / ((history.at(-1)!.at - history[0]!.at) / 1000);
  const roomStatus = (await (await ctx.get(`${origin}/api/rooms/${room}`, { headers: { 'x-join-code': code } })).json()) as RoomStatus;
  return { students, links, firstStepMs, stepsPerSec, room: roomStatus };
}

function expectOneModel(run: RunResult, finals: Array<Record<string, string>>): void {
  expect(run.room.state).toBe('done');
  expect(run.room.step).toBe(STEPS);
  const hashes = new Set(finals.map((f) => f.weightsHash));
  expect(hashes.size, `weights hashes ${JSON.stringify(finals.map((f) => f.weightsHash))}`).toBe(1);
  for (const f of finals) expect(Number(f.gradNorm)).toBeGreaterThan(0);
}

test.describe('TURN relay', () => {
  // Without Debian's coturn this spec skips, saying so (CI requires it: support/requirements.ts).
  const skip = skipUnless([programNeed('/usr/bin/turnserver', 'coturn')]);
  test.skip(skip !== false, skip || '');
  let workDir = '';
  let turnPort = 0;
  let origin = '';
  let coturn: ChildProcess | null = null;
  let server: ChildProcess | null = null;
  let coturnLog: () => string = () => '';
  let serverLog: () => string = () => '';

  test.beforeAll(async () => {
    workDir = mkdtempSync(path.join(os.tmpdir(), 'webring-turn-'));
    turnPort = await freePort();
    // Loopback only, no TLS (docs/deployment.md shows turns: on 443 for a school); loopback peers
    // must be allowed explicitly, because every relayed address here is 127.0.0.1.
    coturn = spawn('/usr/bin/turnserver', [
      '-n', // no config file: nothing from /etc/turnserver.conf or a system service leaks in
      '--no-cli',
      '--listening-ip', '127.0.0.1',
      '--relay-ip', '127.0.0.1',
      '--listening-port', String(turnPort),
      '--use-auth-secret',
      '--static-auth-secret', TURN_SECRET,
      '--realm', TURN_REALM,
      '--allow-loopback-peers',
      '--no-multicast-peers',
      '--no-tls',
      '--no-dtls',
      '--fingerprint',
      '--verbose',
      '--log-file', 'stdout',
      '--simple-log',
      '--pidfile', path.join(workDir, 'turnserver.pid'),
      '--userdb', path.join(workDir, 'turndb'),
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    coturnLog = capture(coturn);
    await waitForOutput(coturn, coturnLog, /Total General servers/, 'coturn', STARTUP_TIMEOUT_MS);

    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    server = spawn(process.execPath, ['--import', 'tsx', 'signaling-server/main.ts'], {
      env: {
        ...process.env,
        PORT: String(port),
        HTTPS_PORT: '0',
        HOST: '127.0.0.1',
        TEACHER_TOKEN: TOKEN,
        JOIN_SECRET,
        DATA_DIR: path.join(workDir, 'data'),
        LOG_LEVEL: 'warn',
        TURN_URL: `turn:127.0.0.1:${turnPort}?transport=udp`,
        TURN_SECRET,
        TURN_TTL_S: String(TURN_TTL_S),
        ICE_TRANSPORT_POLICY: 'relay',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    serverLog = capture(server);
    await waitForOutput(server, serverLog, /webring classroom server is running/, 'signaling server', STARTUP_TIMEOUT_MS);
    expect(serverLog()).toContain('every link relayed (ICE_TRANSPORT_POLICY=relay)');
  });

  test.afterAll(async () => {
    for (const proc of [server, coturn]) await stopProcess(proc, 'SIGTERM');
    if (process.env.E2E_VERBOSE) console.log(coturnLog());
  });

  test('coturn refuses a credential signed with the wrong secret', async ({ browser }) => {
    // Without this, a relay that worked would not show that coturn checks our HMAC at all.
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${origin}/healthz`);
    const username = `${Math.floor(Date.now() / 1000) + TURN_TTL_S}:intruder`;
    const sign = (secret: string) => createHmac('sha1', secret).update(username).digest('base64');
    const gather = (credential: string) =>
      page.evaluate(
        async ({ url, username, credential }) => {
          const pc = new RTCPeerConnection({ iceServers: [{ urls: url, username, credential }], iceTransportPolicy: 'relay' });
          const types: string[] = [];
          const errors: number[] = [];
          pc.addEventListener('icecandidate', (e) => e.candidate && types.push(e.candidate.type ?? 'unknown'));
          pc.addEventListener('icecandidateerror', (e) => errors.push((e as RTCPeerConnectionIceErrorEvent).errorCode));
          pc.createDataChannel('probe');
          await pc.setLocalDescription(await pc.createOffer());
          await new Promise<void>((resolve) => {
            if (pc.iceGatheringState === 'complete') resolve();
            pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
          });
          pc.close();
          return { types, errors };
        },
        { url: `turn:127.0.0.1:${turnPort}?transport=udp`, username, credential },
      );
    const bad = await gather(sign('not-the-turn-secret-at-all'));
    expect(bad.types).toEqual([]);
    expect(bad.errors).toContain(401);
    const good = await gather(sign(TURN_SECRET));
    expect(good.types).toContain('relay');
    await context.close();
  });

  test('three tabs train through coturn with ICE_TRANSPORT_POLICY=relay', async ({ browser }) => {
    const room = 'e2e-turn';
    const run = await trainThreeTabs(browser, origin, TOKEN, room, joinCodeFor(Buffer.from(JOIN_SECRET), room));
    console.log(
      `TURN relay: first step ${run.firstStepMs} ms after start, ${run.stepsPerSec.toFixed(2)} steps/s; ` +
        `links (local/remote, bytes) ${run.links.flat().map((l) => `${l.local}/${l.remote} ${l.bytesSent + l.bytesReceived}`).join(', ')}`,
    );
    const finals = await Promise.all(run.students.map((s) => readStatus(s.page)));
    expectOneModel(run, finals);

    const now = Date.now() / 1000;
    for (const [i, links] of run.links.entries()) {
      // A ring of three: each tab has a left and a right neighbour.
      expect(links.length, `tab ${i} links ${JSON.stringify(links)}`).toBeGreaterThanOrEqual(2);
      const memberId = finals[i]!.memberId!;
      for (const link of links) {
        expect(link.policy).toBe('relay');
        expect(link.urls).toEqual([`turn:127.0.0.1:${turnPort}?transport=udp`]);
        // The member's own credential: "<expiry>:<member id>", expiring one TTL from now.
        const [expiry, id] = link.username!.split(':');
        expect(id).toBe(memberId);
        expect(Number(expiry)).toBeGreaterThan(now + TURN_TTL_S - 300);
        expect(Number(expiry)).toBeLessThanOrEqual(now + TURN_TTL_S + 1);
        expect(link.local, JSON.stringify(link)).toBe('relay');
        expect(link.remote, JSON.stringify(link)).toBe('relay');
        expect(link.bytesSent + link.bytesReceived).toBeGreaterThan(MIN_LINK_BYTES);
      }
    }

    // coturn's side: an allocation under each member's own username.
    const log = coturnLog();
    for (const f of finals) {
      expect(log, `coturn log has no allocation for ${f.memberId}`).toMatch(new RegExp(`username=<\\d+:${f.memberId}>`));
    }
    expect(log).toMatch(/ALLOCATE processed, success/);

    expect(run.students.flatMap((s) => s.errors)).toEqual([]);
    for (const s of run.students) await s.context.close();
  });

  test('control: the same run on the server without TURN connects host to host', async ({ browser }) => {
    const room = 'e2e-turn-direct';
    const run = await trainThreeTabs(browser, `http://127.0.0.1:${E2E_PORT}`, E2E_TOKEN, room, codeFor(room));
    expectOneModel(run, await Promise.all(run.students.map((s) => readStatus(s.page))));
    for (const link of run.links.flat()) {
      expect(link.policy).toBe('all');
      expect(link.urls).toEqual([]);
      expect(link.local).toBe('host');
      expect(link.remote).toBe('host');
    }
    expect(run.links.flat().length).toBeGreaterThanOrEqual(6);
    console.log(`direct: first step ${run.firstStepMs} ms after start, ${run.stepsPerSec.toFixed(2)} steps/s`);
    expect(run.students.flatMap((s) => s.errors)).toEqual([]);
    for (const s of run.students) await s.context.close();
  });
});
