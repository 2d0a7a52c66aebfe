/**
 * Local steps against every-step sync in the lab (`npm run lab -- --section local-steps`): how long a
 * class takes to reach 97 % on the official test set of the lab's full dataset, and what it sends, when it sums
 * every step and when it trains H local steps a round (VARIANTS below), on the dense workload
 * (shared/tasks/lab-workloads.ts) and the product's defaults.
 *
 * Time to 97 % is composed from two parts, each measured where it can be measured in the
 * time a run has:
 *
 *  1. **Seconds per turn, on the network** (windows): per class size, one lab, one server (no
 *     hub, as `npm start` runs it) and N capped Node workers. For each way of summing one run
 *     starts fresh, is timed after its warm-up (past step 8 and past the measurement of its
 *     links, which the product makes once per ring) over a few turns, and is stopped: the
 *     chief's report intervals on the server's clock, its split (compute against the
 *     all-reduce), and each device's interface counters. A variant not timed (the product
 *     before, H20-adam) takes the line through the timed local-steps windows (a round = H
 *     local steps + one all-reduce).
 *  2. **Turns to 97 %, in-process** (lab/local-steps-accuracy.ts): the same Trainer over the
 *     in-memory ring, one child process per configuration, two at a time at idle priority
 *     (SCHED_IDLE) beside the windows, scored on the official test set as it goes. Accuracy
 *     per example does not depend on the network.
 *
 *  time to 97 % = start-up (measured in the window) + steps × local step + rounds × round's all-reduce
 *
 * and one direct run checks the composition: a local-steps class on school-uplink trains
 * until a checkpoint scores 97 % (the checkpoints scored on the official test set by the
 * lab's scorer, lab/checkpoint-eval.ts), and its time is set against the composed one.
 *
 * Also in-process, the non-IID comparison: the class's own data (data 'own', so secure
 * aggregation on, as by default), every device holding the digits of some classes only,
 * against the same digits spread at random, every step and local steps.
 */
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RoomStatus, StepTimingReport } from '../shared/protocol';
import { median } from '../shared/training/straggler';
import { withLab, type Lab } from './netlab';
import { LabError } from './lab-error';
import type { LabCapabilities } from './preconditions';
import type { ModelProfile } from './network-models';
import { runCommand } from './run-command';
import { startLabServer, startLabWorker, waitForRoom, type LabServer } from './lab-server';
import { BASE_CONFIG, chiefOf, lostMember, meanTiming, netConfig, roomMetrics, stopRun } from './training-rows';
import { LAB_WORKLOADS } from '../shared/tasks/lab-workloads';
import { deviceFor } from './secagg-rows';
import { CFS_PERIOD_US, DEVICE_CORES, type DeviceProfile } from './cpu-caps';
import { MACHINE_BOUND_FRACTION, startCpuMonitor, type CpuSample } from './cpu-monitor';
import { validateModel, DEFAULT_FLOW_SECONDS, type ModelValidation } from './validate-models';
import { CheckpointScorer } from './tta-rows';
import { tail, type LabProcess } from './spawn';
import { progress } from './progress';
import { EVERY_STEP, SERVER_DATA, compressedVariant, isCompressed, localStepsVariant, variantConfig, type AccuracyData, type AccuracyPlan, type SyncVariant } from './local-steps-protocol';
import { nonIid, summarize, type LocalStepsNetwork, type LocalStepsReport, type LocalStepsWindow } from './local-steps-report';
import { localStepsTargets } from './local-steps-targets';
import { AccuracyPool, busyWithout } from './local-steps-pool';
import { directRun, JOIN_TIMEOUT_MS } from './local-steps-direct';
import { runsAt, type LocalStepsClass, type LocalStepsPlan } from './local-steps-plan';

/** Every step and the product's local steps (H = 10, its default), side by side. */
export const VARIANTS: SyncVariant[] = [EVERY_STEP, localStepsVariant(10)];
/** The default H with its sums compressed (PowerSGD rank 16 in 8-bit words): the bytes target. */
export const COMPRESSED_VARIANTS: SyncVariant[] = [compressedVariant(localStepsVariant(10), 16, 8)];
export const THRESHOLD = 0.97;

