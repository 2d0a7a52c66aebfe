/**
 * `npm run bench:class`: a class of thirty on this machine, on the product's defaults, as
 * Node workers on loopback (the CPU regime: thirty processes share this machine's cores, so
 * the figures say what the class costs in CPU and coordination, not what a network does).
 * Writes bench/class.json and bench/class.md; asserts nothing.
 *
 * One class of CLASS_SIZE (30) training the MLP goes through, in order:
 *   1. a join storm: FIRST (8) train, then the other 22 join within STORM_SPREAD_MS (40 s):
 *      the time from the last join to everyone in lock-step, the class's pause (each step's
 *      time beyond twice the median of the ten before it, summed over the storm: the class
 *      slows as it grows on shared cores, and that is not a pause) and the admissions it took;
 *   2. the class without churn for CHURN_WINDOW_MS, then with churn for as long
 *      (CHURN_PER_MINUTE workers a minute leave, saying goodbye, and join again 5 s later:
 *      SIGUSR2, the same process, as a student closes the tab and opens it again; a new
 *      process would spend this machine's shared cores on starting tfjs, which a student's
 *      own device pays for): examples per second, the second against the first;
 *   3. faults: a two-second hiccup on two devices at once (SIGSTOP for 2 s: the process
 *      and its sockets stand still, as a Wi-Fi drop-out looks to the others), a freeze of
 *      15 s on two devices (a locked phone: dropped, then back by itself after SIGCONT),
 *      and a permanent cut of one (SIGSTOP for good: gone within the liveness window).
 *      Each: who was dropped, the class's pause, and whether the hashes agreed after.
 *
 * The lab's `class30` section (`npm run lab -- --section class30`, lab/sections.ts) runs this
 * and takes its four targets into the lab's report (bench/lab.json) from the file
 * BENCH_CLASS_TARGETS names; bench/class.json holds the rows, never the targets.
 * BENCH_CLASS (30), BENCH_CLASS_FIRST (8) and BENCH_CHURN_MS (45000) change the run, and
 * BENCH_CLASS_OUT the artifacts' name (bench/<name>.*);
 * BENCH_CLASS_SYNC=local-steps trains the class in rounds of local steps (the mode's other
 * settings on their defaults: docs/local-steps.md) and writes bench/class-local-steps.*:
 * the same checks against the same goals, a comparison beside the report, not its targets.
 */
import os from 'node:os';
import path from 'node:path';
import { mkdirSync, writeFileSync } from 'node:fs';
import { pollUntil, spawnNodeWorker, type SpawnedWorker } from '../support/processes';
import { startTestServer, codeFor, AS_TEACHER } from '../support/server';
import type { RoomStatus } from '../../shared/protocol';
import { DEFAULT_START_CONFIG } from '../../shared/tasks/start-config';
import { globalBatchSize } from '../../shared/data/batch-plan';
import type { RunningServer } from '../../signaling-server/server';
import { inLockStep, type FaultRow } from '../../lab/fault-rows';

const CLASS_SIZE = Number(process.env.BENCH_CLASS ?? 30);
const FIRST = Number(process.env.BENCH_CLASS_FIRST ?? 8);
const STORM_SPREAD_MS = 40_000;
const CHURN_WINDOW_MS = Number(process.env.BENCH_CHURN_MS ?? 45_000);
const CHURN_PER_MINUTE = 5;
const SYNC = process.env.BENCH_CLASS_SYNC === 'local-steps' ? 'local-steps' : 'every-step';
/** Steps per turn: a local-steps class sums (and reports) once per round of the default localSteps. */
const TURN_STEPS = SYNC === 'local-steps' ? DEFAULT_START_CONFIG.localSteps : 1;
/**
 * A turn of the whole class, once measured (ms): every wait and every target below gets one
 * more of it, since in local-steps mode nothing the class does (an admission, a drop's
 * recovery, a step seen by the server) happens faster than a round.
 */
