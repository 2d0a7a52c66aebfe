/**
 * The local-steps lab's direct run: a real class on the emulated network trained until a
 * checkpoint scores the threshold, the check on the composed time to accuracy
 * (lab/local-steps-rows.ts).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CheckpointInfo } from '../shared/checkpoints/checkpoint';
import type { Lab } from './netlab';
import { LabError } from './lab-error';
import { startLabServer, startLabWorker, waitForRoom, type LabServer } from './lab-server';
import { BASE_CONFIG, lostMember, netConfig, roomMetrics, stopRun } from './training-rows';
import { LAB_WORKLOADS } from '../shared/tasks/lab-workloads';
import type { DeviceProfile } from './cpu-caps';
import { startCpuMonitor, type CpuSample } from './cpu-monitor';
import { CheckpointScorer } from './tta-rows';
import { frontierEvaluation, nextEvaluation, thresholdSeen, timeToThreshold, type EvaluationPolicy } from './class-report';
import type { CheckpointPoint, Reached } from './report-types';
import { tail, type LabProcess } from './spawn';
import { progress } from './progress';
import { variantConfig } from './local-steps-protocol';
import type { DirectRun, LocalStepsNetwork } from './local-steps-report';
import type { LocalStepsPlan } from './local-steps-plan';

/** How long a class of capped workers may take to join its server (the windows wait as long). */
export const JOIN_TIMEOUT_MS = 300_000;
/** How often the direct run reads the room, and the checkpoint list. */
const DIRECT_POLL_MS = 1_000;
const LIST_INTERVAL_MS = 2_000;
/** How long the scorer waits between looks while it has nothing to score. */
const IDLE_SCORER_WAIT_MS = 500;
/** Checkpoints the direct run's server keeps: every one of them may be the first to score the threshold. */
const MAX_TO_KEEP = 100;

const teacher = (server: LabServer) => ({ authorization: `Bearer ${server.teacherToken}` });

async function listCheckpoints(server: LabServer): Promise<CheckpointInfo[]> {
  const res = await fetch(`${server.controlUrl}/api/rooms/${server.room}/checkpoints`, { headers: teacher(server) });
  if (!res.ok) throw new LabError('ERR_LAB_PROCESS', `GET /api/rooms/${server.room}/checkpoints: HTTP ${res.status}`);
  return (await res.json()) as CheckpointInfo[];
}

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

/**
 * The direct run: a local-steps class on the lab from Start until a checkpoint (the
 * product's default, every 50 steps and at each epoch's end) scores the threshold on the
 * official test set, or the budget. Its time is the first such checkpoint's capture after
 * Start, as the class rows time theirs (lab/tta-rows.ts). The accuracy runs go on beside
 * it at idle priority, as beside the windows, and the scorer (idle too) shares what is spare.
 */
