/**
 * Time to accuracy in the lab: N capped laptops train from scratch on the workload's full
 * dataset (shared/tasks/lab-workloads.ts) while the chief checkpoints every few steps; the harness downloads each checkpoint as it
 * appears (over the control path, so the shaped network never carries it) and scores it on
 * the official test set in a child process at idle priority (lab/checkpoint-eval.ts),
 * outside the devices' caps. The row's time is that of the first checkpoint at the
 * threshold, from the moment the harness pressed Start. The row stops once any checkpoint
 * scores the threshold; the ones before it are scored afterwards, with the devices gone.
 *
 * The run's own end-of-epoch evaluation is not what the row waits for: at 0.2 core a
 * worker scores its share of 10,000 digits for a minute or more, and an epoch of the conv model at
 * N = 1 is most of an hour. It is recorded when an epoch does end, as a cross-check.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { CheckpointInfo } from '../shared/checkpoints/checkpoint';
import type { RoomMetrics, StartConfig } from '../shared/protocol';
import { globalBatchSize } from '../shared/data/batch-plan';
import { LabError } from './lab-error';
import type { Lab } from './netlab';
import { startLabServer, startLabWorker, waitForRoom, type LabServer } from './lab-server';
import { MACHINE_BOUND_FRACTION, registerIdleWork, startCpuMonitor, type CpuSample } from './cpu-monitor';
import { BASE_CONFIG, lostMember, netConfig, roomMetrics, stopRun, type TrainingNet } from './training-rows';
import { labWorkloadOf } from '../shared/tasks/lab-workloads';
import { frontierEvaluation, nextEvaluation, thresholdSeen, timeToThreshold, type EvaluationPolicy } from './class-report';
import type { CheckpointPoint, TtaRow, TtaStop } from './report-types';
import { READY_LINE, REPLY_PREFIX, type ScoreReply, type ScoreRequest, type ScoreSplit } from './checkpoint-eval-protocol';
import { tail, type LabProcess } from './spawn';
import { progress } from './progress';

const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Importing tfjs and reading the test set. */
const SCORER_START_TIMEOUT_MS = 120_000;
/** One full score at idle priority on a machine the devices keep busy. */
const SCORE_TIMEOUT_MS = 600_000;
const JOIN_TIMEOUT_MS = 180_000;
const POLL_INTERVAL_MS = 1_000;
/** The checkpoint list is read this often; a checkpoint every few seconds at most. */
const LIST_INTERVAL_MS = 2_000;
const IDLE_SCORER_WAIT_MS = 500;
/** Checkpoints the server keeps (the schema's most): the harness downloads each at once anyway. */
const MAX_TO_KEEP = 100;
/** Far beyond any budget: the run must not end on its own before the threshold. */
const EPOCHS = 50;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The checkpoint scorer: `chrt --idle 0 node lab/checkpoint-eval.ts`, one request at a
 * time. SCHED_IDLE runs it only when no other task wants the CPU, so beside a row it takes
 * what the capped devices and the server leave over, and slows them as little as a process
 * can.
 */
export class CheckpointScorer {
  screens = 0;
  fulls = 0;
  /** CPU time the scorer reported for the requests it answered. */
  cpuMs = 0;
  private chain: Promise<unknown> = Promise.resolve();
  private readonly waiting: Array<(reply: ScoreReply) => void> = [];
  private readonly stderr: string[] = [];

  private readonly unregister: () => void;

  private constructor(private readonly child: ChildProcess) {
    // Idle priority: the rows beside it judge the machine without it (lab/cpu-monitor.ts).
    this.unregister = registerIdleWork(() => this.cpuMs / 1000);
  }

