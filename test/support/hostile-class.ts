/**
 * Issue 57's hostile class, for its class test (test/class/hostile-seat.test.ts) and its
 * benchmark (test/bench/hostile-seat.ts): eight real Node workers and a ninth seat that
 * trains like them, with or without the attacks of test/support/hostile-seat.mjs, against a
 * real server in this process. It runs the class to its last step and hands back what the
 * room said, the seat's lines, the class's steps over time and this process's memory peak.
 */
import { spawn } from 'node:child_process';
import { classRoom, type ClassRoom } from './class-room';
import { codeFor } from './server';
import type { SpawnedWorker } from './processes';
import type { RoomStatus } from '../../shared/protocol';

export const HONEST = 8;
/** Small batches: nine workers and the server share this machine's cores. */
const BATCH_PER_WORKER = 8;
/** Steps the class trains before the first attack. */
export const QUIET_STEPS = 20;
/** Each attack's length. */
const PHASE_MS = 8_000;
/** The run's last step: the quiet steps, the four attacks and what they cost, and steps after them. */
export const MAX_STEPS = 220;
/** The attacks in the order the seat runs them (hostile-seat.mjs). */
export const PHASES = ['reform-storm', 'progress-lies', 'http', 'relay-flood'] as const;
const SAMPLE_EVERY_MS = 1_000;
export const JOIN_TIMEOUT_MS = 120_000;
export const RUN_TIMEOUT_MS = 200_000;

export interface Sample {
  at: number;
  step: number;
  /** This process's resident memory when the step was read. */
  rss: number;
}

export interface HostileRun {
  klass: ClassRoom;
  seat: SpawnedWorker;
  /** The room when the run ended (done, or failed with lastError). */
  done: RoomStatus;
  finishedAt: number;
  /** The seat's `hostile-seat:` lines, with when each was printed. */
  lines: Array<{ at: number; line: string }>;
  samples: Sample[];
  startRss: number;
  peakRss: number;
}

/** The ninth seat: a real Node worker, with the hostile preload when `hostile`. */
function spawnSeat(klass: ClassRoom, url: string, room: string, hostile: boolean, lines: HostileRun['lines']): SpawnedWorker {
  const name = `seat-${HONEST}`;
  const preload = hostile ? ['--import', './test/support/hostile-seat.mjs'] : [];
  const args = ['--import', 'tsx', ...preload, 'node-worker/main.ts', '--url', url, '--room', room, '--code', codeFor(room), '--name', name, '--backend', 'cpu'];
  const env = { ...process.env, HOSTILE_PHASE_MS: String(PHASE_MS), HOSTILE_START_STEP: String(QUIET_STEPS) };
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const output: string[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    stream.on('data', (d: Buffer) => {
      const got = d.toString().split('\n').filter(Boolean);
      output.push(...got);
      for (const line of got) if (line.startsWith('hostile-seat:')) lines.push({ at: Date.now(), line });
    });
  }
  const seat = { name, child, output };
  klass.workers.push(seat);
  return seat;
}

/**
 * Eight workers join `room` on the server at `url`, then the ninth seat; the teacher starts a
 * run of MAX_STEPS; resolves once it ended. `onFailure` hears what the room last said when
 * the run never ended. The caller kills `klass.workers` (handed to `onClass` at once).
 */
export async function runHostileClass(url: string, room: string, hostile: boolean, onClass: (klass: ClassRoom) => void, onFailure: (message: string) => void): Promise<HostileRun> {
  const klass = classRoom(() => ({ url }), room);
  onClass(klass);
  for (let i = 0; i < HONEST; i++) klass.spawn(`honest-${i}`);
  await klass.waitFor(`${HONEST} workers`, async () => (await klass.status()).members.length === HONEST, JOIN_TIMEOUT_MS);
  const lines: HostileRun['lines'] = [];
  const seat = spawnSeat(klass, url, room, hostile, lines);
  await klass.waitFor(`${HONEST + 1} workers`, async () => (await klass.status()).members.length === HONEST + 1, JOIN_TIMEOUT_MS);

  // The server runs in this process: its memory is this process's.
  const startRss = process.memoryUsage().rss;
  let peakRss = startRss;
  const samples: Sample[] = [];
  let last: RoomStatus | null = null;
  const sampler = setInterval(() => {
    const rss = process.memoryUsage().rss;
    peakRss = Math.max(peakRss, rss);
    klass.status().then(
      (s) => {
        last = s;
        samples.push({ at: Date.now(), step: s.step, rss });
      },
      (err: unknown) => onFailure(`a status sample failed: ${String(err)}`),
    );
  }, SAMPLE_EVERY_MS);
  try {
    const started = await klass.teacher('start', { model: 'mlp', dataset: 'mnist-60k', batchSizePerWorker: BATCH_PER_WORKER, maxSteps: MAX_STEPS, resumeFrom: 'none' });
    if (started !== 200) throw new Error(`the teacher's start was answered ${started}`);
    const done = await klass.waitFor('the run to finish', async () => {
      const s = await klass.status();
      return (s.state === 'done' || s.lastError !== null) && s;
    }, RUN_TIMEOUT_MS);
    return { klass, seat, done, finishedAt: Date.now(), lines, samples, startRss, peakRss };
  } catch (err) {
    // What the room last said, for the reader of a run that never finished.
    const s = last as RoomStatus | null;
    onFailure(`the room at its last sample: step ${s?.step}, generation ${s?.generation}, dropped ${JSON.stringify(s?.dropped.map((m) => [m.name, m.reason]))}, events ${JSON.stringify(s?.events.slice(-8))}`);
    for (const l of lines) onFailure(l.line);
    throw err;
  } finally {
    clearInterval(sampler);
  }
}

/** The class's step at `at`: the last sample at or before it. */
export const stepAt = (samples: readonly Sample[], at: number): number => samples.filter((s) => s.at <= at).at(-1)?.step ?? 0;

/** This process's highest resident memory sampled within [from, to). */
export const peakRssIn = (samples: readonly Sample[], from: number, to: number): number => Math.max(0, ...samples.filter((s) => s.at >= from && s.at < to).map((s) => s.rss));

/** Steps per second over [from, to). */
export function rate(samples: readonly Sample[], from: number, to: number): number {
  return to > from ? ((stepAt(samples, to) - stepAt(samples, from)) * 1000) / (to - from) : 0;
}

/** Steps per second from the first sample at QUIET_STEPS or past it to the run's end: the same span with and without the attacks. */
export function runRate(run: HostileRun): number {
  const from = run.samples.find((s) => s.step >= QUIET_STEPS);
  if (!from) return 0;
  return ((run.done.step - from.step) * 1000) / (run.finishedAt - from.at);
}

/** The longest time between two samples at which the class's step rose, from its first step on (not the run's start-up). */
export function longestStall(samples: readonly Sample[]): number {
  let longest = 0;
  const first = samples.findIndex((s) => s.step >= 1);
  if (first < 0) return 0;
  let since = samples[first]!.at;
  for (let i = first + 1; i < samples.length; i++) {
    if (samples[i]!.step === samples[i - 1]!.step) continue;
    longest = Math.max(longest, samples[i]!.at - since);
    since = samples[i]!.at;
  }
  return longest;
}
