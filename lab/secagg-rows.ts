/**
 * What secure aggregation costs in the lab (`npm run lab -- --section secagg`): a class of capped
 * devices on the Wi-Fi model trains the dense workload (shared/tasks/lab-workloads.ts) on the
 * product's defaults (the server without a hub, HUB=0, as `npm start` ran it until 2026-11-28; `allreduce: 'auto'`,
 * data 'dataset'), three ways:
 *   - secure: `secureAggregation: true` (masked 32-bit words, plus one check word);
 *   - fp32: `secureAggregation: false` (the default for the server's digits);
 *   - fp16: `wire: 'fp16'`, `secureAggregation: false`.
 * For each class size one lab, one server and one set of workers serve every run in turn:
 * each run starts fresh (`resumeFrom: 'none'`), is timed only after its own warm-up, and is
 * stopped before the next, so the modes share the devices, their links and the hour.
 *
 * - The step: the median interval between the chief's progress reports on the server's
 *   clock (GET /api/rooms/:room/metrics), over the window after the warm-up.
 * - Bytes one device sends per step, measured: what each device's interface sent
 *   (`tx_bytes` of its veth) over the window, divided by the steps the class took, averaged
 *   over the devices. It is everything the device sent: the all-reduce with its IP, UDP,
 *   DTLS and SCTP framing, acknowledgements of what it received, and its signaling. Beside
 *   it, the payload the buffer implies: the gradient (fp32 4 B, fp16 2 B, secure 4 B a
 *   parameter plus the 4 B check word) times the algorithm's bytes per byte of buffer.
 * - Accuracy: one epoch of the lab's small dataset (8,000 training digits, 2,000 test), secure and
 *   fp32, and the room's final test accuracy (`metrics.accuracy`).
 */
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RoomStatus, StartConfig, StepTimingReport } from '../shared/protocol';
import { defaultConfigOf } from '../shared/tasks/start-config';
import { findDataset } from '../shared/tasks/registry';
import { featureCount } from '../shared/tasks/task';
import { LAB_WORKLOADS } from '../shared/tasks/lab-workloads';
import { PREFETCH_STEPS, StreamedDataset } from '../shared/data/streamed-dataset';
import { advance, type DataCursor } from '../shared/data/batch-plan';
import type { ExampleFetcher } from '../shared/data/example-fetcher';
import { linkBytesFactor } from '../shared/collectives/choice';
import { median } from '../shared/training/straggler';
import { withLab, type Lab } from './netlab';
import { LabError } from './lab-error';
import type { LabCapabilities } from './preconditions';
import type { ModelProfile } from './network-models';
import { runCommand } from './run-command';
import { startLabServer, startLabWorker, waitForRoom, type LabServer } from './lab-server';
import { BASE_CONFIG, chiefOf, lostMember, meanTiming, netConfig, roomMetrics, stopRun } from './training-rows';
import { GRADIENT_BYTES } from './class-report';
import { cpuBudget } from './cpu-budget';
import { DEVICE_CORES, type DeviceProfile } from './cpu-caps';
import { machineBound, startCpuMonitor, type CpuSample } from './cpu-monitor';
import { tail, type LabProcess } from './spawn';
import { progress } from './progress';
import { secaggTargets, summarize } from './secagg-report';
import { ACCURACY_DATASET, ACCURACY_N, WARMUP_STEPS, type SecaggAccuracyRow, type SecaggMode, type SecaggReport, type SecaggStepRow } from './secagg-shapes';

/** The workload every run trains, and its task's defaults. */
const NET = LAB_WORKLOADS.dense.model;
const DEFAULTS = defaultConfigOf(LAB_WORKLOADS.dense.task.id);

/** Each mode's start-config fields beyond BASE_CONFIG and the dense model. */
export const MODE_CONFIG: Record<SecaggMode, Partial<StartConfig>> = {
  secure: { secureAggregation: true },
  fp32: { secureAggregation: false },
  fp16: { wire: 'fp16', secureAggregation: false },
};

/** The class sizes by default: 8, and 16 (the largest tried; its devices get what the machine holds). */
export const SECAGG_SIZES = [8, 16];

