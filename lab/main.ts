/**
 * `npm run lab`: the classroom lab's one report. Checks the machine, removes leftovers of a
 * crashed run, queues every section's in-process accuracy runs (idle priority, beside the
 * rows), then runs each section in turn (lab/sections.ts) and merges it into bench/lab.json
 * and bench/lab.md (lab/report-store.ts) with its own date, commit, versions and settings.
 *
 *   npm run lab                                   every section, in about an hour on 2 cores
 *   npm run lab -- --section school,faults        those sections again, merged with their own dates
 *   npm run lab -- --section class --quick        a smoke test, into bench/lab-class-quick.* (never the report)
 *   npm run lab -- --section collectives --models wifi     some network models only: a partial run (bench/lab-collectives-partial.*)
 *   npm run lab -- --section class --only mixed,timeToAccuracy --ns 1,8   some of the class, some sizes: partial
 *   npm run lab -- --section faults --ns 4 | --section secagg --ns 8     other class sizes: partial
 *
 * `--collectives`, `--class`, `--local-steps`, `--school`, `--secagg`, `--faults` and
 * `--class30` are short for `--section <name>`. A partial or quick run writes beside the
 * section's artifacts and leaves the report as it is: only the full plan is the measurement.
 *
 * Exits 0 when every section could be measured, whether or not the targets are met;
 * otherwise non-zero, with the coded error (ERR_LAB_NEEDS_ROOT, ERR_LAB_NO_NETNS,
 * ERR_LAB_MODEL_INVALID, …) on stderr.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { LabError } from './lab-error';
import { checkPreconditions, type LabCapabilities } from './preconditions';
import { cleanupLab, installTeardownHandlers } from './netlab';
import { MODEL_NAMES, type ProfileName } from './network-models';
import { progress } from './progress';
import { CLASS_SECTIONS, type ClassSection } from './report-types';
import { checkReport, emptyReport, mergeSection, REPORT_SCHEMA, SECTION_IDS, type LabReport, type SectionId } from './report-store';
import { reportMarkdown } from './report-markdown';
import { refreshResultsPage } from './report-docs';
import { provenanceSince, commitOf } from './provenance';
import { beginSettings } from './run-settings';
import { CFS_PERIOD_US } from './cpu-caps';
import { AccuracyPool } from './local-steps-pool';
import { BENCH_DIR, LAB_PROFILES, LOOPBACK_SECTIONS, SECTION_RUNNERS, type SectionContext } from './sections';
import { FULL_CLASS_PLAN, ttaPlans } from './class-lab';
import { FULL_LOCAL_STEPS_PLAN, accuracyPlans } from './local-steps-rows';

const USAGE = 'usage: npm run lab -- [--section collectives,class,local-steps,school,secagg,faults,class30] [--quick] [--models wifi,wired-lab,internet] [--only joins,scaling,mixed,timeToAccuracy] [--ns 1,8]';
const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;
export const LAB_REPORT = path.join(BENCH_DIR, 'lab.json');
/** In-process accuracy runs at once: the machine's two cores, at idle priority. */
const POOL_WORKERS = 2;

interface Args {
  sections: SectionId[];
  quick: boolean;
  models: ProfileName[] | null;
  only: ClassSection[] | null;
  ns: number[] | null;
}

function parse(): Args {
  const shorthands = Object.fromEntries(SECTION_IDS.map((id) => [id, { type: 'boolean' as const }]));
  const { values } = parseArgs({
    options: {
      section: { type: 'string' },
      quick: { type: 'boolean' },
      'class-quick': { type: 'boolean' },
      only: { type: 'string' },
      ns: { type: 'string' },
      models: { type: 'string' },
      ...shorthands,
    },
    strict: true,
  });
  const named = (values.section ?? '').split(',').filter(Boolean);
  for (const s of named) if (!(SECTION_IDS as readonly string[]).includes(s)) throw new LabError('ERR_LAB_USAGE', `--section ${s}: one of ${SECTION_IDS.join(', ')}`);
  const flagged = SECTION_IDS.filter((id) => (values as Record<string, unknown>)[id] === true);
  if (values['class-quick']) flagged.push('class');
  const chosen = [...new Set([...named, ...flagged])] as SectionId[];
  const sections = chosen.length > 0 ? SECTION_IDS.filter((id) => chosen.includes(id)) : [...SECTION_IDS];
  const only = values.only === undefined ? null : values.only.split(',').filter(Boolean);
  for (const s of only ?? []) if (!(CLASS_SECTIONS as readonly string[]).includes(s)) throw new LabError('ERR_LAB_USAGE', `--only ${s}: one of ${CLASS_SECTIONS.join(', ')}`);
  if (only && (sections.length !== 1 || sections[0] !== 'class')) throw new LabError('ERR_LAB_USAGE', '--only goes with --section class alone');
  const ns = values.ns === undefined ? null : values.ns.split(',').map(Number);
  if (ns && ns.some((n) => !Number.isInteger(n) || n < 1)) throw new LabError('ERR_LAB_USAGE', `--ns ${values.ns}: class sizes, like 1,8`);
  if (ns && (sections.length !== 1 || !['class', 'faults', 'secagg'].includes(sections[0]!))) throw new LabError('ERR_LAB_USAGE', '--ns goes with one of --section class, faults or secagg');
  const models = values.models === undefined ? null : values.models.split(',').filter(Boolean);
  for (const m of models ?? []) if (!(MODEL_NAMES as readonly string[]).includes(m)) throw new LabError('ERR_LAB_USAGE', `unknown network model ${JSON.stringify(m)}: one of ${MODEL_NAMES.join(', ')}`);
  if (models && (sections.length !== 1 || sections[0] !== 'collectives')) throw new LabError('ERR_LAB_USAGE', '--models goes with --section collectives alone');
  return { sections, quick: (values.quick ?? false) || (values['class-quick'] ?? false), models: models as ProfileName[] | null, only: only as ClassSection[] | null, ns };
}

