/**
 * `npm run lab`: the classroom lab. Checks the machine, removes leftovers of a crashed run,
 * then for each network model (wifi, wired-lab, internet): builds it, validates it with TCP
 * flows, and runs the all-reduce rows (ring, halving-doubling and the hub, fp32 and fp16,
 * 1, 4 and 16 MB, N = 2, 4 and 8, with what 'auto' picks) and a training row (N = 4
 * laptops against one). Writes bench/lab.json, bench/lab.md and bench/lab-<model>.svg.
 *
 *   npm run lab -- [--quick] [--models wifi,wired-lab,internet] [--no-training]   (--quick writes bench/lab-quick.*)
 *   npm run lab -- --mixed      three laptops and a phone, with and without balanceShares (lab/mixed-class.ts)
 *   npm run lab -- --school     8 laptops on wifi, on school-wifi-isolated and half isolated (lab/school-wifi.ts)
 *   npm run lab -- --faults     a class on Wi-Fi through a 2 s link-down, a 15 s freeze and a cut (lab/fault-rows.ts), into bench/lab-faults.{json,md}
 *   npm run lab -- --secagg [--ns 8,16]   what secure aggregation costs on Wi-Fi: the dense model's step and the bytes a device
 *                               sends, secure against fp32 and fp16, at N = 8 and 16, and one epoch's accuracy secure
 *                               against fp32 (lab/secagg-rows.ts), into bench/lab-secagg.{json,md}
 *   npm run lab -- --local-steps   local steps (H = 10, 20; the product before, H20-adam) against every-step sync: time to 97 % test accuracy and
 *                               the bytes sent, at N = 4 and 8 laptops on school-uplink and 16 chromebooks on wifi,
 *                               composed from seconds a turn measured on the lab and turns to 97 % measured in-process,
 *                               one direct run to check it, and the non-IID comparison (lab/local-steps-rows.ts), into
 *                               bench/lab-local-steps.{json,md} and two targets merged into bench/lab.json
 *   npm run lab -- --class      the class in one run (lab/class-lab.ts): scaling with N = 1, 2, 4, 8 laptops,
 *                               time to 97 % test accuracy, the mixed class, joins; into bench/lab.json and
 *                               bench/lab.md as `class`, keeping their other sections
 *   npm run lab -- --class --quick (or --class-quick)   a smoke test of it, into bench/lab-class-quick.{json,md}
 *   npm run lab -- --class --only mixed,timeToAccuracy --ns 1,8   those sections and sizes again, folded into the
 *                               class section bench/lab.json has (class-report.ts foldClass)
 *
 * A full run keeps the `class` section (and its targets) of the bench/lab.json it replaces.
 *
 * Exits 0 when everything could be measured, whether or not the targets are met;
 * otherwise non-zero, with the coded error (ERR_LAB_NEEDS_ROOT, ERR_LAB_NO_NETNS,
 * ERR_LAB_MODEL_INVALID, …) on stderr.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mixedClassRows } from './mixed-class';
import { schoolLab, schoolMarkdown } from './school-wifi';
import { faultRows, FREEZE_MS, HICCUP_MS, type FaultRow } from './fault-rows';
import { SECAGG_SIZES, secaggLab } from './secagg-rows';
import { secaggMarkdown } from './secagg-report';
import { FULL_LOCAL_STEPS_PLAN, QUICK_LOCAL_STEPS_PLAN, localStepsLab } from './local-steps-rows';
import type { LocalStepsNetwork, LocalStepsReport } from './local-steps-report';
import { mergeTargets } from './local-steps-targets';
import { scalingSplits } from './local-steps-crossover';
import { localStepsMarkdown } from './local-steps-markdown';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { LabError } from './lab-error';
import { checkPreconditions, type LabCapabilities } from './preconditions';
import { cleanupLab, installTeardownHandlers, withLab } from './netlab';
import { MODEL_NAMES, internet, schoolUplink, schoolWifiIsolated, wifi, wiredLab, type ModelProfile, type ProfileName } from './network-models';
import { assertModelValid, validateModel, DEFAULT_FLOW_SECONDS, type ModelValidation } from './validate-models';
import { allReduceRows, type AllReducePlan, type AllReduceRow, type AutoRow } from './allreduce-rows';
import { markdown, modelSvg, targets, type TrainingRow } from './report';
import { TRAINING_ROW_OPTIONS, trainingRow, type TrainingNet } from './training-rows';
import { LAB_WORKLOADS, LAB_WORKLOAD_LIST } from '../shared/tasks/lab-workloads';
import { progress } from './progress';
import { RESERVED_CORES } from './cpu-budget';
import { FULL_CLASS_PLAN, QUICK_CLASS_PLAN, narrowPlan, runClassLab } from './class-lab';
import { emptyLabReport, foldClass, keepClass, mergeClass, profilesOf } from './class-report';
import { CLASS_SECTIONS, LOCAL_STEPS_TARGET_IDS, type ClassReport, type ClassSection, type LabReport } from './report-types';

const USAGE = 'usage: npm run lab -- [--quick] [--models wifi,wired-lab,internet] [--no-training] | --mixed | --school | --faults [--ns 8] | --secagg [--ns 8,16] | --local-steps [--quick] | --class [--quick] [--only joins,scaling,mixed,timeToAccuracy] [--ns 1,8] | --class-quick';
const QUICK_FLOW_SECONDS = 1;
const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;
const MB = 2 ** 20;
const BENCH_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'bench');
export const LAB_REPORT = path.join(BENCH_DIR, 'lab.json');
/** Where `--quick` writes (bench/lab-quick.json, .md and SVGs): a smoke test never replaces the measurement. */
const QUICK_REPORT_BASE = 'lab-quick';
/** Where `--class --quick` writes: a smoke test never replaces the measurement. */
const CLASS_QUICK_REPORT = path.join(BENCH_DIR, 'lab-class-quick.json');
/** Workers of the model validation: enough for "all flows at once" to mean something. */
const VALIDATION_WORKERS = 4;

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
 *    `--local-steps` uses it: the all-reduce rows' 16 MB buffers would take minutes each.
 * The ratios between algorithms, which decide the choice, do not depend on the scale.
 */
