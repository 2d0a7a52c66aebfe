/**
 * Joins in the lab: N − 1 capped laptops train; one more laptop (a Node worker in the
 * lab's last namespace) joins mid-run, the server's join telemetry (RoomStatus `joins`)
 * says how long the class stood still for it and how long the joiner took to step in
 * lock-step, then it leaves (SIGTERM: it says goodbye) and, once the class is back to
 * N − 1 and stepping, the next one joins. Beside the telemetry, the harness keeps its own
 * view: the chief's largest report interval around the join against its median step (the
 * server's clock), and the joiner's first report past its admission step.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RoomStatus } from '../shared/protocol';
import { LabError } from './lab-error';
import type { Lab } from './netlab';
import { startLabServer, startLabWorker, waitForRoom, type LabServer } from './lab-server';
import { machineBound, startCpuMonitor, type CpuSample } from './cpu-monitor';
import { BASE_CONFIG, chiefOf, lostMember, netConfig, roomMetrics, stopRun, type TrainingNet } from './training-rows';
import { parseJoins, stallAround } from './class-report';
import type { JoinMeasurement, JoinRecord, JoinRow } from './report-types';
import { tail, type LabProcess } from './spawn';
import { progress } from './progress';

const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const JOIN_TIMEOUT_MS = 180_000;
/** The joiner's start (tfjs at 0.2 core), its admission and the telemetry's two figures. */
const JOIN_MEASURE_TIMEOUT_MS = 240_000;
/** After the telemetry is complete, how long the harness's own view may still take. */
const OBSERVE_GRACE_MS = 15_000;
/** A class that does not step again within this after a join or a leave is broken, not slow. */
const SETTLE_TIMEOUT_MS = 180_000;
/** A joiner that ignores SIGTERM this long is killed. */
const LEAVE_TIMEOUT_MS = 10_000;
const POLL_INTERVAL_MS = 250;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface JoinPlan {
  net: TrainingNet;
  /** The class after the join. */
  n: number;
  repetitions: number;
  hub: boolean;
  /** Steps the chief must be past before the first join. */
  warmupSteps: number;
  /** Steps the chief must take after a join (and after a leave) before the next thing happens. */
  settleSteps: number;
}

/** The error a server without the join telemetry gets: the row cannot read what it measures. */
export function noJoinTelemetry(room: string): LabError {
  return new LabError(
    'ERR_LAB_PROCESS',
    `GET /api/rooms/${room} has no \`joins\`: this server does not report its joins yet (issue 16: RoomStatus.joins, one {generation, joiners, atStep, pauseMs, lockStepMs} per join), so the class's pause per join cannot be measured`,
  );
}

const joinerArgs = (server: LabServer, name: string) => ['--import', 'tsx', 'node-worker/main.ts', '--url', server.url, '--room', server.room, '--name', name, '--backend', 'cpu', '--device', 'laptop'];

/** The class's own members (not joiners) the room dropped. */
const classDrops = (room: RoomStatus, joinerPrefix: string) => room.dropped.filter((d) => !d.name.startsWith(joinerPrefix));

/**
 * One join row in `lab` (which needs `plan.n` workers): `plan.repetitions` joins into a
 * class of `plan.n − 1`, each measured, each joiner leaving again before the next.
 */