let turnMs = 0;
/** Where the results go: bench/class.* for every step, bench/class-local-steps.* for rounds. */
const OUT_NAME = process.env.BENCH_CLASS_OUT ?? (SYNC === 'local-steps' ? 'class-local-steps' : 'class');
/** Where the lab's section reads the targets (absent: printed only). */
const TARGETS_FILE = process.env.BENCH_CLASS_TARGETS ?? null;
const HICCUP_MS = 2_000;
const FREEZE_MS = 15_000;
/** A cut is watched this long: past the server's liveness window (5 s by default), whatever it is. */
const CUT_WATCH_MS = 10_000;
const ROOM = 'bench-class';
const BATCH_PER_WORKER = 32;
const OUT_DIR = path.resolve(import.meta.dirname, '../../bench');
const POLL_MS = 200;

interface Target {
  id: string;
  goal: string;
  value: number | null;
  met: boolean;
  detail: string;
}

let server: RunningServer;
const workers = new Map<string, SpawnedWorker>();
const started = Date.now();
const log = (m: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(0)} s] ${m}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function room(): Promise<RoomStatus> {
  return (await (await fetch(`${server.url}/api/rooms/${ROOM}`, AS_TEACHER)).json()) as RoomStatus;
}

function spawn(name: string): SpawnedWorker {
  const w = spawnNodeWorker(server.url, ROOM, codeFor(ROOM), name);
  workers.set(name, w);
  return w;
}

const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number) => pollUntil(what, probe, timeoutMs, () => '', POLL_MS);

/**
 * Samples the chief's step every POLL_MS for `ms`: examples trained per second (each step's
 * global batch at the ring's size then) and the longest time without a step.
 */
async function watch(ms: number, during?: (elapsed: number) => Promise<void>): Promise<{ examplesPerSec: number; longestStallMs: number; steps: number }> {
  const t0 = Date.now();
  let last = await room();
  let examples = 0;
  let lastStepAt = t0;
  let longest = 0;
  const firstStep = last.step;
  while (Date.now() - t0 < ms) {
    await during?.(Date.now() - t0);
    await sleep(POLL_MS);
    const r = await room();
    if (r.step > last.step) {
      examples += (r.step - last.step) * globalBatchSize(BATCH_PER_WORKER, r.members.length);
      longest = Math.max(longest, Date.now() - lastStepAt);
      lastStepAt = Date.now();
    }
    last = r;
  }
  longest = Math.max(longest, Date.now() - lastStepAt);
  return { examplesPerSec: examples / ((Date.now() - t0) / 1000), longestStallMs: longest, steps: last.step - firstStep };
}

/** The usual step of the class now: the median interval between the chief's last steps. */
async function usualStepMs(): Promise<number> {
  const times: number[] = [];
  let last = (await room()).step;
  let at = Date.now();
  // Rounds of a whole class take tens of seconds here: two of them make the measurement.
  while (times.length < (TURN_STEPS > 1 ? 2 : 8)) {
    await sleep(50);
    const s = (await room()).step;
    if (s > last) {
      times.push((Date.now() - at) / (s - last));
      last = s;
      at = Date.now();
    }
  }
  return times.sort((a, b) => a - b)[times.length >> 1]!;
}