/**
 * Around an epoch's end a worker's prefetch (shared/data/streamed-dataset.ts prefetchAfter)
 * can ask the data service for one example twice in one request: the example is in this
 * epoch's permutation and the next one's, and nothing removes the repeat. The service
 * refuses the request (ERR_BAD_REQUEST) and that worker's run fails; on the small dataset at
 * N = 8 that is 1 to 4 ranks with most seeds (the default 1234 among them), so a one-epoch
 * run would measure a class re-forming instead of secure aggregation. The accuracy runs
 * therefore split the batch equally (`balanceShares` off, so every rank's plan is known in
 * advance; the split does not change the batch's sum) and take the first seed from the
 * default on whose plan no rank asks for an example twice, checked here with the product's
 * own StreamedDataset against a fetcher that only looks. Once the repeat is fixed, that is
 * the default seed.
 */
export async function cleanSeed(n: number, dataset: string, perWorker: number, from: number = DEFAULTS.seed, tries = 2_000): Promise<number> {
  const found = findDataset(dataset);
  if (!found) throw new LabError('ERR_LAB_USAGE', `no dataset ${dataset}`);
  const trainCount = found.dataset.trainCount;
  const format = { features: featureCount(found.task.example), byteScale: found.task.example.byteScale };
  const steps = Math.ceil(trainCount / (perWorker * n)) + PREFETCH_STEPS;
  const features = new Float32Array(perWorker * format.features);
  const labels = new Int32Array(perWorker);
  for (let seed = from; seed < from + tries; seed++) {
    let repeats = false;
    const fetcher: ExampleFetcher = async (_split, indices, count) => {
      for (let i = 1; i < count; i++) if (indices[i] === indices[i - 1]) repeats = true;
      return { labels: new Uint8Array(count), features: new Uint8Array(count * format.features) };
    };
    for (let rank = 0; rank < n && !repeats; rank++) {
      const source = new StreamedDataset({ dataset: found.dataset, format, perWorker, seed, fetcher });
      let cursor: DataCursor = { epoch: 0, offset: 0 };
      for (let step = 0; step < steps && !repeats; step++) {
        const batch = source.nextBatch(cursor, n);
        await source.readShard(batch, rank, features, labels);
        cursor = advance(batch, trainCount);
      }
    }
    if (!repeats) return seed;
  }
  throw new LabError('ERR_LAB_USAGE', `no seed from ${from} to ${from + tries - 1} gives ${n} ranks a one-epoch plan of ${dataset} without a repeated request`);
}

/** The accuracy runs' fields beyond the mode's: one epoch, equal shares, the seed cleanSeed found. */
const epochConfig = (seed: number): Partial<StartConfig> => ({ dataset: ACCURACY_DATASET, epochs: 1, balanceShares: false, seed });

/** Steps a window spans, by class size (a step at N = 16 takes seconds). */
const windowSteps = (n: number): number => (n <= 8 ? 16 : 8);
const JOIN_TIMEOUT_MS = 300_000;
/** From the start to the end of the warm-up, and from there a step at most. */
const WARMUP_TIMEOUT_MS = 240_000;
const STEP_TIMEOUT_MS = 60_000;
const EPOCH_TIMEOUT_MS = 600_000;
const POLL_MS = 100;

/** The largest device profile of which `n` fit this machine beside the server (cpu-budget.ts), or null. */
export function deviceFor(n: number, cores: number): DeviceProfile | null {
  const order = (Object.keys(DEVICE_CORES) as DeviceProfile[]).sort((a, b) => DEVICE_CORES[b] - DEVICE_CORES[a]);
  return order.find((d) => cpuBudget(Array<DeviceProfile>(n).fill(d), cores).fits) ?? null;
}

/** The bytes one rank sends per step as the buffer implies: the hub gets the buffer once, the ring and halving-doubling 2(N-1)/N of it. */
export function payloadBytes(mode: SecaggMode, algorithm: string, n: number): number {
  const params = GRADIENT_BYTES[NET] / 4;
  const buffer = mode === 'fp16' ? params * 2 : mode === 'secure' ? params * 4 + 4 : params * 4;
  if (algorithm === 'hub') return buffer;
  if (algorithm !== 'ring' && algorithm !== 'halving-doubling') return 0;
  return linkBytesFactor(algorithm, n) * buffer;
}

/** Interface counters: bytes each of the first `n` devices has sent so far. */
function txBytes(lab: Lab, n: number): number[] {
  return lab.workers.slice(0, n).map((w) => {
    const out = JSON.parse(runCommand(['ip', '-n', w.ns, '-j', '-s', 'link', 'show', 'dev', w.innerLink])) as Array<{ stats64: { tx: { bytes: number } } }>;
    return out[0]!.stats64.tx.bytes;
  });
}