/**
 * The measurement, about 12 minutes of the lab's own and 9 accuracy runs in the pool: every
 * step against the product's local steps (H = 10, its default) on school-uplink at N = 4
 * and 8 and on wifi at N = 16, the default rounds compressed where the bytes target reads
 * them, the default H on own data split by class, and one direct run.
 */
export const FULL_LOCAL_STEPS_PLAN: LocalStepsPlan = {
  name: 'full',
  classes: [
    { network: 'school-uplink', n: 4 },
    { network: 'school-uplink', n: 8 },
    // 16 chromebooks at 0.1 core: the largest class this machine holds beside the server (deviceFor).
    { network: 'wifi', n: 16, variants: ['every-step', 'H10'] },
  ],
  variants: [...VARIANTS, ...COMPRESSED_VARIANTS],
  timed: ['every-step', 'H10', ...COMPRESSED_VARIANTS.map((v) => v.id)],
  windowTurns: { 'every-step': 4, H10: 2, [COMPRESSED_VARIANTS[0]!.id]: 2 },
  accuracy: { threshold: THRESHOLD, defaultEpochs: 2, maxEpochs: 3, scoreEveryExamples: 6_000, screenStride: 5, screenMargin: 0.005, workers: 2 },
  nonIid: {
    n: 4,
    runs: [{ data: 'own-by-class', variant: localStepsVariant(10) }],
    maxEpochs: 2,
  },
  // Two and a half minutes: five of the product's checkpoints (every 50 steps) to set against their composed times.
  direct: { network: 'school-uplink', n: 8, variant: localStepsVariant(10), budgetMs: 150_000, screenMargin: 0.02 },
};

/**
 * `--local-steps --quick`: a smoke test of every part in about 6 minutes, into
 * bench/lab-local-steps-quick.* (never over the measurement): school-uplink at N = 4 only,
 * every step and H = 5 over 3 and 2 turns, runs of 12,000 examples at most to 85 %, and a
 * direct run of 2 minutes at most.
 */
export const QUICK_LOCAL_STEPS_PLAN: LocalStepsPlan = {
  name: 'quick',
  classes: [{ network: 'school-uplink', n: 4 }],
  variants: [EVERY_STEP, localStepsVariant(5), localStepsVariant(20), compressedVariant(localStepsVariant(5), 16, 8)],
  timed: ['every-step', 'H5', 'H5-powersgd16-words8'],
  windowTurns: { 'every-step': 3, H5: 2, 'H5-powersgd16-words8': 2 },
  accuracy: { threshold: 0.85, defaultEpochs: 2, maxEpochs: 3, scoreEveryExamples: 2_000, screenStride: 10, screenMargin: 0.02, workers: 2, maxExamples: 12_000 },
  nonIid: { n: 4, runs: [{ data: 'own-by-class', variant: localStepsVariant(5) }], maxEpochs: 2 },
  direct: { network: 'school-uplink', n: 4, variant: localStepsVariant(5), budgetMs: 120_000, screenMargin: 0.05 },
};

const VALIDATION_WORKERS = 4;
/**
 * Seconds of each validation flow (doubled on links under 20 Mbit/s by validateModel). At
 * 2 Mbit/s a flow's slow start overshoots the uplink's 0.5 s queue and the losses take
 * seconds to repair: 2 s flows (4 s counted) read 1.43 to 1.71 of 1.91 Mbit/s in three
 * tries, 6 s flows (12 s counted) 1.91 to 1.92, so school-uplink is counted over those.
 */
const flowSeconds = (network: LocalStepsNetwork): number => (network === 'school-uplink' ? 3 * DEFAULT_FLOW_SECONDS : DEFAULT_FLOW_SECONDS);

/** Steps the chief must be past (and its links measured) before a window opens: the model built, the links opened and probed. */
export const WARMUP_STEPS = 8;
/** Three times the slowest warm-up measured (16 chromebooks, every step: 55 s): a class that takes longer has hung. */
const WARMUP_TIMEOUT_MS = 180_000;
/** A turn: at most a round of 20 local steps at 0.1 core and its all-reduce. */
const TURN_TIMEOUT_MS = 180_000;
const POLL_MS = 100;