export const LAB_PROFILES: Record<ProfileName, ModelProfile> = {
  wifi: wifi(),
  'wired-lab': wiredLab({ portMbit: 20, serverMbit: 20 }),
  internet: internet({ downMbit: 20, upMbit: 10 }),
  'school-uplink': schoolUplink(),
  'school-wifi-isolated': schoolWifiIsolated(),
};

/** The full run: every model, N = 2, 4, 8, 1, 4 and 16 MB, both wire formats. */
const FULL = { ns: [2, 4, 8], sizes: [1 * MB, 4 * MB, 16 * MB], wires: ['fp32', 'fp16'] as const, reps: (bytes: number) => (bytes <= 1 * MB ? 2 : 1) };
/** --quick: N = 4, 1 and 4 MB, fp32, no training rows: under 5 minutes. */
const QUICK = { ns: [4], sizes: [1 * MB, 4 * MB], wires: ['fp32'] as const, reps: () => 1 };
/** The links are probed for 'auto' with 1 MB buffers (the dense model's gradient is 408 KB), and the α-β models predict the rest. */
const PROBE_BYTES = 1 * MB;
/** The training rows: a class of this many `laptop` devices, against one. */
const TRAINING_CLASS = 4;
const TRAINING_NETS: TrainingNet[] = LAB_WORKLOAD_LIST.map((w) => w.model);
/** No peer gets more than this, however few they are: a device, not the machine. */
const MAX_PEER_CORES = 0.5;