/** The report as stored, or an empty one; a file that does not parse stops the run (it would be lost). */
export function readReport(file = LAB_REPORT): LabReport {
  if (!existsSync(file)) return emptyReport();
  let parsed: Partial<LabReport>;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<LabReport>;
  } catch (err) {
    throw new LabError('ERR_LAB_USAGE', `${file} is not JSON (${(err as Error).message}); move it away to start a new report`);
  }
  if (parsed.schema === REPORT_SCHEMA) return parsed as LabReport;
  // A report from before the one report (the collectives' rows with other sections' targets merged in): superseded, not merged.
  progress(`${path.relative(process.cwd(), file)} is not a report of schema ${REPORT_SCHEMA}: starting a new one`);
  return emptyReport();
}

/** bench/lab.json, bench/lab.md and the generated block of docs/lab-results.md, all from `report`. */
function writeReport(report: LabReport): void {
  writeFileSync(LAB_REPORT, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(LAB_REPORT.replace(/\.json$/, '.md'), reportMarkdown(report));
  refreshResultsPage(path.join(BENCH_DIR, '..', 'docs', 'lab-results.md'), report);
}

async function main(): Promise<void> {
  let args: Args;
  try {
    args = parse();
  } catch (err) {
    console.error(`webring lab: ${err instanceof LabError ? `${err.code}: ` : ''}${(err as Error).message}\n${USAGE}`);
    process.exit(EXIT_USAGE);
  }
  const startedAt = new Date();
  const whole = args.sections.length === SECTION_IDS.length && !args.quick;
  const needsLab = args.sections.some((s) => !LOOPBACK_SECTIONS.includes(s));
  // A loopback-only run (class30) needs no root: it builds no namespaces and caps nothing.
  const capabilities: LabCapabilities = needsLab ? checkPreconditions() : { netem: false, cgroup: 1 }; // loopback sections read neither
  if (needsLab) {
    installTeardownHandlers();
    const leftovers = cleanupLab();
    if (leftovers.length > 0) progress(`removed leftovers of a crashed run: ${leftovers.join(', ')}`);
    progress(`netem ${capabilities.netem ? 'present: profiles add their delays' : 'missing in this kernel: rates only, no added delay'}`);
  }
  const pool = new AccuracyPool(POOL_WORKERS);
  process.once('exit', () => pool.stop());
  // A whole run queues every in-process run first; the pool runs only while a section waits
  // for results, never beside rows (lab/local-steps-pool.ts), and a wait lets every queued
  // run go on, so the later sections find theirs done or under way.
  if (whole) pool.add([...ttaPlans(FULL_CLASS_PLAN), ...accuracyPlans(FULL_LOCAL_STEPS_PLAN)]);
  const ctx: SectionContext = { capabilities, quick: args.quick, pool, models: args.models ? args.models.map((m) => LAB_PROFILES[m]) : null, only: args.only, ns: args.ns };
  const failed: SectionId[] = [];
  for (const id of args.sections) {
    const sectionStart = new Date();
    const recorder = beginSettings();
    progress(`section ${id}: starting (${((Date.now() - startedAt.getTime()) / 60_000).toFixed(1)} minutes into the run)`);
    let run;
    try {
      run = await SECTION_RUNNERS[id](ctx);
    } catch (err) {
      failed.push(id);
      console.error(`webring lab: section ${id}: ${err instanceof LabError ? `${err.code}: ` : ''}${(err as Error).stack ?? (err as Error).message}`);
      continue;
    }
    const minutes = (Date.now() - sectionStart.getTime()) / 60_000;
    for (const t of run.targets) console.log(`target ${t.id}: ${t.value === null ? 'not measured' : t.value.toFixed(2)} (${t.goal}) ${t.met ? 'met' : 'NOT met'}: ${t.detail}`);
    for (const e of run.errors) console.error(`webring lab: ${id}: ${e.split('\n')[0]}`);
    if (run.errors.length > 0) failed.push(id);
    if (run.plan !== 'full') {
      progress(`section ${id}: a ${run.plan} run in ${minutes.toFixed(1)} minutes; its rows are beside the report, which it leaves as it was`);
      continue;
    }
    const entry = { id, provenance: provenanceSince(sectionStart), settings: recorder.settings(run.plan, CFS_PERIOD_US, run.declared), minutes, errors: run.errors, figures: run.figures };
    writeReport(mergeSection(readReport(), entry, run.targets));
    progress(`section ${id}: merged into bench/lab.json in ${minutes.toFixed(1)} minutes`);
  }
  pool.stop();
  if (whole) {
    const report = readReport();
    report.wholeRun = { startedAt: startedAt.toISOString(), minutes: (Date.now() - startedAt.getTime()) / 60_000, commit: commitOf(), sections: args.sections, failed };
    writeReport(report);
    for (const problem of checkReport(report)) console.error(`webring lab: the report: ${problem}`);
    progress(`the whole lab in ${report.wholeRun.minutes.toFixed(1)} minutes`);
  }
  if (failed.length > 0) process.exit(EXIT_FAILURE);
}

main().catch((err: unknown) => {
  if (err instanceof LabError) console.error(`webring lab: ${err.code}: ${err.message}`);
  else console.error('webring lab: failed:', err);
  process.exit(EXIT_FAILURE);
});