/** All `n` members in the room, connected, none waiting or joining, and no run under way. */
const wholeClass = (r: RoomStatus, n: number): boolean => r.state !== 'training' && r.state !== 'paused' && r.members.length === n && r.waiting.length === 0 && r.members.every((m) => m.connected && !m.connecting);

const quantile = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;

/** The intervals between the chief's consecutive reports with steps in (from, to], per step (a report that skips steps is spread over them). */
export function stepIntervals(history: Array<{ at: number; step: number }>, from: number, to: number): number[] {
  const points = history.filter((p) => p.step >= from && p.step <= to).sort((a, b) => a.step - b.step);
  const out: number[] = [];
  for (let i = 1; i < points.length; i++) {
    const steps = points[i]!.step - points[i - 1]!.step;
    if (steps > 0) for (let k = 0; k < steps; k++) out.push((points[i]!.at - points[i - 1]!.at) / steps);
  }
  return out;
}

interface RunPlan {
  mode: SecaggMode;
  /** 'window': time windowSteps(n) steps past the warm-up, then stop; 'epoch': one epoch of ACCURACY_DATASET to its end. */
  until: 'window' | 'epoch';
  /** The epoch runs' seed (cleanSeed). */
  seed?: number;
}

/** One run on the class already in the room: Start, the warm-up, the window (or the epoch), Stop. */
async function measureRun(lab: Lab, server: LabServer, n: number, device: DeviceProfile, plan: RunPlan, explain: () => string): Promise<SecaggStepRow | SecaggAccuracyRow> {
  const label = `${lab.profile.name}, N = ${n} ${device}, ${plan.mode}${plan.until === 'epoch' ? `, one epoch of ${ACCURACY_DATASET}` : ''}`;
  const config: Partial<StartConfig> = { ...MODE_CONFIG[plan.mode], ...(plan.until === 'epoch' ? epochConfig(plan.seed ?? DEFAULTS.seed) : {}) };
  // A run starts on the whole class: every member back, connected and in no ring of an earlier run.
  await waitForRoom(server, (r) => wholeClass(r, n), `${label}: the class of ${n} whole and idle before Start`, JOIN_TIMEOUT_MS);
  const t0 = Date.now();
  await server.start({ ...BASE_CONFIG, ...netConfig(NET), ...config });
  const warm = await waitForRoom(server, (r) => lostMember(r, n) !== null || r.state !== 'training' || (chiefOf(r)?.step ?? 0) > WARMUP_STEPS, `${label}: the chief past step ${WARMUP_STEPS}`, WARMUP_TIMEOUT_MS);
  const early = lostMember(warm, n) ?? (warm.state !== 'training' ? `the run ended at step ${warm.step} during its warm-up (${JSON.stringify(warm.lastError)})` : null);
  if (early !== null) throw new Error(`${label}: ${early}\n${explain()}`);
  // The window opens on a step: the first report after the warm-up, with the counters read at once.
  const opened = await waitForRoom(server, (r) => r.step > warm.step || r.state !== 'training', `${label}: a step past the warm-up`, STEP_TIMEOUT_MS);
  const tx0 = txBytes(lab, n);
  const fromStep = opened.step;
  let toStep = fromStep;
  let tx1 = tx0;
  let room: RoomStatus = opened;
  const timings: StepTimingReport[] = [];
  let timedStep = -1;
  progress(`${label}: warm at step ${fromStep} after ${((Date.now() - t0) / 1000).toFixed(1)} s; measuring`);
  const monitor = startCpuMonitor();
  let cpu: CpuSample;
  try {
    let lastChange = Date.now();
    while (room.state === 'training') {
      await sleep(POLL_MS);
      room = await server.roomStatus();
      // Read right after the step moves: that step's all-reduce is over, the next one's not begun.
      if (room.step > toStep && room.state === 'training') {
        tx1 = txBytes(lab, n);
        toStep = room.step;
        lastChange = Date.now();
      }
      const chief = chiefOf(room);
      if (chief?.collective && chief.step !== timedStep && chief.step > fromStep) {
        timedStep = chief.step;
        timings.push(chief.collective.timing);
      }
      if (lostMember(room, n) !== null) break;
      if (plan.until === 'window' && toStep >= fromStep + windowSteps(n)) break;
      if (Date.now() - lastChange > STEP_TIMEOUT_MS) throw new Error(`${label}: no step for ${STEP_TIMEOUT_MS} ms at step ${toStep}\n${explain()}`);
      if (Date.now() - t0 > EPOCH_TIMEOUT_MS) throw new Error(`${label}: not done within ${EPOCH_TIMEOUT_MS} ms\n${explain()}`);
    }
  } finally {
    cpu = monitor.stop();
  }
  const lost = lostMember(room, n);
  let accuracy: number | null = null;
  if (plan.until === 'epoch' && lost === null) {
    // The run is over (the loop ends with it); its evaluation's report may trail its end by a moment.
    room = await waitForRoom(server, (r) => r.state !== 'training' && r.metrics.accuracy !== null, `${label}: the test accuracy after the run's end`, STEP_TIMEOUT_MS);
    accuracy = room.metrics.accuracy;
  }
  const steps = room.step;
  const history = (await roomMetrics(server)).history;
  // An epoch's last interval holds its shorter last batch: the window ends one step before it.
  const intervals = stepIntervals(history, fromStep, plan.until === 'epoch' ? Math.min(toStep, steps - 1) : toStep);
  const sorted = [...intervals].sort((a, b) => a - b);
  if (room.state === 'training') await stopRun(server);
  await waitForRoom(server, (r) => r.state !== 'training' && r.state !== 'paused', `${label}: the run stopped`, STEP_TIMEOUT_MS);
  const chief = chiefOf(room);
  const algorithm = chief?.collective?.algorithm ?? 'none';
  const wireBytesByDevice = tx1.map((b, i) => (toStep > fromStep ? (b - tx0[i]!) / (toStep - fromStep) : 0));
  const row: SecaggStepRow = {
    n,
    mode: plan.mode,
    device,
    config,
    fromStep,
    toStep,
    stepMs: median(sorted),
    stepMsQ1: quantile(sorted, 0.25),
    stepMsQ3: quantile(sorted, 0.75),
    intervalsMs: intervals.map((x) => Math.round(x)),
    algorithm,
    reason: chief?.collective?.reason ?? '',
    timingMean: meanTiming(timings),
    wireBytesByDevice: wireBytesByDevice.map((b) => Math.round(b)),
    wireBytesPerStep: wireBytesByDevice.reduce((s, b) => s + b, 0) / Math.max(1, wireBytesByDevice.length),
    payloadBytesPerStep: payloadBytes(plan.mode, algorithm, n),
    cpu,
    counts: lost === null && !machineBound(cpu) && intervals.length > 0,
    lost,
  };
  progress(
    `${label}: ${(row.stepMs / 1000).toFixed(3)} s a step (median of ${intervals.length}; quartiles ${(row.stepMsQ1 / 1000).toFixed(3)}–${(row.stepMsQ3 / 1000).toFixed(3)}), ${algorithm}, ${(row.wireBytesPerStep / 1e3).toFixed(1)} kB sent a step by a device (payload ${(row.payloadBytesPerStep / 1e3).toFixed(1)} kB); machine ${(cpu.mean * 100).toFixed(0)} % busy${accuracy !== null ? `; test accuracy ${(accuracy * 100).toFixed(2)} %` : ''}`,
  );
  if (plan.until === 'window') return row;
  return { ...row, dataset: ACCURACY_DATASET, accuracy, steps, seconds: (Date.now() - t0) / 1000 };
}