/** The accuracy runs of a plan, in the order they are run: what the targets need first. */
export function accuracyPlans(plan: LocalStepsPlan): AccuracyPlan[] {
  const a = plan.accuracy;
  const common = { threshold: a.threshold, defaultEpochs: a.defaultEpochs, scoreEveryExamples: a.scoreEveryExamples, screenStride: a.screenStride, screenMargin: a.screenMargin, ...(a.maxExamples !== undefined ? { maxExamples: a.maxExamples } : {}) };
  const sizes = [...new Set(plan.classes.map((c) => c.n))].sort((x, y) => x - y);
  const out: AccuracyPlan[] = [];
  for (const n of sizes) {
    for (const variant of plan.variants.filter((v) => plan.classes.some((c) => c.n === n && runsAt(c, v.id)))) {
      // One Trainer on the global batch stands for a class that sums whole; compressed sums are each device's own.
      out.push({ ...common, id: accuracyId(SERVER_DATA, n, variant), n, variant, data: SERVER_DATA, maxEpochs: a.maxEpochs, everyStepAsOne: !isCompressed(variant.id) });
    }
  }
  if (plan.nonIid) {
    for (const r of plan.nonIid.runs) {
      out.push({ ...common, id: accuracyId(r.data, plan.nonIid.n, r.variant), n: plan.nonIid.n, variant: r.variant, data: r.data, maxEpochs: plan.nonIid.maxEpochs, everyStepAsOne: false });
    }
  }
  return out;
}

export const accuracyId = (data: AccuracyData, n: number, v: SyncVariant): string => `${data} N=${n} ${v.id}`;

/** Interface counters: bytes each of the first `n` devices has sent so far. */
function txBytes(lab: Lab, n: number): number[] {
  return lab.workers.slice(0, n).map((w) => {
    const out = JSON.parse(runCommand(['ip', '-n', w.ns, '-j', '-s', 'link', 'show', 'dev', w.innerLink])) as Array<{ stats64: { tx: { bytes: number } } }>;
    return out[0]!.stats64.tx.bytes;
  });
}

/** All `n` members in the room, connected, none waiting or joining, and no run under way. */
const wholeClass = (r: RoomStatus, n: number): boolean => r.state !== 'training' && r.state !== 'paused' && r.members.length === n && r.waiting.length === 0 && r.members.every((m) => m.connected && !m.connecting);

/** The chief's reports in (from, to], as turns: each the interval since the report before it and the steps it covered. */
export function turnIntervals(history: Array<{ at: number; step: number }>, from: number, to: number): Array<{ ms: number; steps: number }> {
  const points = history.filter((p) => p.step >= from && p.step <= to).sort((a, b) => a.step - b.step);
  const out: Array<{ ms: number; steps: number }> = [];
  for (let i = 1; i < points.length; i++) {
    const steps = points[i]!.step - points[i - 1]!.step;
    if (steps > 0) out.push({ ms: points[i]!.at - points[i - 1]!.at, steps });
  }
  return out;
}

