/**
 * The lab's training rows: in one built network model, the real signaling server and N real
 * Node workers (node-worker/main.ts, tfjs CPU backend), each in its own namespace under a
 * device's CPU cap, train one of the lab's workloads (shared/tasks/lab-workloads.ts: the
 * dense model or the conv one) with the product's own defaults (`allreduce: 'auto'`). A row is the class's throughput in examples/s; the same row with
 * one device is what the ring is measured against.
 *
 * Step times come from the server's clock: the chief's progress reports as the room's loss
 * history holds them (GET /api/rooms/R/metrics), so a window starts and ends on a step and
 * a row of a few slow conv steps is not off by a fraction of a step. The workers' own
 * examplesPerSec (each worker's share over its step's wall time) is kept beside it as a
 * cross-check.
 */
import type { CollectiveReport, DroppedMember, RoomMetrics, RoomStatus, StartConfig, StepTimingReport } from '../shared/protocol';
import { globalBatchSize } from '../shared/data/batch-plan';
import { LAB_WORKLOADS, labWorkloadOf, type LabModel } from '../shared/tasks/lab-workloads';
import { LabError } from './lab-error';
import { withLab, type Lab } from './netlab';
import type { DeviceProfile } from './cpu-caps';
import { machineBound, startCpuMonitor, type CpuSample } from './cpu-monitor';
import { startLabServer, startLabWorker, waitForRoom, type LabServer } from './lab-server';
import type { LabCapabilities } from './preconditions';
import type { ModelName, ModelProfile } from './network-models';
import { tail, type LabProcess } from './spawn';
import { progress } from './progress';

/** The server's start, N capped workers importing tfjs and fetching the dataset over the shaped network. */
const JOIN_TIMEOUT_MS = 180_000;
/** Beyond the warm-up steps themselves: the first step builds the model and opens the links. */
const START_ALLOWANCE_MS = 120_000;
/** A step slower than this means something is wrong, not slow (the ring's own timeout is 120 s). */
const STEP_TIMEOUT_MS = 150_000;
const POLL_INTERVAL_MS = 250;
/** The row's fixed start config; the task and model are the row's net's (`netConfig`). */
export const BASE_CONFIG = { maxSteps: 1_000_000, resumeFrom: 'none', allreduce: 'auto' } as const;

/** A row's net: the model id of one of the lab's workloads, as the reports record it. */
export type TrainingNet = LabModel;

/** The start-config fields that train `net`: its workload's task and model. */
export const netConfig = (net: TrainingNet) => labWorkloadOf(net).config;

export interface TrainingRowOptions {
  /** Steps the chief must be past before the window opens (model build, link measurement, JIT). */
  warmupSteps: number;
  /** The window lasts at least this long and ends on the first step after it (and after minSteps). */
  windowSeconds: number;
  /** Measured steps the window needs at least; default 1. */
  minSteps?: number;
  /** Workers to start: the first `n` of the lab's; default all of them. */
  n?: number;
  /** Start the server with its hub (HUB=1), so that 'auto' can pick the hub collective. */
  hub?: boolean;
  /** Each worker's device, for a mixed class; default every worker the row's `device`. */
  devices?: DeviceProfile[];
  /** Start-config fields beyond the row's fixed ones (balanceShares, say). */
  config?: Partial<StartConfig>;
}

/**
 * Warm-up and window per net at 0.2 core (a `laptop`), from steps measured here: a step of
 * the dense model takes about 0.4 s, one of the conv model about 1 s (12 s before the fast
 * Conv2DBackpropFilter of shared/compute/cpu-kernels.ts), so each row measures at least three.
 *
 * Every row runs on the server's default liveness: the workers compute in a thread of
 * their own (shared/compute/), so a step of seconds at 0.2 core leaves their pings answered.
 */
export const TRAINING_ROW_OPTIONS: Record<TrainingNet, TrainingRowOptions> = {
  [LAB_WORKLOADS.dense.model]: { warmupSteps: 5, windowSeconds: 10, minSteps: 3 },
  [LAB_WORKLOADS.conv.model]: { warmupSteps: 1, windowSeconds: 24, minSteps: 3 },
};