async function storm(): Promise<{ lockStepAfterLastJoinMs: number; pauseMs: number; admissions: number; usualStepMs: number; run: number }> {
  for (let i = 0; i < FIRST; i++) spawn(`s${String(i).padStart(2, '0')}`);
  await waitFor(`${FIRST} workers`, async () => (await room()).members.length === FIRST, 180_000);
  const start = await fetch(`${server.url}/api/rooms/${ROOM}/start`, { method: 'POST', headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'mlp', epochs: 1000, maxSteps: 1_000_000, batchSizePerWorker: BATCH_PER_WORKER, resumeFrom: 'none', sync: SYNC }) });
  // epochs: the run must not end on its own before the bench does (two epochs of 60,000 go by in minutes).
  if (start.status !== 200) throw new Error(`start: ${start.status} ${await start.text()}`);
  await waitFor('5 steps', async () => (await room()).step >= 5, 120_000);
  const usual = await usualStepMs();
  turnMs = usual * TURN_STEPS;
  log(`${FIRST} training, a step every ${usual.toFixed(0)} ms (a turn ${turnMs.toFixed(0)} ms); ${CLASS_SIZE - FIRST} join over ${STORM_SPREAD_MS / 1000} s`);
  const stormStartStep = (await room()).step;
  const stormStartAt = Date.now();
  const joiners = CLASS_SIZE - FIRST;
  let lastJoinAt = 0;
  let stepAtLastJoin = 0;
  // Steps beyond twice the recent usual one, summed: the class's pause while the storm went on.
  let pauseMs = 0;
  const recent: number[] = [usual];
  let lastStep = stormStartStep;
  let lastStepAt = Date.now();
  let spawned = 0;
  const deadline = Date.now() + STORM_SPREAD_MS + 240_000 + 10 * classTurnMs();
  for (;;) {
    const elapsed = Date.now() - stormStartAt;
    while (spawned < joiners && elapsed >= (spawned * STORM_SPREAD_MS) / joiners) spawn(`s${String(FIRST + spawned++).padStart(2, '0')}`);
    const r = await room();
    if (r.step > lastStep) {
      const perStep = (Date.now() - lastStepAt) / (r.step - lastStep);
      const typical = [...recent].sort((a, b) => a - b)[recent.length >> 1]!;
      pauseMs += Math.max(0, perStep - 2 * typical) * (r.step - lastStep);
      recent.push(perStep);
      if (recent.length > 10) recent.shift();
      lastStep = r.step;
      lastStepAt = Date.now();
    }
    if (!lastJoinAt && r.members.length + r.waiting.length === CLASS_SIZE) {
      lastJoinAt = Date.now();
      stepAtLastJoin = r.step;
      log(`all ${CLASS_SIZE} joined, at step ${r.step}`);
    }
    if (lastJoinAt && inLockStep(r, CLASS_SIZE) && r.step > stepAtLastJoin) {
      const lockStepAfterLastJoinMs = Date.now() - lastJoinAt;
      log(`all ${CLASS_SIZE} in lock-step ${lockStepAfterLastJoinMs} ms after the last join; ${r.joins.length} admissions; pause ${pauseMs.toFixed(0)} ms; run ${r.run}`);
      return { lockStepAfterLastJoinMs, pauseMs, admissions: r.joins.length, usualStepMs: usual, run: r.run };
    }
    if (Date.now() > deadline) throw new Error(`the storm did not settle: ${r.members.length} in the ring, ${r.waiting.length} waiting, run ${r.run}`);
    await sleep(POLL_MS);
  }
}

async function churn(): Promise<{ quiet: number; churned: number; ratio: number; leaves: number; windowMs: number }> {
  // The whole class's turn, measured now that all are in; a window holds at least four of them.
  if (TURN_STEPS > 1) {
    classTurn = (await usualStepMs()) * TURN_STEPS;
    log(`the class of ${CLASS_SIZE}: a round every ${(classTurn / 1000).toFixed(1)} s`);
  }
  const windowMs = Math.max(CHURN_WINDOW_MS, 4 * classTurnMs());
  const quiet = await watch(windowMs);
  log(`no churn: ${quiet.examplesPerSec.toFixed(1)} examples/s over ${(windowMs / 1000).toFixed(0)} s`);
  const everyMs = 60_000 / CHURN_PER_MINUTE;
  let leaves = 0;
  const churned = await watch(windowMs, async (elapsed) => {
    if (elapsed < leaves * everyMs) return;
    // Never the chief: its leaving is a hand-over the faults below measure on their own.
    const status = await room();
    const candidates = status.members.slice(1).map((m) => m.name);
    const name = candidates[(leaves * 7) % candidates.length]!;
    leaves++;
    workers.get(name)!.child.kill('SIGUSR2');
  });
  log(`churn (${CHURN_PER_MINUTE} a minute leave and come back): ${churned.examplesPerSec.toFixed(1)} examples/s, ${leaves} leaves`);
  await waitFor('the class whole again after the churn', async () => inLockStep(await room(), CLASS_SIZE), 240_000 + 10 * classTurnMs());
  return { quiet: quiet.examplesPerSec, churned: churned.examplesPerSec, ratio: churned.examplesPerSec / quiet.examplesPerSec, leaves, windowMs };
}