export async function joinRow(lab: Lab, plan: JoinPlan): Promise<JoinRow> {
  const { n, net } = plan;
  if (n < 2 || n > lab.n) throw new LabError('ERR_LAB_USAGE', `a join row needs 2 to ${lab.n} workers, got ${n}`);
  const label = `${lab.profile.name}, ${net}, joins at N = ${n}`;
  const env: NodeJS.ProcessEnv = {};
  if (plan.hub) env.HUB = '1';
  progress(`${label}: starting the server and ${n - 1} workers`);
  const server = await startLabServer(lab, `join-${net}-${n}`, { env });
  const workers: LabProcess[] = [];
  let joiner: LabProcess | null = null;
  const explain = () => [...workers, ...(joiner ? [joiner] : [])].map((w) => `--- ${w.label}\n${tail(w.lines, 8)}`).join('\n');
  const fail = (what: string): never => {
    throw new LabError('ERR_LAB_PROCESS', `${label}: ${what}\n${explain()}`);
  };
  const joinerPrefix = 'lab-join-';
  const measurements: JoinMeasurement[] = [];
  let rowError: string | null = null;
  const monitor = startCpuMonitor();
  let cpu!: CpuSample;
  let lastRoom!: RoomStatus;
  try {
    if (plan.hub) await waitForRoom(server, (r) => r.hub !== null, 'the hub joining', JOIN_TIMEOUT_MS);
    for (let i = 0; i < n - 1; i++) workers.push(startLabWorker(lab, i, server, 'laptop'));
    await waitForRoom(server, (r) => r.members.length === n - 1 && r.members.every((m) => m.connected), `${n - 1} workers joined`, JOIN_TIMEOUT_MS).catch((err: unknown) => fail((err as Error).message));
    await server.start({ ...BASE_CONFIG, ...netConfig(net) });
    await waitForRoom(server, (r) => r.state === 'training' && (chiefOf(r)?.step ?? 0) > plan.warmupSteps, `the chief past step ${plan.warmupSteps}`, JOIN_TIMEOUT_MS).catch((err: unknown) => fail((err as Error).message));
    // Fails fast, before any joiner starts, on a server without the telemetry.
    if (parseJoins(await server.roomStatus()) === null) throw noJoinTelemetry(server.room);
    const cap = lab.cpuCap('joiner', 'laptop');
    // A class that does not settle after a join or a leave ends the row: the joins measured so far are kept.
    const settle = async (done: (r: RoomStatus) => boolean, what: string): Promise<string | null> => {
      try {
        await waitForRoom(server, done, what, SETTLE_TIMEOUT_MS);
        return null;
      } catch (err) {
        const room = await server.roomStatus();
        return `${(err as Error).message}; ${lostMember(room, n - 1) ?? 'nobody was dropped'}`;
      }
    };
    for (let k = 1; k <= plan.repetitions && rowError === null; k++) {
      const name = `${joinerPrefix}${k}`;
      const started = Date.now();
      progress(`${label}: join ${k} of ${plan.repetitions} (${name})`);
      joiner = lab.spawnInWorker(n - 1, process.execPath, joinerArgs(server, name), { label: `joiner ${name}`, cwd: PROJECT_ROOT, cpuCap: cap, env: { JOIN_CODE: server.joinCode } });
      let record: JoinRecord | null = null;
      // The harness's own view, apart from the telemetry: the admission as the room's log has it, and the joiner's first report past it.
      let admitted: { at: number; step: number } | null = null;
      let lockedAt: number | null = null;
      /** The chief's step when the joiner was first seen past its admission. */
      let lockedChiefStep: number | null = null;
      let completeAt: number | null = null;
      let error: string | null = null;
      for (;;) {
        const room = await server.roomStatus();
        const joins = parseJoins(room);
        if (joins === null) throw noJoinTelemetry(server.room);
        record = joins.find((j) => j.joiners.includes(name)) ?? null;
        const event = room.events.find((e) => e.kind === 'admitted' && e.members.includes(name));
        admitted ??= event ? { at: event.at, step: event.step } : null;
        const member = room.members.find((m) => m.name === name);
        if (admitted && member && lockedAt === null && member.step > admitted.step) {
          lockedAt = Date.now();
          lockedChiefStep = chiefOf(room)?.step ?? member.step;
        }
        if (record && record.pauseMs !== null && record.lockStepMs !== null) completeAt ??= Date.now();
        if (completeAt !== null && (lockedAt !== null || Date.now() - completeAt > OBSERVE_GRACE_MS)) break;
        if (joiner.child.exitCode !== null) {
          error = `the joiner exited (${joiner.child.exitCode}) before its join was measured`;
          break;
        }
        if (Date.now() - started > JOIN_MEASURE_TIMEOUT_MS) {
          error = `no complete \`joins\` entry for ${name} within ${JOIN_MEASURE_TIMEOUT_MS / 1000} s (last: ${JSON.stringify(record)})`;
          break;
        }
        await sleep(POLL_INTERVAL_MS);
      }
      const waitedMs = Date.now() - started;
      // The switch comes once the joiner is ready, which may be many steps after its
      // admission: the stall is looked for up to a step past the joiner's first in lock-step,
      // once the chief's reports cover that and the class is settleSteps on.
      let observedStallMs: number | null = null;
      const fromStep = admitted?.step ?? record?.atStep ?? null;
      if (fromStep !== null) {
        const toStep = (lockedChiefStep ?? fromStep + plan.settleSteps) + 1;
        rowError = await settle((r) => (chiefOf(r)?.step ?? 0) >= toStep + plan.settleSteps, `the class ${plan.settleSteps} steps past join ${k}`);
        if (rowError === null) observedStallMs = stallAround((await roomMetrics(server)).history, fromStep, toStep, plan.settleSteps)?.stallMs ?? null;
      }
      const m: JoinMeasurement = {
        repetition: k,
        name,
        record,
        observedStallMs,
        observedLockStepMs: lockedAt !== null && admitted !== null ? lockedAt - admitted.at : null,
        waitedMs,
        error,
      };
      measurements.push(m);
      progress(
        `${label}: join ${k}: ${error ?? `pause ${record!.pauseMs} ms, lock-step ${record!.lockStepMs} ms (generation ${record!.generation}, step ${record!.atStep})`}; observed stall ${observedStallMs === null ? '–' : `${Math.round(observedStallMs)} ms`}, lock-step ${m.observedLockStepMs === null ? '–' : `${m.observedLockStepMs} ms`}`,
      );
      // The joiner leaves; the next joins once the class is back to N − 1 and stepping.
      if (joiner.child.pid !== undefined && joiner.child.exitCode === null) {
        try {
          process.kill(-joiner.child.pid, 'SIGTERM');
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
        }
        await Promise.race([joiner.exited, sleep(LEAVE_TIMEOUT_MS)]);
      }
      await joiner.kill();
      joiner = null;
      if (rowError !== null) break;
      const leftAt = chiefOf(await server.roomStatus())?.step ?? 0;
      rowError = await settle(
        (r) => r.members.length === n - 1 && r.members.every((mm) => mm.connected && !mm.name.startsWith(joinerPrefix)) && (chiefOf(r)?.step ?? 0) >= leftAt + plan.settleSteps,
        `the class back to ${n - 1} and stepping after ${name} left`,
      );
    }
    if (rowError !== null) progress(`${label}: ${rowError}\n${explain()}`);
    lastRoom = await server.roomStatus();
    await stopRun(server);
  } finally {
    cpu = monitor.stop();
    await Promise.all([...workers, ...(joiner ? [joiner] : [])].map((w) => w.kill()));
    await server.stop();
  }
  const dropped = classDrops(lastRoom, joinerPrefix);
  return { model: lab.profile.name, net, n, measurements, dropped, error: rowError, cpu, counts: rowError === null && dropped.length === 0 && !machineBound(cpu) };
}