/** One window: Start on the whole class, the warm-up, `turns` turns timed, Stop. */
async function measureWindow(lab: Lab, network: LocalStepsNetwork, server: LabServer, device: DeviceProfile, variant: SyncVariant, turns: number, pool: AccuracyPool | null, explain: () => string): Promise<LocalStepsWindow> {
  const n = lab.n;
  const label = `${network}, N = ${n} ${device}, ${variant.id}`;
  const config = variantConfig(variant);
  await waitForRoom(server, (r) => wholeClass(r, n), `${label}: the class of ${n} whole and idle before Start`, JOIN_TIMEOUT_MS);
  const startedAt = Date.now();
  await server.start({ ...BASE_CONFIG, ...netConfig(LAB_WORKLOADS.dense.model), ...config });
  const measured = (r: RoomStatus) => (chiefOf(r)?.collective?.alphaMs ?? 0) > 0;
  const warm = await waitForRoom(server, (r) => lostMember(r, n) !== null || r.state !== 'training' || ((chiefOf(r)?.step ?? 0) > WARMUP_STEPS && measured(r)), `${label}: the chief past step ${WARMUP_STEPS} with its links measured`, WARMUP_TIMEOUT_MS);
  const early = lostMember(warm, n) ?? (warm.state !== 'training' ? `the run ended at step ${warm.step} during its warm-up (${JSON.stringify(warm.lastError)})` : null);
  if (early !== null) throw new LabError('ERR_LAB_PROCESS', `${label}: ${early}\n${explain()}`);
  // The window opens on the report that ended the warm-up (the probes came before its turn), the counters read at once:
  // the next turn's all-reduce comes only after its compute.
  const opened = warm;
  const tx0 = txBytes(lab, n);
  const fromStep = opened.step;
  const fromRound = opened.round;
  let toStep = fromStep;
  let toRound = fromRound;
  let tx1 = tx0;
  let room: RoomStatus = opened;
  const timings: StepTimingReport[] = [];
  const reported: Array<{ perRound: number; perExample: number | null }> = [];
  let timedStep = -1;
  progress(`${label}: warm at step ${fromStep} (round ${fromRound}) after ${((Date.now() - startedAt) / 1000).toFixed(1)} s; timing ${turns} turns`);
  const monitor = startCpuMonitor();
  const pool0 = pool?.cpuSeconds() ?? 0;
  const w0 = Date.now();
  let cpu: CpuSample;
  try {
    let lastChange = Date.now();
    while (room.state === 'training' && toRound < fromRound + turns) {
      await sleep(POLL_MS);
      room = await server.roomStatus();
      if (room.step > toStep && room.state === 'training') {
        // Read right after the turn's report: its all-reduce is over, the next one's not begun.
        tx1 = txBytes(lab, n);
        toStep = room.step;
        toRound = room.round;
        lastChange = Date.now();
        if (room.bytesSentPerRound !== null) reported.push({ perRound: room.bytesSentPerRound, perExample: room.bytesSentPerExample });
      }
      const chief = chiefOf(room);
      if (chief?.collective && chief.step !== timedStep && chief.step > fromStep) {
        timedStep = chief.step;
        timings.push(chief.collective.timing);
      }
      if (lostMember(room, n) !== null) break;
      if (Date.now() - lastChange > TURN_TIMEOUT_MS) throw new LabError('ERR_LAB_PROCESS', `${label}: no turn for ${TURN_TIMEOUT_MS} ms at step ${toStep}\n${explain()}`);
    }
  } finally {
    cpu = monitor.stop();
  }
  const windowMs = Date.now() - w0;
  const poolCpu = (pool?.cpuSeconds() ?? 0) - pool0;
  const lost = lostMember(room, n);
  const history = (await roomMetrics(server)).history;
  const openedAt = history.find((p) => p.step === fromStep)?.at ?? null;
  const intervals = turnIntervals(history, fromStep, toStep);
  const runConfig = room.config;
  if (room.state === 'training') await stopRun(server);
  await waitForRoom(server, (r) => r.state !== 'training' && r.state !== 'paused', `${label}: the run stopped`, TURN_TIMEOUT_MS);
  const chief = chiefOf(room);
  const globalBatch = (runConfig?.batchSizePerWorker ?? 32) * n;
  const stepsTimed = toStep - fromStep;
  const wireBytesByDevice = tx1.map((b, i) => b - tx0[i]!);
  const turnsTimed = intervals.length;
  const without = cpu.withoutIdle ?? busyWithout(cpu, poolCpu, windowMs);
  const row: LocalStepsWindow = {
    network,
    n,
    device,
    variant: variant.id,
    config,
    wire: runConfig?.wire ?? 'unknown',
    fromStep,
    toStep,
    fromRound,
    toRound,
    intervalsMs: intervals.map((x) => Math.round(x.ms)),
    stepsPerTurn: intervals.map((x) => x.steps),
    turnMs: median([...intervals.map((x) => x.ms)].sort((a, b) => a - b)),
    startupMs: openedAt === null ? null : openedAt - startedAt,
    algorithm: chief?.collective?.algorithm ?? 'none',
    reason: chief?.collective?.reason ?? '',
    timingMean: meanTiming(timings),
    wireBytesByDevice,
    wireBytesPerTurn: turnsTimed > 0 ? wireBytesByDevice.reduce((s, b) => s + b, 0) / n / turnsTimed : 0,
    wireBytesPerExample: stepsTimed > 0 ? wireBytesByDevice.reduce((s, b) => s + b, 0) / (stepsTimed * globalBatch) : 0,
    reportedBytesPerTurn: reported.length > 0 ? median(reported.map((r) => r.perRound).sort((a, b) => a - b)) : null,
    reportedBytesPerExample: reported.some((r) => r.perExample !== null) ? median(reported.flatMap((r) => (r.perExample === null ? [] : [r.perExample])).sort((a, b) => a - b)) : null,
    globalBatch,
    cpu,
    poolCpuSeconds: poolCpu,
    machineBusyWithout: without,
    counts: lost === null && without < MACHINE_BOUND_FRACTION && turnsTimed > 0,
    lost,
  };
  progress(
    `${label}: ${(row.turnMs / 1000).toFixed(2)} s a turn of ${row.stepsPerTurn[0] ?? '?'} steps (median of ${turnsTimed}), ${row.algorithm}, ${row.wire}; the chief's all-reduce ${row.timingMean ? (row.timingMean.commMs / 1000).toFixed(2) : '?'} s; ${(row.wireBytesPerTurn / 1e3).toFixed(0)} kB sent a turn by a device, ${row.wireBytesPerExample.toFixed(0)} B an example by the class; machine ${(without * 100).toFixed(0)} % busy without the accuracy runs`,
  );
  return row;
}

