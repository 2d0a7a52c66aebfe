/**
 * The report's sections (lab/report-store.ts SECTIONS), each as one function: run it,
 * write its rows to its artifacts (bench/lab-<section>.{json,md}, or `-quick` beside them
 * for a smoke test), and hand back its targets, what it could not measure, the fields its
 * targets are about and its headline figures. lab/main.ts runs them, alone or all in turn,
 * and merges each into the report with its own provenance and settings.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { collectivesSection } from './collectives-section';
import { FULL_CLASS_PLAN, QUICK_CLASS_PLAN, narrowPlan, runClassLab } from './class-lab';
import { classMarkdown } from './class-markdown';
import { faultRows, FREEZE_MS, HICCUP_MS, type FaultRow } from './fault-rows';
import { COMPRESSED_VARIANTS, FULL_LOCAL_STEPS_PLAN, QUICK_LOCAL_STEPS_PLAN, localStepsLab } from './local-steps-rows';
import { directRatios } from './local-steps-check';
import { compare, summarize as summarizeLocalSteps, type LocalStepsNetwork, type LocalStepsReport } from './local-steps-report';
import { scalingSplits } from './local-steps-crossover';
import { localStepsMarkdown } from './local-steps-markdown';
import type { AccuracyPool } from './local-steps-pool';
import { withLab } from './netlab';
import { MODEL_NAMES, internet, schoolUplink, schoolWifiIsolated, wifi, wiredLab, type ModelProfile, type ProfileName } from './network-models';
import type { LabCapabilities } from './preconditions';
import { progress } from './progress';
import type { ClassReport, ClassSection, Target } from './report-types';
import type { Figures, SectionId } from './report-store';
import { recorder, type PlanKind } from './run-settings';
import { schoolLab, schoolMarkdown } from './school-wifi';
import { SECAGG_SIZES, secaggLab } from './secagg-rows';
import { secaggMarkdown } from './secagg-report';
import { LAB_WORKLOADS } from '../shared/tasks/lab-workloads';

const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const BENCH_DIR = path.join(PROJECT_ROOT, 'bench');

/**
 * The rates the rows run at. Two cores carry about 20 MB/s of WebRTC between all the
 * emulated devices together (DTLS, SCTP and the copies cost CPU per byte), so a model
 * faster than that measures the machine, not the network. So:
 *  - wifi: 100 Mbit/s of air (the default). The ring's frames cross it twice, so the
 *    peers receive at most 50 Mbit/s between them;
 *  - wired-lab: 20 Mbit/s ports, the teacher's laptop (the hub) on one more port like
 *    the others. 8 busy ports are 20 MB/s;
 *  - internet: home lines of 20 down and 10 up, a server behind 200 Mbit/s;
 *  - school-uplink: the internet model with 2 Mbit/s up per device (schoolUplink: the same
 *    20 down and 200 at the server), where a step's 408 KB gradient costs seconds. Only
 *    the local-steps section uses it: the all-reduce rows' 16 MB buffers would take minutes each.
 * The ratios between algorithms, which decide the choice, do not depend on the scale.
 */
export const LAB_PROFILES: Record<ProfileName, ModelProfile> = {
  wifi: wifi(),
  'wired-lab': wiredLab({ portMbit: 20, serverMbit: 20 }),
  internet: internet({ downMbit: 20, upMbit: 10 }),
  'school-uplink': schoolUplink(),
  'school-wifi-isolated': schoolWifiIsolated(),
};

export interface SectionContext {
  capabilities: LabCapabilities;
  quick: boolean;
  /** The lab's in-process accuracy runs, at idle priority beside the rows. */
  pool: AccuracyPool;
  /** `--models` (collectives), `--only` (class), `--ns` (class, faults, secagg): a partial run when set. */
  models: ModelProfile[] | null;
  only: ClassSection[] | null;
  ns: number[] | null;
}