/** Stops `names` (SIGSTOP) for `holdMs` (forever when null), and reports what the class made of it. */
async function fault(kind: string, names: string[], holdMs: number | null): Promise<FaultRow> {
  const before = await room();
  const droppedBefore = new Set(before.events.filter((e) => e.kind === 'left' || e.kind === 'dropped').map((e) => `${e.at}`));
  const size = before.members.length;
  const stoppedAt = Date.now();
  for (const n of names) workers.get(n)!.child.kill('SIGSTOP');
  const during = await watch(holdMs ?? CUT_WATCH_MS);
  let backInLockStepMs: number | null = null;
  if (holdMs !== null) {
    const thawedAt = Date.now();
    for (const n of names) workers.get(n)!.child.kill('SIGCONT');
    const back = await pollUntil(`the class whole after the ${kind}`, async () => inLockStep(await room(), size), 180_000 + 10 * classTurnMs(), () => '', POLL_MS).catch(() => false);
    backInLockStepMs = back ? Date.now() - thawedAt : null;
  } else {
    await pollUntil(`the class in step without the cut device`, async () => inLockStep(await room(), size - names.length), 180_000 + 10 * classTurnMs(), () => '', POLL_MS).catch(() => false);
  }
  const after = await room();
  const dropped = [...new Set(after.events.filter((e) => (e.kind === 'left' || e.kind === 'dropped') && !droppedBefore.has(`${e.at}`) && e.at >= before.events.at(-1)!.at).flatMap((e) => e.members))];
  const row: FaultRow = { fault: kind, devices: names, dropped, pauseMs: during.longestStallMs, backInLockStepMs, hashesAgree: new Set(after.members.map((m) => m.weightsHash)).size === 1 };
  log(`${kind} on ${names.join(', ')}: dropped [${dropped.join(', ')}], longest pause ${row.pauseMs} ms, back in lock-step ${backInLockStepMs ?? '–'} ms after, hashes agree: ${row.hashesAgree} (${Date.now() - stoppedAt} ms in all)`);
  return row;
}

/** The whole class's turn once measured, else estimated from the first eight's (the CPU regime's rounds grow with the class). */
let classTurn: number | null = null;
function classTurnMs(): number {
  return classTurn ?? turnMs * (CLASS_SIZE / FIRST);
}

function markdown(result: Record<string, unknown>, targets: Target[], faults: FaultRow[]): string {
  const lines = [
    `# A class of ${CLASS_SIZE} on one machine`,
    '',
    `Measured ${new Date().toISOString()} on ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}), Node ${process.versions.node}, by ${SYNC === 'local-steps' ? '`BENCH_CLASS_SYNC=local-steps npm run bench:class`' : '`npm run lab -- --section class30` (commit and versions: bench/lab.md)'}: ${CLASS_SIZE} Node workers on loopback training the MLP on the product's defaults${SYNC === 'local-steps' ? ` with \`sync: local-steps\` (rounds of ${TURN_STEPS} local steps, the mode's defaults)` : ''}. All of them share this machine's cores: the figures are the CPU regime, what the class costs in computation and coordination, not what a network does. A hiccup and a freeze are SIGSTOP (sockets and process stand still); a cut is SIGSTOP for good.`,
    '',
    SYNC === 'local-steps' ? '| check (against the targets\' goals; not a target of the report) | goal | value | met | detail |' : '| target | goal | value | met | detail |',
    '|---|---|---|---|---|',
    ...targets.map((t) => `| ${t.id} | ${t.goal} | ${t.value === null ? '–' : t.value.toFixed(2)} | ${t.met ? 'yes' : 'no'} | ${t.detail} |`),
    '',
    '| fault | devices | dropped | longest pause (ms) | back in lock-step after (ms) | hashes agree |',
    '|---|---|---|---|---|---|',
    ...faults.map((f) => `| ${f.fault} | ${f.devices.join(', ')} | ${f.dropped.join(', ') || 'nobody'} | ${f.pauseMs} | ${f.backInLockStepMs ?? '–'} | ${f.hashesAgree ? 'yes' : 'no'} |`),
    '',
    '```json',
    JSON.stringify(result, null, 2),
    '```',
    '',
  ];
  return lines.join('\n');
}