export interface TrainingRow {
  model: ModelName;
  net: TrainingNet;
  n: number;
  device: DeviceProfile;
  /** Each worker's device, by worker. */
  devices: DeviceProfile[];
  /** The start-config fields the row added (balanceShares, say). */
  config: Partial<StartConfig>;
  /** Each member's share of the last global batch, by rank. */
  batchShares: number[];
  /** Global examples per second over the window: steps × global batch / seconds, on the server's clock. */
  examplesPerSec: number;
  /** The members' own examplesPerSec (each: its share over its last step's wall time), summed, averaged over the window's polls. */
  reportedExamplesPerSec: number;
  /** Mean time per step over the window. */
  stepMs: number;
  /** Steps in the window, and its length on the server's clock. */
  steps: number;
  windowMs: number;
  globalBatch: number;
  /** What the chief's last step used, and why (members' collective report). */
  algorithm: string;
  reason: string;
  /** The chief's last step split: compute, read-back, all-reduce, apply (ms). */
  timing: StepTimingReport | null;
  /** The same split averaged over the chief's steps seen during the window (one poll per step at most); null when none was seen. */
  timingMean: StepTimingReport | null;
  /** Each member's last compute time (ms), by rank. */
  computeMs: number[];
  /**
   * Each member's split of its steps (the same fields as `timing`), averaged over the steps
   * the polls saw in the window, by rank: where a slow device's time goes, not only the
   * chief's. Null for a member never seen.
   */
  timingByRank?: Array<StepTimingReport | null>;
  /** Members the room dropped (stragglers, evictions) from the start to the window's end. */
  dropped: DroppedMember[];
  cpu: CpuSample;
  /** Seconds from the first process started to the window's opening, and for the whole row. */
  setupSeconds: number;
  /**
   * From Start (the harness's POST) to the chief's report of `firstStep`, the step the
   * window opened on (server clock, this machine's): what a run spends before its steady
   * steps, for composing a run's time from its steps (lab/class-report.ts composeTta).
   * Absent in reports from before it was recorded.
   */
  startToFirstMs?: number;
  firstStep?: number;
  totalSeconds: number;
  /** False when the machine was saturated (lab/cpu-monitor.ts) or the room lost a member: then it is not an N-device row. */
  counts: boolean;
}

/** The field-by-field mean of step splits; null for none. */
export function meanTiming(timings: StepTimingReport[]): StepTimingReport | null {
  if (timings.length === 0) return null;
  const out = { ...timings[0]! };
  for (const key of Object.keys(out) as Array<keyof StepTimingReport>) out[key] = timings.reduce((s, t) => s + t[key], 0) / timings.length;
  return out;
}

export async function roomMetrics(server: LabServer): Promise<RoomMetrics> {
  const res = await fetch(`${server.controlUrl}/api/rooms/${server.room}/metrics`, { headers: { authorization: `Bearer ${server.teacherToken}` } });
  if (!res.ok) throw new LabError('ERR_LAB_PROCESS', `GET /api/rooms/${server.room}/metrics: HTTP ${res.status}`);
  return (await res.json()) as RoomMetrics;
}

export async function stopRun(server: LabServer): Promise<void> {
  const res = await fetch(`${server.controlUrl}/api/rooms/${server.room}/stop`, { method: 'POST', headers: { authorization: `Bearer ${server.teacherToken}` } });
  // 409: the run already ended (or never started); the processes are killed next either way.
  if (!res.ok && res.status !== 409) throw new LabError('ERR_LAB_PROCESS', `POST /api/rooms/${server.room}/stop: HTTP ${res.status} ${await res.text()}`);
}

/** The chief's latest step as the room's history has it (server time of its report). */
async function lastChiefStep(server: LabServer): Promise<{ step: number; at: number } | null> {
  const point = (await roomMetrics(server)).history.at(-1);
  return point ? { step: point.step, at: point.at } : null;
}

export const chiefOf = (room: RoomStatus) => room.members.find((m) => m.id === room.chief) ?? room.members[0];

/** The row fails when the room has fewer members than it started with: say who went and why. */
export function lostMember(room: RoomStatus, n: number): string | null {
  if (room.members.length >= n && room.dropped.length === 0) return null;
  const drops = room.dropped.map((d) => `${d.name} (${d.reason} at step ${d.step}: ${d.reason === 'straggler' ? `${Math.round(d.computeMs)} ms against a ${Math.round(d.deadlineMs)} ms deadline` : d.detail})`);
  return `${room.members.length} of ${n} members left${drops.length > 0 ? `; dropped: ${drops.join(', ')}` : ''}; last error ${JSON.stringify(room.lastError)}; events ${JSON.stringify(room.events.slice(-5).map((e) => `${e.kind} ${e.members.join(',')} ${e.detail}`))}`;
}