/** The step windows' order at every size: secure on both sides of fp32, so that drift over the minutes cancels between them (fp16's step is the collectives section's). */
const WINDOW_ORDER = ['secure', 'fp32', 'secure'] as const;

/**
 * Every run at class size `lab.n` in one lab, in WINDOW_ORDER, and at ACCURACY_N the
 * one-epoch runs, secure and fp32. A run that fails is recorded in `errors`.
 */
export async function secaggRows(lab: Lab, device: DeviceProfile): Promise<{ steps: SecaggStepRow[]; accuracy: SecaggAccuracyRow[]; errors: SecaggReport['errors'] }> {
  const n = lab.n;
  progress(`${lab.profile.name}, secure aggregation at N = ${n} ${device}: starting the server and ${n} workers`);
  const server = await startLabServer(lab, `secagg-${lab.profile.name}-${n}`);
  const workers: LabProcess[] = [];
  const explain = () => workers.map((w) => `--- ${w.label}\n${tail(w.lines, 6)}`).join('\n');
  const steps: SecaggStepRow[] = [];
  const accuracy: SecaggAccuracyRow[] = [];
  const errors: SecaggReport['errors'] = [];
  // A run that fails is recorded and the next one runs; the class must be whole again first (measureRun waits).
  const attempt = async <T>(plan: RunPlan, into: T[]) => {
    // A worker that exited cannot come back: the runs after it would wait for a class that is not whole.
    const dead = workers.filter((w) => w.child.exitCode !== null || w.child.signalCode !== null);
    if (dead.length > 0) throw new Error(`N = ${n}: ${dead.map((w) => w.label).join(', ')} exited\n${explain()}`);
    try {
      into.push((await measureRun(lab, server, n, device, plan, explain)) as T);
    } catch (err) {
      progress(`N = ${n}, ${plan.mode} (${plan.until}): ${(err as Error).message.split('\n')[0]}`);
      errors.push({ what: `N = ${n}, ${plan.mode}, ${plan.until === 'epoch' ? 'one epoch' : 'step window'}`, message: (err as Error).message });
      const room = await server.roomStatus();
      if (room.state === 'training') await stopRun(server);
    }
  };
  try {
    for (let i = 0; i < n; i++) workers.push(startLabWorker(lab, i, server, device));
    await waitForRoom(server, (r) => r.members.length === n && r.members.every((m) => m.connected), `${n} workers joined`, JOIN_TIMEOUT_MS).catch((err: Error) => {
      throw new Error(`${err.message}\n${explain()}`);
    });
    for (const mode of WINDOW_ORDER) await attempt({ mode, until: 'window' }, steps);
    if (n === ACCURACY_N) {
      const seed = await cleanSeed(n, ACCURACY_DATASET, DEFAULTS.batchSizePerWorker);
      progress(`N = ${n}: the one-epoch runs use seed ${seed}${seed === DEFAULTS.seed ? ' (the default)' : ` (the default ${DEFAULTS.seed} makes a rank ask the data service for one example twice at the epoch's end)`}`);
      for (const mode of ['secure', 'fp32'] as const) await attempt({ mode, until: 'epoch', seed }, accuracy);
    }
    return { steps, accuracy, errors };
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
    await server.stop();
  }
}

/**
 * The whole mode: each class size in its own lab on `profile` (Wi-Fi), its devices the
 * largest that fit the machine; a size that fails is recorded and the next one runs.
 * `write` gets the report after every size, so a run that dies late keeps what it measured.
 */
export async function secaggLab(profile: ModelProfile, sizes: number[], capabilities: LabCapabilities, write: (r: SecaggReport) => void): Promise<SecaggReport> {
  const startedAt = Date.now();
  const cores = os.availableParallelism();
  const report: SecaggReport = {
    generatedAt: new Date().toISOString(),
    machine: { cores, kernel: os.release(), node: process.versions.node },
    netem: capabilities.netem,
    minutes: 0,
    model: profile.name,
    params: profile.params,
    net: NET,
    sizes: [],
    steps: [],
    accuracy: [],
    targets: [],
    errors: [],
  };
  const largest = Math.max(...sizes);
  for (const n of sizes) {
    const device = deviceFor(n, cores);
    try {
      if (device === null) throw new LabError('ERR_LAB_CPU_OVERCOMMIT', `${n} devices do not fit ${cores} cores beside the server, even as ${Object.keys(DEVICE_CORES).at(-1)}s`);
      report.sizes.push({ n, device, cores: DEVICE_CORES[device] });
      const rows = await withLab(profile, n, (lab) => secaggRows(lab, device), capabilities);
      report.steps.push(...rows.steps);
      report.accuracy.push(...rows.accuracy);
      report.errors.push(...rows.errors);
    } catch (err) {
      progress(`secure aggregation at N = ${n}: ${(err as Error).message.split('\n')[0]}`);
      report.errors.push({ what: `N = ${n}`, message: (err as Error).message });
    }
    report.minutes = (Date.now() - startedAt) / 60_000;
    report.targets = secaggTargets(summarize(report.steps), report.accuracy, largest);
    write(report);
  }
  return report;
}