  static async start(): Promise<CheckpointScorer> {
    const child = spawn('chrt', ['--idle', '0', process.execPath, '--import', 'tsx', 'lab/checkpoint-eval.ts'], { cwd: PROJECT_ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    const scorer = new CheckpointScorer(child);
    child.stderr!.on('data', (d: Buffer) => {
      scorer.stderr.push(...d.toString().split('\n').filter(Boolean));
      scorer.stderr.splice(0, Math.max(0, scorer.stderr.length - 50));
    });
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new LabError('ERR_LAB_PROCESS', `the checkpoint scorer was not ready within ${SCORER_START_TIMEOUT_MS} ms:\n${tail(scorer.stderr)}`)), SCORER_START_TIMEOUT_MS);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new LabError('ERR_LAB_PROCESS', `the checkpoint scorer exited (${code}):\n${tail(scorer.stderr)}`));
        for (const w of scorer.waiting.splice(0)) w({ error: `the scorer exited (${code})` });
      });
      child.once('error', (err) => reject(new LabError('ERR_LAB_PROCESS', `cannot start the checkpoint scorer (chrt, util-linux): ${err.message}`)));
      createInterface({ input: child.stdout! }).on('line', (line) => {
        if (line === READY_LINE) {
          clearTimeout(timer);
          resolve();
        } else if (line.startsWith(REPLY_PREFIX)) {
          scorer.waiting.shift()?.(JSON.parse(line.slice(REPLY_PREFIX.length)) as ScoreReply);
        }
      });
    });
    await ready;
    return scorer;
  }

  /** The accuracy of the checkpoint in `dir` on the screening subset or the whole test set. */
  score(dir: string, split: ScoreSplit): Promise<number> {
    const run = this.chain.then(async () => {
      const reply = await new Promise<ScoreReply>((resolve, reject) => {
        const timer = setTimeout(() => reject(new LabError('ERR_LAB_PROCESS', `scoring ${dir} (${split}) took over ${SCORE_TIMEOUT_MS} ms`)), SCORE_TIMEOUT_MS);
        this.waiting.push((r) => {
          clearTimeout(timer);
          resolve(r);
        });
        const req: ScoreRequest = { dir, split };
        this.child.stdin!.write(`${JSON.stringify(req)}\n`);
      });
      if ('error' in reply) throw new LabError('ERR_LAB_PROCESS', `scoring ${dir} (${split}): ${reply.error}\n${tail(this.stderr)}`);
      this.cpuMs += reply.cpuMs;
      if (split === 'screen') this.screens++;
      else this.fulls++;
      return reply.accuracy;
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  async close(): Promise<void> {
    this.unregister();
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}

const teacher = (server: LabServer) => ({ authorization: `Bearer ${server.teacherToken}` });

async function listCheckpoints(server: LabServer): Promise<CheckpointInfo[]> {
  const res = await fetch(`${server.controlUrl}/api/rooms/${server.room}/checkpoints`, { headers: teacher(server) });
  if (!res.ok) throw new LabError('ERR_LAB_PROCESS', `GET /api/rooms/${server.room}/checkpoints: HTTP ${res.status}`);
  return (await res.json()) as CheckpointInfo[];
}

/** Downloads the model of checkpoint `id` into `dir`; false when the server no longer has it. */
async function downloadModel(server: LabServer, id: string, dir: string): Promise<boolean> {
  mkdirSync(dir, { recursive: true });
  for (const file of ['model.json', 'model.weights.bin']) {
    const res = await fetch(`${server.controlUrl}/api/rooms/${server.room}/checkpoints/${id}/${file}`, { headers: teacher(server) });
    if (res.status === 404) return false;
    if (!res.ok) throw new LabError('ERR_LAB_PROCESS', `GET checkpoint ${id}/${file}: HTTP ${res.status}`);
    writeFileSync(path.join(dir, file), Buffer.from(await res.arrayBuffer()));
  }
  return true;
}

export interface TtaPlan {
  net: TrainingNet;
  n: number;
  scaleLearningRate: boolean;
  threshold: number;
  screenMargin: number;
  budgetMs: number;
  saveEverySteps: number;
  /** Start the server with its hub (HUB=1), as the class's other rows. */
  hub: boolean;
}

/**
 * One time-to-accuracy row in `lab` (its first `plan.n` workers, `laptop`s): trains from
 * scratch until a checkpoint scores the threshold, the budget runs out, or the class loses
 * a member; then stops everything it started and scores what is left (outside the caps)
 * up to the first checkpoint at the threshold.
 */
export async function timeToAccuracyRow(lab: Lab, plan: TtaPlan, scorer: CheckpointScorer): Promise<TtaRow> {
  const { net, n } = plan;
  const pct = `${Math.round(plan.threshold * 1000) / 10} %`;
  const label = `${lab.profile.name}, ${net}, N = ${n}, time to ${pct}, scaleLearningRate ${plan.scaleLearningRate ? 'on' : 'off'}`;
  const policy: EvaluationPolicy = { threshold: plan.threshold, screenMargin: plan.screenMargin, budgetMs: plan.budgetMs };
  const env: NodeJS.ProcessEnv = {};
  if (plan.hub) env.HUB = '1';
  progress(`${label}: starting the server and ${n} workers`);
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'webring-lab-tta-'));
  const points = new Map<string, CheckpointPoint & { dir: string }>();
  const screens0 = scorer.screens;
  const fulls0 = scorer.fulls;
  const cpu0 = scorer.cpuMs;
  let scoring = true;
  let scoreError: unknown = null;
  // While the row runs the newest checkpoint goes first (so the row stops as soon as the
  // scorer sees the threshold), then the backlog in step order; after it, the backlog alone.
  const scoreNext = async (frontier: boolean): Promise<boolean> => {
    const all = [...points.values()];
    const next = (frontier ? frontierEvaluation(all, policy) : null) ?? nextEvaluation(all, policy);
    if (!next) return false;
    const p = points.get(next.id)!;
    const accuracy = await scorer.score(p.dir, next.split);
    if (next.split === 'screen') p.screen = accuracy;
    else p.accuracy = accuracy;
    progress(`${label}: checkpoint at step ${p.step} (${(p.ms / 1000).toFixed(0)} s): ${next.split} ${(accuracy * 100).toFixed(2)} %`);
    return true;
  };
  const scoreLoop = (async () => {
    while (scoring) {
      try {
        if (!(await scoreNext(true))) await sleep(IDLE_SCORER_WAIT_MS);
      } catch (err) {
        scoreError = err;
        return;
      }
    }
  })();

  const server = await startLabServer(lab, `tta-${net}-${n}${plan.scaleLearningRate ? '-scaled' : ''}`, { env });
  const workers: LabProcess[] = [];
  const explain = () => workers.map((w) => `--- ${w.label}\n${tail(w.lines, 8)}`).join('\n');
  let t0 = 0;
  let stoppedBy: TtaStop = 'budget';
  let runMs = 0;
  let metrics!: RoomMetrics;
  let config!: StartConfig;
  let lost: string | null = null;
  let dropped: TtaRow['dropped'] = [];
  let cpu!: CpuSample;
  try {
    if (plan.hub) await waitForRoom(server, (r) => r.hub !== null, 'the hub joining', JOIN_TIMEOUT_MS);
    for (let i = 0; i < n; i++) workers.push(startLabWorker(lab, i, server, 'laptop'));
    await waitForRoom(server, (r) => r.members.length === n && r.members.every((m) => m.connected), `${n} workers joined`, JOIN_TIMEOUT_MS).catch((err: unknown) => {
      throw new LabError('ERR_LAB_PROCESS', `${label}: ${(err as Error).message}\n${explain()}`);
    });
    const sync = async () => {
      for (const info of await listCheckpoints(server)) {
        if (points.has(info.id)) continue;
        const dir = path.join(tmp, info.id);
        if (await downloadModel(server, info.id, dir)) points.set(info.id, { id: info.id, step: info.step, ms: Date.parse(info.createdAt) - t0, screen: null, accuracy: null, dir });
      }
    };
    const monitor = startCpuMonitor();
    t0 = Date.now();
    await server.start({ ...BASE_CONFIG, ...netConfig(net), scaleLearningRate: plan.scaleLearningRate, saveEverySteps: plan.saveEverySteps, maxToKeep: MAX_TO_KEEP, epochs: EPOCHS, dataset: labWorkloadOf(net).datasets.full.id });
    progress(`${label}: started; the chief checkpoints every ${plan.saveEverySteps} steps, scored as they come`);
    let listedAt = 0;
    try {
      for (;;) {
        await sleep(POLL_INTERVAL_MS);
        if (scoreError) throw scoreError;
        const room = await server.roomStatus();
        lost = lostMember(room, n);
        if (Date.now() - listedAt >= LIST_INTERVAL_MS) {
          await sync();
          listedAt = Date.now();
        }
        if (thresholdSeen([...points.values()], plan.threshold, plan.budgetMs)) {
          stoppedBy = 'threshold';
          break;
        }
        if (lost !== null) {
          stoppedBy = 'lost-member';
          progress(`${label}: the room lost a member: ${lost}`);
          break;
        }
        if (room.state !== 'training' && room.state !== 'paused') {
          stoppedBy = 'run-ended';
          progress(`${label}: the run ended on its own (${room.state}; last error ${JSON.stringify(room.lastError)})`);
          break;
        }
        if (Date.now() - t0 >= plan.budgetMs) {
          stoppedBy = 'budget';
          break;
        }
      }
    } finally {
      cpu = monitor.stop();
    }
    runMs = Date.now() - t0;
    await sync();
    const room = await server.roomStatus();
    dropped = room.dropped;
    if (!room.config) throw new LabError('ERR_LAB_PROCESS', `${label}: the room echoes no config: ${JSON.stringify(room)}`);
    config = room.config;
    metrics = await roomMetrics(server);
    await stopRun(server);
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
    await server.stop();
    // What is left is scored below, with the devices gone.
    scoring = false;
    await scoreLoop;
  }
  try {
    if (scoreError) throw scoreError;
    progress(`${label}: stopped by ${stoppedBy} after ${(runMs / 1000).toFixed(0)} s; scoring what is left (${points.size} checkpoints)`);
    while (await scoreNext(false));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  const list = [...points.values()].sort((a, b) => a.step - b.step).map(({ id, step, ms, screen, accuracy }) => ({ id, step, ms, screen, accuracy }));
  const reached = timeToThreshold(list, plan.threshold, plan.budgetMs);
  const globalBatch = globalBatchSize(config.batchSizePerWorker, n);
  const h = metrics.history;
  const first = h[0];
  const last = h.at(-1);
  const evaluatorCpuMs = scorer.cpuMs - cpu0;
  // The scorer and any in-process runs beside the row are idle-priority work (lab/cpu-monitor.ts).
  const machineBusyWithout = cpu.withoutIdle ?? Math.max(0, cpu.mean - evaluatorCpuMs / Math.max(1, runMs * cpu.cores));
  const row: TtaRow = {
    model: lab.profile.name,
    net,
    n,
    scaleLearningRate: plan.scaleLearningRate,
    sameWithScaling: globalBatch === config.referenceBatch,
    referenceBatch: config.referenceBatch,
    batchSizePerWorker: config.batchSizePerWorker,
    globalBatch,
    learningRate: config.learningRate,
    targetRate: plan.scaleLearningRate ? (config.learningRate * globalBatch) / config.referenceBatch : config.learningRate,
    warmupSteps: config.warmupSteps,
    threshold: plan.threshold,
    budgetMs: plan.budgetMs,
    saveEverySteps: plan.saveEverySteps,
    points: list,
    reached,
    examplesToThreshold: reached ? reached.step * globalBatch : null,
    stoppedBy,
    runMs,
    steps: last?.step ?? 0,
    examplesPerSec: first && last && last.at > first.at ? ((last.step - first.step) * globalBatch * 1000) / (last.at - first.at) : 0,
    // Accuracy only (the row's threshold is one): the evaluations' held-out loss is not part of the row.
    runEvaluations: metrics.evaluations.flatMap((e) => (e.accuracy === null ? [] : [{ epoch: e.epoch, step: e.step, accuracy: e.accuracy }])),
    dropped,
    cpu,
    evaluator: { screens: scorer.screens - screens0, fulls: scorer.fulls - fulls0, cpuSeconds: evaluatorCpuMs / 1000, machineBusyWithout },
    counts: lost === null && stoppedBy !== 'run-ended' && machineBusyWithout < MACHINE_BOUND_FRACTION,
  };
  progress(
    `${label}: ${reached ? `${pct} at ${(reached.ms / 1000).toFixed(0)} s (step ${reached.step}, ${(reached.accuracy * 100).toFixed(2)} %)` : `not ${pct} within ${(plan.budgetMs / 60_000).toFixed(1)} min`}; ${row.examplesPerSec.toFixed(1)} examples/s; ${row.evaluator.screens} screens and ${row.evaluator.fulls} full scores`,
  );
  return row;
}