/** Every timed window of one class size, in one lab: one server and its workers serve them in turn. */
async function classWindows(lab: Lab, cls: LocalStepsClass, device: DeviceProfile, plan: LocalStepsPlan, pool: AccuracyPool | null): Promise<{ windows: LocalStepsWindow[]; errors: Array<{ what: string; message: string }> }> {
  const n = lab.n;
  const network = cls.network;
  progress(`${network}, N = ${n} ${device}s: starting the server (no hub) and ${n} workers`);
  const server = await startLabServer(lab, `local-steps-${network}-${n}`);
  const workers: LabProcess[] = [];
  const explain = () => workers.map((w) => `--- ${w.label}\n${tail(w.lines, 6)}`).join('\n');
  const windows: LocalStepsWindow[] = [];
  const errors: Array<{ what: string; message: string }> = [];
  try {
    for (let i = 0; i < n; i++) workers.push(startLabWorker(lab, i, server, device));
    await waitForRoom(server, (r) => r.members.length === n && r.members.every((m) => m.connected), `${n} workers joined`, JOIN_TIMEOUT_MS).catch((err: Error) => {
      throw new LabError('ERR_LAB_PROCESS', `${err.message}\n${explain()}`);
    });
    for (const variant of plan.variants.filter((v) => plan.timed.includes(v.id) && runsAt(cls, v.id))) {
      const dead = workers.filter((w) => w.child.exitCode !== null || w.child.signalCode !== null);
      if (dead.length > 0) throw new LabError('ERR_LAB_PROCESS', `${network}, N = ${n}: ${dead.map((w) => w.label).join(', ')} exited\n${explain()}`);
      try {
        windows.push(await measureWindow(lab, network, server, device, variant, plan.windowTurns[variant.id] ?? 3, pool, explain));
      } catch (err) {
        progress(`${network}, N = ${n}, ${variant.id}: ${(err as Error).message.split('\n')[0]}`);
        errors.push({ what: `${network}, N = ${n}, ${variant.id} window`, message: (err as Error).message });
        const room = await server.roomStatus();
        if (room.state === 'training') await stopRun(server);
      }
    }
    return { windows, errors };
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
    await server.stop();
  }
}

/**
 * The whole mode: the accuracy runs start at once (idle priority) and go on beside
 * everything; each network profile is validated once; every class size gets its own lab
 * and windows; then the direct run; then the accuracy runs are awaited. `write` gets the
 * report after every part, so a run that dies late keeps what it measured.
 */