interface Args {
  quick: boolean;
  /** Only the mixed class's rows (lab/mixed-class.ts), into bench/lab-mixed.json. */
  mixed: boolean;
  /** Only the fault rows (lab/fault-rows.ts), into bench/lab-faults.json and .md. */
  faults: boolean;
  /** Only what secure aggregation costs (lab/secagg-rows.ts), into bench/lab-secagg.json and .md. */
  secagg: boolean;
  /** Only local steps against every-step sync (lab/local-steps-rows.ts), into bench/lab-local-steps.json and .md, its targets into bench/lab.json. */
  localSteps: boolean;
  /** Only the class of 8 on a school's Wi-Fi (lab/school-wifi.ts), into bench/lab-school.json and .md. */
  school: boolean;
  /** The class's section (lab/class-lab.ts), merged into bench/lab.json. */
  class: boolean;
  /** `--only`: the class's sections to run again, folded into the report's (class-report.ts foldClass). */
  only: ClassSection[] | null;
  /** `--ns`: the class sizes to run. */
  ns: number[] | null;
  models: ModelProfile[];
  training: boolean;
}

function parse(): Args {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' },
      mixed: { type: 'boolean' },
      faults: { type: 'boolean' },
      secagg: { type: 'boolean' },
      'local-steps': { type: 'boolean' },
      school: { type: 'boolean' },
      class: { type: 'boolean' },
      'class-quick': { type: 'boolean' },
      only: { type: 'string' },
      ns: { type: 'string' },
      models: { type: 'string' },
      'no-training': { type: 'boolean' },
    },
    strict: true,
  });
  const cls = (values.class ?? false) || (values['class-quick'] ?? false);
  if (cls && (values.mixed || values.models !== undefined || values['no-training'])) throw new LabError('ERR_LAB_USAGE', '--class runs its own rows: it takes only --quick, --only and --ns');
  if (!cls && values.only !== undefined) throw new LabError('ERR_LAB_USAGE', '--only goes with --class');
  if (values['local-steps'] && (cls || values.mixed || values.faults || values.secagg || values.models !== undefined || values.ns !== undefined || values['no-training'])) {
    throw new LabError('ERR_LAB_USAGE', '--local-steps runs its own plan: it takes only --quick');
  }
  if (!cls && !values.faults && !values.secagg && values.ns !== undefined) throw new LabError('ERR_LAB_USAGE', '--ns goes with --class, --faults or --secagg');
  const only = values.only === undefined ? null : values.only.split(',').filter(Boolean);
  for (const s of only ?? []) {
    if (!(CLASS_SECTIONS as readonly string[]).includes(s)) throw new LabError('ERR_LAB_USAGE', `--only ${s}: one of ${CLASS_SECTIONS.join(', ')}`);
  }
  const ns = values.ns === undefined ? null : values.ns.split(',').map(Number);
  if (ns && ns.some((n) => !Number.isInteger(n) || n < 1)) throw new LabError('ERR_LAB_USAGE', `--ns ${values.ns}: class sizes, like 1,8`);
  const names = (values.models ?? MODEL_NAMES.join(',')).split(',').filter(Boolean);
  for (const name of names) {
    if (!(MODEL_NAMES as readonly string[]).includes(name)) throw new LabError('ERR_LAB_USAGE', `unknown network model ${JSON.stringify(name)}: one of ${MODEL_NAMES.join(', ')}`);
  }
  const quick = (values.quick ?? false) || (values['class-quick'] ?? false);
  return {
    quick,
    mixed: values.mixed ?? false,
    faults: values.faults ?? false,
    secagg: values.secagg ?? false,
    localSteps: values['local-steps'] ?? false,
    school: values.school ?? false,
    class: cls,
    only: only as ClassSection[] | null,
    ns,
    models: names.map((n) => LAB_PROFILES[n as ProfileName]),
    training: !quick && !(values['no-training'] ?? false),
  };
}

function table(rows: ModelValidation[]): string {
  const lines = ['model      check                             measured   expected  ok'];
  for (const v of rows) {
    for (const key of Object.keys(v.expected)) {
      const ok = Math.abs(v.measured[key]! - v.expected[key]!) <= 0.15 * v.expected[key]!;
      lines.push(`${v.name.padEnd(10)} ${key.padEnd(33)} ${String(v.measured[key]).padStart(8)} ${String(v.expected[key]).padStart(10)}  ${ok ? 'yes' : 'NO'}`);
    }
  }
  return lines.join('\n');
}