export interface SectionRun {
  targets: Target[];
  errors: string[];
  /** The start-config fields the section's targets are about (lab/run-settings.ts). */
  declared: string[];
  figures: Figures;
  /** A run narrowed by --models, --only or --ns: its rows went to a partial artifact, not the report. */
  plan: PlanKind;
}

/** bench/<base>.json without the targets (they live in bench/lab.json alone) and bench/<base>.md, which shows them beside the rows. */
export function writeArtifact(base: string, json: object, md: string): void {
  mkdirSync(BENCH_DIR, { recursive: true });
  const { targets: _targets, ...rows } = json as { targets?: unknown };
  writeFileSync(path.join(BENCH_DIR, `${base}.json`), `${JSON.stringify(rows, null, 2)}\n`);
  writeFileSync(path.join(BENCH_DIR, `${base}.md`), md);
}

/** A section artifact's rows, or null when there is none yet. */
export function readArtifact<T>(base: string): T | null {
  try {
    return JSON.parse(readFileSync(path.join(BENCH_DIR, `${base}.json`), 'utf8')) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

const planOf = (ctx: SectionContext, narrowed: boolean): PlanKind => (ctx.quick ? 'quick' : narrowed ? 'partial' : 'full');
const suffix = (plan: PlanKind): string => (plan === 'full' ? '' : `-${plan}`);

async function collectives(ctx: SectionContext): Promise<SectionRun> {
  const models = ctx.models ?? MODEL_NAMES.map((n) => LAB_PROFILES[n]);
  const plan = planOf(ctx, ctx.models !== null && ctx.models.length < MODEL_NAMES.length);
  const r = await collectivesSection(models, ctx.quick, ctx.capabilities, (report, md, svgs) => {
    writeArtifact(`lab-collectives${suffix(plan)}`, report, md);
    for (const [model, svg] of Object.entries(svgs)) writeFileSync(path.join(BENCH_DIR, `lab${suffix(plan)}-${model}.svg`), svg);
  });
  const find = (model: string, n: number, mb: number, wire: string, algorithm: string) => r.allreduce.find((x) => x.model === model && x.n === n && x.bytes === mb * 2 ** 20 && x.wire === wire && x.algorithm === algorithm)?.ms ?? null;
  const judged = r.auto.filter((a) => Number.isFinite(a.pickedOverFastest));
  return {
    targets: r.targets,
    errors: [],
    declared: [],
    plan,
    figures: {
      'wifi-n8-16mb-hub-ms': find('wifi', 8, 16, 'fp32', 'hub'),
      'wifi-n8-16mb-ring-ms': find('wifi', 8, 16, 'fp32', 'ring'),
      'wired-n4-16mb-ring-ms': find('wired-lab', 4, 16, 'fp32', 'ring'),
      'wired-n4-16mb-hub-ms': find('wired-lab', 4, 16, 'fp32', 'hub'),
      'auto-within-10pct': judged.filter((a) => a.pickedOverFastest <= 1.1).length,
      'auto-judged': judged.length,
      'rows-measured': r.allreduce.length,
      'rows-skipped': r.skipped.length,
    },
  };
}

async function cls(ctx: SectionContext): Promise<SectionRun> {
  const narrowed = ctx.only !== null || ctx.ns !== null;
  const plan = planOf(ctx, narrowed);
  const base = `lab-class${suffix(plan)}`;
  const write = (c: ClassReport) => writeArtifact(base, c, `${classMarkdown(c).join('\n')}\n`);
  const full = narrowPlan(ctx.quick ? QUICK_CLASS_PLAN : FULL_CLASS_PLAN, ctx.only, ctx.ns);
  const c = await runClassLab(full, LAB_PROFILES, ctx.capabilities, ctx.pool, write);
  write(c);
  const scaling = (model: string, net: string, n: number) => c.scaling?.table.find((e) => e.model === model && e.net === net && e.n === n) ?? null;
  const one = (net: string) => c.scaling?.table.find((e) => e.net === net && e.n === 1) ?? null;
  /** N devices' examples/s over one device's. */
  const speedup = (model: string, net: string, n: number) => {
    const e = scaling(model, net, n);
    const o = one(net);
    return e && o ? e.examplesPerSec / o.examplesPerSec : null;
  };
  const composed = (n: number, scaled: boolean) => c.timeToAccuracy?.composed?.find((r) => r.n === n && r.scaleLearningRate === scaled)?.composedMs ?? null;
  const seconds = (ms: number | null) => (ms === null ? null : ms / 1000);
  const dense = LAB_WORKLOADS.dense.model;
  const conv = LAB_WORKLOADS.conv.model;
  return {
    targets: c.targets,
    errors: c.errors.map((e) => `${e.section}: ${e.code}: ${e.message}`),
    // The conv workload is its task's second model: the workload, not a setting.
    declared: ['model', 'scaleLearningRate', 'balanceShares'],
    plan,
    figures: {
      'one-laptop-dense-examples-per-s': one(dense)?.examplesPerSec ?? null,
      'one-laptop-conv-examples-per-s': one(conv)?.examplesPerSec ?? null,
      'wired-n8-dense-speedup': speedup('wired-lab', dense, 8),
      'wired-n8-conv-speedup': speedup('wired-lab', conv, 8),
      'wifi-n8-dense-speedup': speedup('wifi', dense, 8),
      'wifi-n8-conv-speedup': speedup('wifi', conv, 8),
      'tta-n1-s': seconds(composed(1, false)),
      'tta-n8-scaled-s': seconds(composed(8, true)),
      'tta-direct-s': seconds(c.timeToAccuracy?.check?.directMs ?? null),
      'tta-check-ratio': c.timeToAccuracy?.check?.ratio ?? null,
    },
  };
}

async function localSteps(ctx: SectionContext): Promise<SectionRun> {
  const plan = planOf(ctx, false);
  const profiles: Record<LocalStepsNetwork, ModelProfile> = { 'school-uplink': LAB_PROFILES['school-uplink'], wifi: LAB_PROFILES.wifi };
  const wired = LAB_PROFILES['wired-lab'];
  const otherSplits = scalingSplits(readArtifact<ClassReport>('lab-class'), wired.name === 'wired-lab' ? wired.params.portMbit : null);
  const base = `lab-local-steps${suffix(plan)}`;
  const write = (r: LocalStepsReport) => writeArtifact(base, r, localStepsMarkdown(r, { otherSplits }));
  const r = await localStepsLab(profiles, ctx.quick ? QUICK_LOCAL_STEPS_PLAN : FULL_LOCAL_STEPS_PLAN, ctx.capabilities, write, ctx.pool);
  write(r);
  const s = summarizeLocalSteps(r);
  const row = (n: number, variant: string) => s.rows.find((x) => x.network === 'school-uplink' && x.n === n && x.variant === variant) ?? null;
  const over = (a: number | null | undefined, b: number | null | undefined) => (a != null && b != null && b > 0 ? a / b : null);
  const compressed = COMPRESSED_VARIANTS[0]!.id;
  const figures: Figures = {};
  for (const n of [4, 8]) {
    figures[`h10-speedup-n${n}`] = compare(s, 'school-uplink', n).ratio;
    figures[`every-step-over-h10-bytes-n${n}`] = over(row(n, 'every-step')?.bytesPerExample, row(n, 'H10')?.bytesPerExample);
    figures[`h10-over-compressed-bytes-n${n}`] = over(row(n, 'H10')?.bytesPerExample, row(n, compressed)?.bytesPerExample);
    figures[`h10-minutes-n${n}`] = row(n, 'H10')?.timeMs == null ? null : row(n, 'H10')!.timeMs! / 60_000;
    figures[`every-step-minutes-n${n}`] = row(n, 'every-step')?.timeMs == null ? null : row(n, 'every-step')!.timeMs! / 60_000;
  }
  // The direct run against the composition: each of its checkpoints' times over their composed ones.
  const ratios = directRatios(r, s).sort((a, b) => a - b);
  figures['direct-over-composed-min'] = ratios[0] ?? null;
  figures['direct-over-composed-max'] = ratios.at(-1) ?? null;
  return {
    targets: r.targets,
    errors: r.errors.map((e) => `${e.what}: ${e.message}`),
    // Ways of summing are the experiment; own data turns secure aggregation on, and local steps the fp16 wire, by default.
    declared: ['sync', 'localSteps', 'powerSgdRank', 'sumWordBits', 'data', 'secureAggregation', 'wire'],
    plan,
    figures,
  };
}

async function school(ctx: SectionContext): Promise<SectionRun> {
  const plan = planOf(ctx, false);
  const base = `lab-school${suffix(plan)}`;
  const r = await schoolLab(ctx.capabilities, (x) => writeArtifact(base, x, schoolMarkdown(x)));
  const row = (network: string) => r.rows.find((x) => x.network === network) ?? null;
  const pct = (a: number | null | undefined) => (a == null ? null : a * 100);
  return {
    targets: r.targets,
    errors: r.errors.map((e) => `${e.network}: ${e.code}: ${e.message}`),
    declared: [],
    plan,
    figures: {
      'wifi-accuracy-pct': pct(row('wifi')?.accuracy),
      'isolated-accuracy-pct': pct(row('school-wifi-isolated')?.accuracy),
      'mixed-accuracy-pct': pct(row('school-wifi-mixed')?.accuracy),
      'wifi-step-ms': row('wifi')?.stepMs ?? null,
      'isolated-step-ms': row('school-wifi-isolated')?.stepMs ?? null,
    },
  };
}

async function secagg(ctx: SectionContext): Promise<SectionRun> {
  const plan = planOf(ctx, ctx.ns !== null);
  const base = `lab-secagg${suffix(plan)}`;
  const r = await secaggLab(LAB_PROFILES.wifi, ctx.ns ?? SECAGG_SIZES, ctx.capabilities, (x) => writeArtifact(base, x, secaggMarkdown(x)));
  // The one-epoch runs split the batch equally and may need another seed (lab/secagg-rows.ts cleanSeed): both named in the goal.
  return { targets: r.targets, errors: r.errors.map((e) => `${e.what}: ${e.message}`), declared: ['secureAggregation', 'wire', 'dataset', 'balanceShares', 'seed'], plan, figures: {} };
}

/** The class the fault rows run on: the largest whose laptops' CPU caps this 2-core machine holds beside the server. */
const FAULT_CLASS = 8;

async function faults(ctx: SectionContext): Promise<SectionRun> {
  const n = ctx.ns?.[0] ?? FAULT_CLASS;
  const plan = planOf(ctx, n !== FAULT_CLASS);
  const startedAt = Date.now();
  const net = LAB_WORKLOADS.dense.model;
  const rows = await withLab(LAB_PROFILES.wifi, n, (lab) => faultRows(lab, net), ctx.capabilities);
  const [hiccup, freeze] = rows;
  const targets: Target[] = [
    {
      id: `class${n}-hiccup`,
      goal: `0 dropped for a ${HICCUP_MS / 1000} s link-down; the pause ≤ 3 s`,
      value: hiccup ? hiccup.pauseMs / 1000 : null,
      met: !!hiccup && hiccup.dropped.length === 0 && hiccup.pauseMs <= 3_000,
      detail: hiccup ? `dropped: ${hiccup.dropped.join(', ') || 'nobody'}; the class stood still ${hiccup.pauseMs} ms` : 'not measured',
    },
    {
      id: `class${n}-freeze`,
      goal: 'the frozen dropped, back in lock-step ≤ 5 s after SIGCONT; nobody else dropped',
      value: freeze?.backInLockStepMs == null ? null : freeze.backInLockStepMs / 1000,
      met: !!freeze && freeze.backInLockStepMs !== null && freeze.backInLockStepMs <= 5_000 && freeze.dropped.every((d) => freeze.devices.includes(d)),
      detail: freeze ? `dropped: ${freeze.dropped.join(', ') || 'nobody'}; back in lock-step ${freeze.backInLockStepMs ?? '–'} ms after SIGCONT` : 'not measured',
    },
  ];
  const out = { generatedAt: new Date().toISOString(), machine: { cores: os.availableParallelism(), kernel: os.release(), node: process.versions.node }, netem: ctx.capabilities.netem, minutes: (Date.now() - startedAt) / 60_000, model: 'wifi', n, net, freezeMs: FREEZE_MS, rows, targets };
  writeArtifact(`lab-faults${suffix(plan)}`, out, faultsMarkdown(out.generatedAt, n, rows, targets));
  return { targets, errors: [], declared: [], plan, figures: {} };
}

function faultsMarkdown(at: string, n: number, rows: FaultRow[], targets: Target[]): string {
  return [
    `# Faults in the lab: ${n} laptops on Wi-Fi`,
    '',
    `Measured ${at} by \`npm run lab -- --section faults\` (commit and versions: bench/lab.md): ${n} Node workers, each a 0.2-core laptop in its own network namespace on the Wi-Fi model, training the ${LAB_WORKLOADS.dense.name} on the product's defaults. A link-down takes the device's port on the access point's bridge down (\`ip link set down\`) and up again; a freeze is SIGSTOP on the worker, then SIGCONT; a cut leaves the port down.`,
    '',
    '| target | goal | value | met |',
    '|---|---|---|---|',
    ...targets.map((t) => `| ${t.id} | ${t.goal} | ${t.value === null ? '–' : t.value.toFixed(2)} | ${t.met ? 'yes' : 'no'} |`),
    '',
    '| fault | devices | dropped | longest pause (ms) | back in lock-step after (ms) | hashes agree |',
    '|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.fault} | ${r.devices.join(', ')} | ${r.dropped.join(', ') || 'nobody'} | ${r.pauseMs} | ${r.backInLockStepMs ?? '–'} | ${r.hashesAgree ? 'yes' : 'no'} |`),
    '',
  ].join('\n');
}

/**
 * The class of thirty (test/bench/class.ts) as a child process on loopback: no namespaces,
 * no caps; thirty processes share the machine's cores, so it measures CPU and coordination.
 * Its targets come back through a file; bench/class.{json,md} are its rows.
 */
async function class30(ctx: SectionContext): Promise<SectionRun> {
  const plan = planOf(ctx, false);
  const targetsFile = path.join(os.tmpdir(), `webring-class30-targets-${process.pid}.json`);
  const env = { ...process.env, BENCH_CLASS_TARGETS: targetsFile, ...(ctx.quick ? { BENCH_CLASS: '12', BENCH_CLASS_FIRST: '4', BENCH_CHURN_MS: '20000', BENCH_CLASS_OUT: 'class-quick' } : {}) };
  // The bench's server starts in its own process with the defaults (liveness included) and trains the default recipe.
  recorder().noteServer(env);
  recorder().noteConfig({});
  progress(`class30: ${ctx.quick ? 'a class of 12 (quick)' : 'a class of thirty'} on loopback (test/bench/class.ts)`);
  try {
    const child = promisify(execFile)(process.execPath, ['--import', 'tsx', 'test/bench/class.ts'], { cwd: PROJECT_ROOT, env, maxBuffer: 64 * 2 ** 20 });
    const { stdout } = await child;
    for (const line of stdout.split('\n').filter((l) => l.startsWith('target '))) progress(`class30: ${line}`);
    const targets = JSON.parse(readFileSync(targetsFile, 'utf8')) as Target[];
    return { targets, errors: [], declared: [], plan, figures: {} };
  } finally {
    rmSync(targetsFile, { force: true });
  }
}

export const SECTION_RUNNERS: Record<SectionId, (ctx: SectionContext) => Promise<SectionRun>> = {
  collectives,
  class: cls,
  'local-steps': localSteps,
  school,
  secagg,
  faults,
  class30,
};

/** Sections that build no namespaces and cap nothing: they run without root. */
export const LOOPBACK_SECTIONS: readonly SectionId[] = ['class30'];