async function main(): Promise<void> {
  server = await startTestServer();
  try {
    const s = await storm();
    const c = await churn();
    const members = (await room()).members.map((m) => m.name);
    const chief = members[0]!;
    const others = members.filter((n) => n !== chief);
    const faults = [
      await fault(`hiccup ${HICCUP_MS / 1000} s`, others.slice(2, 4), HICCUP_MS),
      await fault(`freeze ${FREEZE_MS / 1000} s`, others.slice(6, 8), FREEZE_MS),
      await fault('cut for good', others.slice(10, 11), null),
    ];
    const final = await room();
    const [hiccup, freeze] = faults;
    // Every step: none. Local steps: one round of the whole class, since the class acts between rounds.
    const slackMs = SYNC === 'local-steps' ? classTurnMs() : 0;
    const plus = slackMs > 0 ? ` + one round of the class (${(slackMs / 1000).toFixed(0)} s)` : '';
    // A joiner is admitted at a round's end and is in lock-step once its first round ends: two rounds.
    const joinPlus = slackMs > 0 ? ` + two rounds of the class (${((2 * slackMs) / 1000).toFixed(0)} s: admitted at a round's end, in lock-step after its first round)` : '';
    const targets: Target[] = [
      { id: `class${CLASS_SIZE}-join-storm`, goal: `all in lock-step ≤ 20 s${joinPlus} after the last join; the class keeps training`, value: s.lockStepAfterLastJoinMs / 1000, met: s.lockStepAfterLastJoinMs <= 20_000 + 2 * slackMs && s.run === 1, detail: `${s.admissions} admissions for ${CLASS_SIZE - FIRST} joiners; steps beyond twice the recent step added up to ${(s.pauseMs / 1000).toFixed(1)} s during the storm (a step took ${s.usualStepMs.toFixed(0)} ms with ${FIRST}); run ${s.run}` },
      { id: `class${CLASS_SIZE}-churn`, goal: '≥ 0.8 of the no-churn examples/s', value: c.ratio, met: c.ratio >= 0.8, detail: `${c.churned.toFixed(1)} against ${c.quiet.toFixed(1)} examples/s; ${c.leaves} leaves and returns in ${(c.windowMs / 1000).toFixed(0)} s` },
      { id: `class${CLASS_SIZE}-hiccup`, goal: `0 dropped for a 2 s hiccup; the pause ≤ 3 s${plus}`, value: hiccup!.pauseMs / 1000, met: hiccup!.dropped.length === 0 && hiccup!.pauseMs <= 3_000 + slackMs, detail: `dropped: ${hiccup!.dropped.join(', ') || 'nobody'}` },
      { id: `class${CLASS_SIZE}-freeze`, goal: `the frozen dropped, back in lock-step ≤ 5 s${plus} after SIGCONT; nobody else dropped`, value: freeze!.backInLockStepMs === null ? null : freeze!.backInLockStepMs / 1000, met: freeze!.backInLockStepMs !== null && freeze!.backInLockStepMs <= 5_000 + slackMs && freeze!.dropped.every((d) => freeze!.devices.includes(d)), detail: `dropped: ${freeze!.dropped.join(', ') || 'nobody'}; back in lock-step is the whole class's, at one step with one hash` },
    ];
    // The targets live in the lab's report alone; a local-steps class is a comparison against the same goals, its checks beside it.
    const result = { generatedAt: new Date().toISOString(), machine: { cores: os.availableParallelism(), node: process.versions.node }, sync: SYNC, rounds: final.round, steps: final.step, classSize: CLASS_SIZE, first: FIRST, storm: s, churn: c, faults, finalRun: final.run, ...(SYNC === 'local-steps' ? { checks: targets } : {}) };
    mkdirSync(OUT_DIR, { recursive: true });
    writeFileSync(path.join(OUT_DIR, `${OUT_NAME}.json`), `${JSON.stringify(result, null, 2)}\n`);
    if (TARGETS_FILE) writeFileSync(TARGETS_FILE, JSON.stringify(targets));
    writeFileSync(path.join(OUT_DIR, `${OUT_NAME}.md`), markdown(result, targets, faults));
    for (const t of targets) console.log(`target ${t.id}: ${t.value === null ? '–' : t.value.toFixed(2)} (${t.goal}) ${t.met ? 'met' : 'NOT met'}: ${t.detail}`);
    log(`wrote bench/${OUT_NAME}.json and bench/${OUT_NAME}.md`);
  } finally {
    for (const w of workers.values()) {
      w.child.kill('SIGCONT');
      w.child.kill('SIGKILL');
    }
    await server.close();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    for (const w of workers.values()) w.child.kill('SIGKILL');
    process.exit(1);
  },
);