export async function localStepsLab(profiles: Record<LocalStepsNetwork, ModelProfile>, plan: LocalStepsPlan, capabilities: LabCapabilities, write: (r: LocalStepsReport) => void, pool: AccuracyPool): Promise<LocalStepsReport> {
  const startedAt = Date.now();
  const cores = os.availableParallelism();
  const report: LocalStepsReport = {
    generatedAt: new Date().toISOString(),
    machine: { cores, kernel: os.release(), node: process.versions.node },
    netem: capabilities.netem,
    cfsPeriodUs: CFS_PERIOD_US,
    minutes: 0,
    threshold: plan.accuracy.threshold,
    profiles: Object.fromEntries(Object.entries(profiles).map(([k, p]) => [k, { model: p.name, params: p.params }])) as LocalStepsReport['profiles'],
    plan: { name: plan.name, classes: plan.classes, variants: plan.variants.map((v) => v.id), timed: plan.timed, windowTurns: plan.windowTurns, accuracy: plan.accuracy, nonIid: plan.nonIid ? { n: plan.nonIid.n, runs: plan.nonIid.runs.map((r) => ({ data: r.data, variant: r.variant.id })), maxEpochs: plan.nonIid.maxEpochs } : null, direct: plan.direct ? { ...plan.direct, variant: plan.direct.variant.id } : null },
    validations: [],
    classes: [],
    windows: [],
    accuracy: [],
    direct: null,
    targets: [],
    errors: [],
    notRun: [],
  };
  const save = () => {
    report.minutes = (Date.now() - startedAt) / 60_000;
    report.targets = localStepsTargets(summarize(report), nonIid(report.accuracy));
    write(report);
  };
  // The whole lab may have queued these runs at its start (lab/main.ts): what is done already counts.
  const plans = accuracyPlans(plan);
  const ids = new Set(plans.map((p) => p.id));
  pool.add(plans);
  for (const id of ids) {
    const done = pool.resultOf(id);
    if (done) report.accuracy.push(done);
  }
  const unsubscribe = pool.onResult((r) => {
    if (!ids.has(r.plan.id)) return;
    report.accuracy.push(r);
    save();
  });
  try {
    const validated = new Set<LocalStepsNetwork>();
    for (const cls of plan.classes) {
      const profile = profiles[cls.network];
      const device = deviceFor(cls.n, cores);
      try {
        if (device === null) throw new LabError('ERR_LAB_CPU_OVERCOMMIT', `${cls.n} devices do not fit ${cores} cores beside the server`);
        report.classes.push({ ...cls, device, cores: DEVICE_CORES[device] });
        if (!validated.has(cls.network)) {
          validated.add(cls.network);
          const validate = () => withLab(profile, VALIDATION_WORKERS, (lab) => validateModel(lab, flowSeconds(cls.network)), capabilities);
          let v = await validate();
          if (!v.ok) {
            // As the full lab does: one flow that meets a retransmission timeout reads low; measured once more, both kept.
            progress(`${cls.network}: the profile missed (${v.failures.join('; ')}); measuring it once more`);
            report.validations.push({ network: cls.network, ...pickValidation(v) });
            v = await validate();
          }
          report.validations.push({ network: cls.network, ...pickValidation(v) });
          if (!v.ok) throw new LabError('ERR_LAB_MODEL_INVALID', `the ${cls.network} profile does not do what it says: ${v.failures.join('; ')}`);
        }
        const rows = await withLab(profile, cls.n, (lab) => classWindows(lab, cls, device, plan, pool), capabilities);
        report.windows.push(...rows.windows);
        report.errors.push(...rows.errors);
      } catch (err) {
        progress(`${cls.network}, N = ${cls.n}: ${(err as Error).message.split('\n')[0]}`);
        report.errors.push({ what: `${cls.network}, N = ${cls.n}`, message: (err as Error).message });
      }
      save();
    }
    if (plan.direct) {
      const d = plan.direct;
      const device = deviceFor(d.n, cores);
      let scorer: CheckpointScorer | null = null;
      try {
        if (device === null) throw new LabError('ERR_LAB_CPU_OVERCOMMIT', `${d.n} devices do not fit ${cores} cores beside the server`);
        scorer = await CheckpointScorer.start();
        const s = scorer;
        report.direct = await withLab(profiles[d.network], d.n, (lab) => directRun(lab, d.network, device, d, plan.accuracy, s), capabilities);
      } catch (err) {
        progress(`the direct run: ${(err as Error).message.split('\n')[0]}`);
        report.errors.push({ what: 'the direct run', message: (err as Error).message });
      } finally {
        await scorer?.close();
      }
      save();
    }
    progress(`the network parts are done in ${((Date.now() - startedAt) / 60_000).toFixed(1)} minutes; the accuracy runs left: ${pool.pending.join(', ') || 'none'}`);
    await pool.wait([...ids]);
  } finally {
    unsubscribe();
  }
  report.errors.push(...pool.errors.filter((e) => ids.has(e.what.replace(/^accuracy /, ''))));
  save();
  return report;
}

function pickValidation(v: ModelValidation): Pick<ModelValidation, 'name' | 'params' | 'measured' | 'expected' | 'ok' | 'delayMs'> {
  return { name: v.name, params: v.params, measured: v.measured, expected: v.expected, ok: v.ok, delayMs: v.delayMs };
}