export async function directRun(lab: Lab, network: LocalStepsNetwork, device: DeviceProfile, direct: NonNullable<LocalStepsPlan['direct']>, accuracy: LocalStepsPlan['accuracy'], scorer: CheckpointScorer): Promise<DirectRun> {
  const n = lab.n;
  const label = `${network}, N = ${n} ${device}, ${direct.variant.id}, directly to ${(accuracy.threshold * 100).toFixed(0)} %`;
  const policy: EvaluationPolicy = { threshold: accuracy.threshold, screenMargin: direct.screenMargin, budgetMs: direct.budgetMs };
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'webring-lab-local-steps-'));
  const points = new Map<string, CheckpointPoint & { dir: string; round: number | null }>();
  let scoring = true;
  let scoreError: unknown = null;
  const scoreNext = async (frontier: boolean): Promise<boolean> => {
    const all = [...points.values()];
    const next = (frontier ? frontierEvaluation(all, policy) : null) ?? nextEvaluation(all, policy);
    if (!next) return false;
    const p = points.get(next.id)!;
    const acc = await scorer.score(p.dir, next.split);
    if (next.split === 'screen') p.screen = acc;
    else p.accuracy = acc;
    progress(`${label}: checkpoint at step ${p.step} (${(p.ms / 1000).toFixed(0)} s): ${next.split} ${(acc * 100).toFixed(2)} %`);
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
  progress(`${label}: starting the server (no hub) and ${n} workers`);
  const server = await startLabServer(lab, `local-steps-direct-${n}`);
  const workers: LabProcess[] = [];
  const explain = () => workers.map((w) => `--- ${w.label}\n${tail(w.lines, 8)}`).join('\n');
  let t0 = 0;
  let stoppedBy: DirectRun['stoppedBy'] = 'budget';
  let runMs = 0;
  let lost: string | null = null;
  let history: Array<{ at: number; step: number }> = [];
  let rounds = 0;
  let wire = 'unknown';
  let lastError: unknown = null;
  let cpu!: CpuSample;
  try {
    for (let i = 0; i < n; i++) workers.push(startLabWorker(lab, i, server, device));
    await waitForRoom(server, (r) => r.members.length === n && r.members.every((m) => m.connected), `${n} workers joined`, JOIN_TIMEOUT_MS).catch((err: unknown) => {
      throw new LabError('ERR_LAB_PROCESS', `${label}: ${(err as Error).message}\n${explain()}`);
    });
    const sync = async () => {
      for (const info of await listCheckpoints(server)) {
        if (points.has(info.id)) continue;
        const dir = path.join(tmp, info.id);
        if (await downloadModel(server, info.id, dir)) points.set(info.id, { id: info.id, step: info.step, ms: Date.parse(info.createdAt) - t0, screen: null, accuracy: null, dir, round: null });
      }
    };
    const monitor = startCpuMonitor();
    t0 = Date.now();
    // The run may go past the default run's end (epochs), as far as the accuracy runs do; nothing else changes.
    await server.start({ ...BASE_CONFIG, ...netConfig(LAB_WORKLOADS.dense.model), ...variantConfig(direct.variant), epochs: accuracy.maxEpochs, maxToKeep: MAX_TO_KEEP });
    progress(`${label}: started; the chief checkpoints on the default schedule, scored as they come`);
    let listedAt = 0;
    try {
      for (;;) {
        await sleep(DIRECT_POLL_MS);
        if (scoreError) throw scoreError;
        const room = await server.roomStatus();
        lost = lostMember(room, n);
        rounds = room.round;
        if (room.config) wire = room.config.wire;
        if (Date.now() - listedAt >= LIST_INTERVAL_MS) {
          await sync();
          listedAt = Date.now();
        }
        if (thresholdSeen([...points.values()], policy.threshold, policy.budgetMs)) {
          stoppedBy = 'threshold';
          break;
        }
        if (lost !== null) {
          stoppedBy = 'lost-member';
          break;
        }
        if (room.state !== 'training' && room.state !== 'paused') {
          // Its epochs ran out (it counts), or it failed (it does not).
          stoppedBy = 'run-ended';
          lastError = room.lastError;
          break;
        }
        if (Date.now() - t0 >= policy.budgetMs) break;
      }
    } finally {
      cpu = monitor.stop();
    }
    runMs = Date.now() - t0;
    await sync();
    history = (await roomMetrics(server)).history.map((p) => ({ at: p.at - t0, step: p.step }));
    await stopRun(server);
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
    await server.stop();
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
  const list = [...points.values()].sort((a, b) => a.step - b.step).map(({ id, step, ms, screen, accuracy: acc }) => ({ id, step, ms, screen, accuracy: acc }));
  const reached: Reached | null = timeToThreshold(list, policy.threshold, policy.budgetMs);
  progress(`${label}: ${reached ? `${(policy.threshold * 100).toFixed(0)} % at ${(reached.ms / 1000).toFixed(0)} s (step ${reached.step})` : `not reached within ${(policy.budgetMs / 60_000).toFixed(1)} min`}`);
  return { network, n, device, variant: direct.variant.id, wire, budgetMs: direct.budgetMs, points: list, reached, stoppedBy, runMs, rounds, history, cpu, lost, counts: lost === null && (stoppedBy !== 'run-ended' || lastError === null) };
}