/** The report a run found, or null when there is none; a file that does not parse stops the run (it would be lost). */
function readReport(file: string): LabReport | null {
  if (!existsSync(file)) return null;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as LabReport;
  } catch (err) {
    throw new LabError('ERR_LAB_USAGE', `${file} is not JSON (${(err as Error).message}); move it away to start a new report`);
  }
}

function writeReport(report: LabReport, jsonFile: string): void {
  mkdirSync(path.dirname(jsonFile), { recursive: true });
  writeFileSync(jsonFile, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(jsonFile.replace(/\.json$/, '.md'), markdown(report, profilesOf(report)));
}

/** `--class`: the class's rows, merged into the lab's report after every section. */
async function classMain(args: Args, capabilities: ReturnType<typeof checkPreconditions>): Promise<void> {
  const { quick, only, ns } = args;
  const out = quick ? CLASS_QUICK_REPORT : LAB_REPORT;
  const base = readReport(LAB_REPORT) ?? emptyLabReport({ cores: os.availableParallelism(), kernel: os.release(), node: process.versions.node }, capabilities.netem, new Date().toISOString());
  // A partial run (--only, --ns) keeps what the report already has of the other sections and sizes.
  const fold = (c: ClassReport) => (only || ns ? foldClass(base.class ?? null, c, only ?? CLASS_SECTIONS) : c);
  const plan = narrowPlan(quick ? QUICK_CLASS_PLAN : FULL_CLASS_PLAN, only, ns);
  const fresh = await runClassLab(plan, LAB_PROFILES, capabilities, (partial) => writeReport(mergeClass(base, fold(partial)), out));
  const cls = fold(fresh);
  writeReport(mergeClass(base, cls), out);
  for (const t of cls.targets) console.log(`target ${t.id}: ${t.value === null ? 'not measured' : t.value.toFixed(2)} (${t.goal}) ${t.met ? 'met' : 'NOT met'}: ${t.detail}`);
  for (const e of cls.errors) console.error(`webring lab: ${e.section}: ${e.code}: ${e.message.split('\n')[0]}`);
  progress(`wrote ${path.relative(process.cwd(), out)} and its .md in ${cls.minutes.toFixed(1)} minutes`);
  if (cls.errors.length > 0) process.exit(EXIT_FAILURE);
}

async function main(): Promise<void> {
  let args: Args;
  try {
    args = parse();
  } catch (err) {
    console.error(`webring lab: ${err instanceof LabError ? `${err.code}: ` : ''}${(err as Error).message}\n${USAGE}`);
    process.exit(EXIT_USAGE);
  }
  const startedAt = Date.now();
  const capabilities = checkPreconditions();
  installTeardownHandlers();
  const leftovers = cleanupLab();
  if (leftovers.length > 0) progress(`removed leftovers of a crashed run: ${leftovers.join(', ')}`);
  progress(`netem ${capabilities.netem ? 'present: profiles add their delays' : 'missing in this kernel: rates only, no added delay'}`);
  if (args.class) {
    await classMain(args, capabilities);
    return;
  }
  if (args.faults) {
    await faultsMain(args.ns?.[0] ?? FAULT_CLASS, capabilities, startedAt);
    return;
  }
  if (args.secagg) {
    await secaggMain(args.ns ?? SECAGG_SIZES, capabilities);
    return;
  }
  if (args.localSteps) {
    await localStepsMain(capabilities, args.quick);
    return;
  }
  if (args.school) {
    const report = await schoolLab(capabilities, (r) => writeBench('lab-school', r, schoolMarkdown(r)));
    printTargets(report.targets);
    progress(`wrote bench/lab-school.json and .md in ${report.minutes.toFixed(1)} minutes`);
    if (report.errors.length > 0) process.exit(EXIT_FAILURE);
    return;
  }
  if (args.mixed) {
    const mixed = await mixedClassRows(LAB_PROFILES['wired-lab'], capabilities);
    mkdirSync(BENCH_DIR, { recursive: true });
    const out = { generatedAt: new Date().toISOString(), machine: { cores: os.availableParallelism(), kernel: os.release(), node: process.versions.node }, minutes: (Date.now() - startedAt) / 60_000, ...mixed };
    writeFileSync(path.join(BENCH_DIR, 'lab-mixed.json'), `${JSON.stringify(out, null, 2)}\n`);
    const t = mixed.target;
    console.log(`target ${t.id}: ${t.value.toFixed(2)} (${t.goal}) ${t.met ? 'met' : 'NOT met'}: ${t.detail}`);
    progress(`wrote bench/lab-mixed.json in ${out.minutes.toFixed(1)} minutes`);
    return;
  }
  const shape = args.quick ? QUICK : FULL;
  const cores = os.availableParallelism();
  const validations: ModelValidation[] = [];
  const rows: AllReduceRow[] = [];
  const autos: AutoRow[] = [];
  const training: TrainingRow[] = [];
  for (const profile of args.models) {
    const validate = () => withLab(profile, VALIDATION_WORKERS, (lab) => validateModel(lab, args.quick ? QUICK_FLOW_SECONDS : DEFAULT_FLOW_SECONDS), capabilities);
    let validation = await validate();
    if (!validation.ok) {
      // One TCP flow that meets a retransmission timeout in a few seconds' count reads 20% low
      // (seen once in "every worker at once" on wired-lab). Measure again once; the report keeps both.
      progress(`${profile.name}: the model missed its profile (${JSON.stringify(validation.measured)}); measuring it once more`);
      const first = validation;
      validation = { ...(await validate()), firstAttempt: first.measured };
    }
    validations.push(validation);
    // A model that does not do what its profile says would make every row after it wrong.
    assertModelValid(validation);
    for (const n of shape.ns) {
      const plan: AllReducePlan = {
        sizes: shape.sizes,
        wires: [...shape.wires],
        algorithms: ['ring', 'halving-doubling', 'hub'],
        reps: shape.reps,
        probeBytes: PROBE_BYTES,
        cpu: { cores: Math.min(MAX_PEER_CORES, (cores - RESERVED_CORES) / n) },
      };
      const result = await withLab(profile, n, (lab) => allReduceRows(lab, plan), capabilities);
      rows.push(...result.rows);
      autos.push(...result.autos);
    }
    if (args.training) {
      // N laptops on this network, with the hub on the teacher's machine, as a class would run.
      for (const net of TRAINING_NETS) {
        training.push(await withLab(profile, TRAINING_CLASS, (lab) => trainingRow(lab, net, 'laptop', { ...TRAINING_ROW_OPTIONS[net], n: TRAINING_CLASS, hub: true }), capabilities));
      }
    }
  }
  if (args.training) {
    // One device alone sends nothing, so its row does not depend on the network: measured once.
    const alone = args.models[0]!;
    for (const net of TRAINING_NETS) training.push(await withLab(alone, 1, (lab) => trainingRow(lab, net, 'laptop', { ...TRAINING_ROW_OPTIONS[net], n: 1 }), capabilities));
  }
  const fresh: LabReport = {
    generatedAt: new Date().toISOString(),
    machine: { cores, kernel: os.release(), node: process.versions.node },
    netem: capabilities.netem,
    quick: args.quick,
    minutes: (Date.now() - startedAt) / 60_000,
    targets: targets(rows, autos, args.models),
    models: validations.map(({ name, params, measured, expected, ok, delayMs, firstAttempt }) => ({ name, params, measured, expected, ok, delayMs, ...(firstAttempt ? { firstAttempt } : {}) })),
    allreduce: rows,
    auto: autos,
    training,
    gpu: { measured: false, why: 'no GPU machine was lent to the session that made this report; the figures above are CPU and network only.' },
  };
  // A smoke test never replaces the measurement: --quick writes beside it (bench/lab-quick.*).
  const base = args.quick ? QUICK_REPORT_BASE : 'lab';
  const reportPath = path.join(BENCH_DIR, `${base}.json`);
  // The class's section comes from its own run (--class), the local-steps targets from --local-steps: kept, not thrown away.
  const previous = args.quick ? null : readReport(LAB_REPORT);
  const report = args.quick ? fresh : keepLocalStepsTargets(keepClass(fresh, previous), previous);
  mkdirSync(BENCH_DIR, { recursive: true });
  writeFileSync(reportPath, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(path.join(BENCH_DIR, `${base}.md`), markdown(report, args.models));
  for (const profile of args.models) {
    const svg = modelSvg(profile.name, rows);
    if (svg) writeFileSync(path.join(BENCH_DIR, `${base}-${profile.name}.svg`), svg);
  }
  console.log(table(validations));
  for (const t of report.targets) console.log(`target ${t.id}: ${t.value === null ? 'not measured' : t.value.toFixed(2)} (${t.goal}) ${t.met ? 'met' : 'NOT met'}: ${t.detail}`);
  progress(`wrote bench/${base}.json, bench/${base}.md and the SVGs in ${report.minutes.toFixed(1)} minutes`);
}

/** The class the fault rows run on: the largest whose laptops' CPU caps this 2-core machine holds beside the server. */
const FAULT_CLASS = 8;

/** `--faults`: the fault rows on Wi-Fi, with their targets, into bench/lab-faults.{json,md}. */
async function faultsMain(n: number, capabilities: LabCapabilities, startedAt: number): Promise<void> {
  const net = LAB_WORKLOADS.dense.model;
  const rows = await withLab(LAB_PROFILES.wifi, n, (lab) => faultRows(lab, net), capabilities);
  const [hiccup, freeze] = rows;
  const targets = [
    { id: `class${n}-hiccup`, goal: `0 dropped for a ${HICCUP_MS / 1000} s link-down; the pause ≤ 3 s`, value: hiccup ? hiccup.pauseMs / 1000 : null, met: !!hiccup && hiccup.dropped.length === 0 && hiccup.pauseMs <= 3_000 },
    { id: `class${n}-freeze`, goal: `the frozen dropped, back in lock-step ≤ 5 s after SIGCONT; nobody else dropped`, value: freeze?.backInLockStepMs == null ? null : freeze.backInLockStepMs / 1000, met: !!freeze && freeze.backInLockStepMs !== null && freeze.backInLockStepMs <= 5_000 && freeze.dropped.every((d) => freeze.devices.includes(d)) },
  ];
  const out = { generatedAt: new Date().toISOString(), machine: { cores: os.availableParallelism(), kernel: os.release(), node: process.versions.node }, netem: capabilities.netem, minutes: (Date.now() - startedAt) / 60_000, model: 'wifi', n, net, freezeMs: FREEZE_MS, rows, targets };
  writeBench('lab-faults', out, faultsMarkdown(out.generatedAt, n, rows, targets));
  printTargets(targets);
  progress(`wrote bench/lab-faults.json and .md in ${out.minutes.toFixed(1)} minutes`);
}

/** bench/<base>.json and bench/<base>.md. */
function writeBench(base: string, json: unknown, md: string): void {
  mkdirSync(BENCH_DIR, { recursive: true });
  writeFileSync(path.join(BENCH_DIR, `${base}.json`), `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(path.join(BENCH_DIR, `${base}.md`), md);
}

function printTargets(targets: Array<{ id: string; goal: string; value: number | null; met: boolean }>): void {
  for (const t of targets) console.log(`target ${t.id}: ${t.value === null ? 'not measured' : t.value.toFixed(2)} (${t.goal}) ${t.met ? 'met' : 'NOT met'}`);
}

/** A fresh full report with the local-steps targets (`--local-steps`) the previous one had. */
function keepLocalStepsTargets(fresh: LabReport, previous: LabReport | null): LabReport {
  const kept = (previous?.targets ?? []).filter((t) => (LOCAL_STEPS_TARGET_IDS as readonly string[]).includes(t.id));
  return kept.length > 0 ? { ...fresh, targets: mergeTargets(fresh.targets, kept) } : fresh;
}

/**
 * `--local-steps`: local steps against every-step sync (lab/local-steps-rows.ts), into
 * bench/lab-local-steps.{json,md} after every part, and its two targets into bench/lab.json
 * (and bench/lab.md), every other section and target there untouched.
 */
async function localStepsMain(capabilities: LabCapabilities, quick: boolean): Promise<void> {
  const profiles: Record<LocalStepsNetwork, ModelProfile> = { 'school-uplink': LAB_PROFILES['school-uplink'], wifi: LAB_PROFILES.wifi };
  const base = readReport(LAB_REPORT);
  const wired = LAB_PROFILES['wired-lab'];
  const otherSplits = scalingSplits(base, wired.name === 'wired-lab' ? wired.params.portMbit : null);
  // A smoke test never replaces the measurement, nor touches bench/lab.json.
  const out = quick ? 'lab-local-steps-quick' : 'lab-local-steps';
  const write = (r: LocalStepsReport) => {
    writeBench(out, r, localStepsMarkdown(r, { otherSplits }));
    if (quick) return;
    const lab = readReport(LAB_REPORT) ?? emptyLabReport({ cores: os.availableParallelism(), kernel: os.release(), node: process.versions.node }, capabilities.netem, new Date().toISOString());
    writeReport({ ...lab, targets: mergeTargets(lab.targets, r.targets) }, LAB_REPORT);
  };
  const report = await localStepsLab(profiles, quick ? QUICK_LOCAL_STEPS_PLAN : FULL_LOCAL_STEPS_PLAN, capabilities, write);
  printTargets(report.targets);
  for (const e of report.errors) console.error(`webring lab: ${e.what}: ${e.message.split('\n')[0]}`);
  progress(`wrote bench/${out}.json and .md${quick ? '' : ', and the targets into bench/lab.json,'} in ${report.minutes.toFixed(1)} minutes`);
  if (report.errors.length > 0) process.exit(EXIT_FAILURE);
}

/** `--secagg`: secure aggregation against fp32 and fp16 on Wi-Fi, into bench/lab-secagg.{json,md} after every class size. */
async function secaggMain(sizes: number[], capabilities: LabCapabilities): Promise<void> {
  const report = await secaggLab(LAB_PROFILES.wifi, sizes, capabilities, (r) => writeBench('lab-secagg', r, secaggMarkdown(r)));
  printTargets(report.targets);
  for (const e of report.errors) console.error(`webring lab: ${e.what}: ${e.message.split('\n')[0]}`);
  progress(`wrote bench/lab-secagg.json and .md in ${report.minutes.toFixed(1)} minutes`);
  if (report.errors.length > 0) process.exit(EXIT_FAILURE);
}

function faultsMarkdown(at: string, n: number, rows: FaultRow[], targets: Array<{ id: string; goal: string; value: number | null; met: boolean }>): string {
  return [
    `# Faults in the lab: ${n} laptops on Wi-Fi`,
    '',
    `Measured ${at} by \`npm run lab -- --faults\`: ${n} Node workers, each a 0.2-core laptop in its own network namespace on the Wi-Fi model, training the ${LAB_WORKLOADS.dense.name} on the product's defaults. A link-down takes the device's port on the access point's bridge down (\`ip link set down\`) and up again; a freeze is SIGSTOP on the worker, then SIGCONT; a cut leaves the port down.`,
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

main().catch((err: unknown) => {
  if (err instanceof LabError) console.error(`webring lab: ${err.code}: ${err.message}`);
  else console.error('webring lab: failed:', err);
  process.exit(EXIT_FAILURE);
});