/**
 * One training row in `lab`: starts the server (room `train-<net>-<n>`) and `options.n`
 * (default `lab.n`) Node workers capped as `device`, starts `net` with
 * `{ maxSteps: 1_000_000, resumeFrom: 'none', allreduce: 'auto' }` and the config's other
 * defaults, waits until the chief is past `warmupSteps`, then measures steps and examples/s
 * over at least `windowSeconds` (and `minSteps`), with the machine's CPU use. Stops the run
 * and every process it started, whatever happens.
 */
export async function trainingRow(lab: Lab, net: TrainingNet, device: DeviceProfile, options: TrainingRowOptions): Promise<TrainingRow> {
  const n = options.n ?? lab.n;
  if (!Number.isInteger(n) || n < 1 || n > lab.n) throw new LabError('ERR_LAB_USAGE', `a training row needs 1 to ${lab.n} workers, got ${n}`);
  const minSteps = options.minSteps ?? 1;
  const model = lab.profile.name;
  const devices = Array.from({ length: n }, (_, i) => options.devices?.[i] ?? device);
  const mixed = devices.some((d) => d !== device);
  const label = `${model}, ${net}, N = ${n} ${mixed ? devices.join('+') : device}${options.config ? ` ${JSON.stringify(options.config)}` : ''}`;
  const t0 = Date.now();
  progress(`${label}: starting the server and ${n} workers`);
  const env: NodeJS.ProcessEnv = {};
  if (options.hub) env.HUB = '1';
  const server = await startLabServer(lab, `train-${net}-${n}`, { env });
  if (options.hub) await waitForRoom(server, (r) => r.hub !== null, 'the hub joining', JOIN_TIMEOUT_MS);
  const workers: LabProcess[] = [];
  const explain = () => workers.map((w) => `--- ${w.label}\n${tail(w.lines, 8)}`).join('\n');
  const failWith = (err: unknown): never => {
    throw new LabError('ERR_LAB_PROCESS', `${label}: ${(err as Error).message}\n${explain()}`);
  };
  try {
    for (let i = 0; i < n; i++) workers.push(startLabWorker(lab, i, server, devices[i]!));
    await waitForRoom(server, (r) => r.members.length === n && r.members.every((m) => m.connected), `${n} workers joined`, JOIN_TIMEOUT_MS).catch(failWith);
    progress(`${label}: ${n} joined after ${((Date.now() - t0) / 1000).toFixed(1)} s; starting`);
    const startAt = Date.now();
    await server.start({ ...BASE_CONFIG, ...netConfig(net), ...options.config });
    const started = await waitForRoom(
      server,
      (r) => lostMember(r, n) !== null || (r.state === 'training' && (chiefOf(r)?.step ?? 0) > options.warmupSteps),
      `the chief past step ${options.warmupSteps}`,
      START_ALLOWANCE_MS + options.warmupSteps * STEP_TIMEOUT_MS,
    ).catch(failWith);
    const lostEarly = lostMember(started, n);
    if (lostEarly !== null) throw new LabError('ERR_LAB_PROCESS', `${label}: before the window opened, ${lostEarly}\n${explain()}`);
    const config = started.config;
    if (!config) throw new LabError('ERR_LAB_PROCESS', `${label}: the room echoes no config while training: ${JSON.stringify(started)}`);
    const globalBatch = globalBatchSize(config.batchSizePerWorker, n);

    const first = await lastChiefStep(server);
    if (!first) throw new LabError('ERR_LAB_PROCESS', `${label}: the room holds no step of the chief past the warm-up`);
    const setupSeconds = (Date.now() - t0) / 1000;
    progress(`${label}: warm at step ${first.step} after ${setupSeconds.toFixed(1)} s; measuring ${options.windowSeconds} s`);
    const monitor = startCpuMonitor();
    let cpu: CpuSample;
    let last = first;
    let room: RoomStatus;
    // Polled at even intervals, each member's last step rate averages to the true rate:
    // a step of t ms is seen for t ms, so the mean of b/t weighted by t is steps·b over Σt.
    let reportedSum = 0;
    let polls = 0;
    // The chief's split of each step the polls saw, once per step, for a mean over the window.
    const timings: StepTimingReport[] = [];
    let timedStep = -1;
    const rankTimings = new Map<number, { step: number; timings: StepTimingReport[] }>();
    try {
      const windowEnd = Date.now() + options.windowSeconds * 1000;
      let deadline = Number.POSITIVE_INFINITY;
      for (;;) {
        room = await server.roomStatus();
        reportedSum += room.members.reduce((s, m) => s + m.examplesPerSec, 0);
        polls++;
        const chiefNow = chiefOf(room);
        if (chiefNow?.collective && chiefNow.step !== timedStep && chiefNow.step > first.step) {
          timedStep = chiefNow.step;
          timings.push(chiefNow.collective.timing);
        }
        for (const m of room.members) {
          if (m.rank === null || m.rank === undefined || !m.collective || m.step <= first.step) continue;
          const seen = rankTimings.get(m.rank) ?? { step: -1, timings: [] };
          if (seen.step === m.step) continue;
          seen.step = m.step;
          seen.timings.push(m.collective.timing);
          rankTimings.set(m.rank, seen);
        }
        const point = await lastChiefStep(server);
        if (point) last = point;
        if (lostMember(room, n) !== null) break;
        if (Date.now() >= windowEnd) {
          // Close the window on a step: the first report after its time (and minSteps).
          if (deadline === Number.POSITIVE_INFINITY) deadline = Date.now() + STEP_TIMEOUT_MS * Math.max(1, first.step + minSteps - last.step);
          if (last.step >= first.step + minSteps && last.at >= windowEnd) break;
          if (Date.now() > deadline) throw new LabError('ERR_LAB_PROCESS', `${label}: the chief stayed at step ${last.step} (the window opened at ${first.step}) for ${STEP_TIMEOUT_MS} ms a step\n${explain()}`);
        }
        await new Promise((r) => setTimeout(r, POLL_INTERVAL_MS));
      }
    } finally {
      cpu = monitor.stop();
    }
    const steps = last.step - first.step;
    const windowMs = last.at - first.at;
    const chief = chiefOf(room);
    const collective: CollectiveReport | null = chief?.collective ?? null;
    const lost = lostMember(room, n);
    if (lost !== null) progress(`${label}: the room lost a member: ${lost}`);
    const row: TrainingRow = {
      model,
      net,
      n,
      device,
      devices,
      config: options.config ?? {},
      batchShares: [...room.members].sort((a, b) => (a.rank ?? 0) - (b.rank ?? 0)).map((m) => Number(m.batchShare.toFixed(4))),
      examplesPerSec: windowMs > 0 ? (steps * globalBatch * 1000) / windowMs : 0,
      reportedExamplesPerSec: reportedSum / polls,
      stepMs: steps > 0 ? windowMs / steps : Number.NaN,
      steps,
      windowMs,
      globalBatch,
      algorithm: collective?.algorithm ?? 'none',
      reason: collective?.reason ?? '',
      timing: collective?.timing ?? null,
      timingMean: meanTiming(timings),
      computeMs: [...room.members].sort((a, b) => (a.rank ?? 0) - (b.rank ?? 0)).map((m) => Math.round(m.computeMs)),
      timingByRank: Array.from({ length: n }, (_, r) => meanTiming(rankTimings.get(r)?.timings ?? [])),
      dropped: room.dropped,
      cpu,
      setupSeconds,
      startToFirstMs: first.at - startAt,
      firstStep: first.step,
      totalSeconds: 0,
      counts: !machineBound(cpu) && lost === null,
    };
    progress(
      `${label}: ${row.examplesPerSec.toFixed(1)} examples/s (reported ${row.reportedExamplesPerSec.toFixed(1)}), ${steps} steps of ${row.stepMs.toFixed(0)} ms, ${row.algorithm}: ${row.reason}; machine ${(cpu.mean * 100).toFixed(0)} % busy`,
    );
    await stopRun(server);
    row.totalSeconds = (Date.now() - t0) / 1000;
    return row;
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
    await server.stop();
  }
}

export interface TrainingRowsPlan {
  nets: TrainingNet[];
  /** The class's size; each net also gets a row with one device. */
  n: number;
  device: DeviceProfile;
  /** Per net; default TRAINING_ROW_OPTIONS. */
  options?: Partial<Record<TrainingNet, TrainingRowOptions>>;
}

/**
 * Every net's row with `plan.n` devices and with one, in `profile`: one lab of `plan.n`
 * workers for the class and one of a single worker, each built and removed here.
 */
export async function trainingRows(profile: ModelProfile, plan: TrainingRowsPlan, capabilities?: LabCapabilities): Promise<TrainingRow[]> {
  const rows: TrainingRow[] = [];
  for (const n of plan.n === 1 ? [1] : [plan.n, 1]) {
    await withLab(
      profile,
      n,
      async (lab) => {
        for (const net of plan.nets) rows.push(await trainingRow(lab, net, plan.device, { ...(plan.options?.[net] ?? TRAINING_ROW_OPTIONS[net]), n }));
      },
      capabilities,
    );
  }
  return rows;
}
