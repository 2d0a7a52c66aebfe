/**
 * The lab's one report (bench/lab.json, bench/lab.md): every target of every section in
 * one place, each row saying when it was measured, on which commit, with which versions
 * and with which settings. A section (`npm run lab -- --section NAME`, or all of them with
 * `npm run lab`) replaces its own entry and its own targets, with its own dates, and
 * leaves the others as they were. Its rows stay in its own artifact (SECTIONS[].artifacts).
 *
 * A target whose section ran with any setting other than the defaults (lab/run-settings.ts)
 * says so in `nonDefault` and is never met, whatever its figure. `checkReport` is what the
 * unit test holds the committed report to.
 */
import type { Target } from './report-types';
import { CLASS_TARGET_IDS, LOCAL_STEPS_TARGET_IDS, TARGET_IDS } from './report-types';
import { nonDefault, type RunSettings } from './run-settings';
import type { Provenance } from './provenance';

export const REPORT_SCHEMA = 1;

export const SECTION_IDS = ['collectives', 'class', 'local-steps', 'school', 'secagg', 'faults', 'class30'] as const;
export type SectionId = (typeof SECTION_IDS)[number];

export interface SectionInfo {
  title: string;
  /** The command that runs this section alone. */
  command: string;
  /** Where its rows are, beside bench/lab.json. */
  artifacts: readonly string[];
  /** The targets it owns, in the order the report lists them. */
  targetIds: readonly string[];
}

/** What each section is, and which targets it owns: one id, one section. */
export const SECTIONS: Record<SectionId, SectionInfo> = {
  collectives: {
    title: 'The collectives on Wi-Fi, a wired lab and home lines',
    command: 'npm run lab -- --section collectives',
    artifacts: ['bench/lab-collectives.json', 'bench/lab-collectives.md', 'bench/lab-wifi.svg', 'bench/lab-wired-lab.svg', 'bench/lab-internet.svg'],
    targetIds: TARGET_IDS,
  },
  class: {
    title: 'A class of 1 to 8 laptops: joins, scaling, a mixed class, time to accuracy',
    command: 'npm run lab -- --section class',
    artifacts: ['bench/lab-class.json', 'bench/lab-class.md'],
    targetIds: CLASS_TARGET_IDS,
  },
  'local-steps': {
    title: 'Local steps and compressed sums against every step',
    command: 'npm run lab -- --section local-steps',
    artifacts: ['bench/lab-local-steps.json', 'bench/lab-local-steps.md'],
    targetIds: LOCAL_STEPS_TARGET_IDS,
  },
  school: {
    title: "A class of 8 on a school's Wi-Fi with client isolation",
    command: 'npm run lab -- --section school',
    artifacts: ['bench/lab-school.json', 'bench/lab-school.md'],
    targetIds: ['school-isolated-trains', 'school-mixed-both-paths'],
  },
  secagg: {
    title: 'What secure aggregation costs on Wi-Fi',
    command: 'npm run lab -- --section secagg',
    artifacts: ['bench/lab-secagg.json', 'bench/lab-secagg.md'],
    targetIds: ['secagg-step-overhead-n8', 'secagg-step-overhead-n16', 'secagg-accuracy'],
  },
  faults: {
    title: 'Faults on Wi-Fi: a link down, a freeze, a cut',
    command: 'npm run lab -- --section faults',
    artifacts: ['bench/lab-faults.json', 'bench/lab-faults.md'],
    targetIds: ['class8-hiccup', 'class8-freeze'],
  },
  class30: {
    title: 'A class of thirty Node workers on loopback: a join storm, churn, faults',
    command: 'npm run lab -- --section class30',
    artifacts: ['bench/class.json', 'bench/class.md'],
    targetIds: ['class30-join-storm', 'class30-churn', 'class30-hiccup', 'class30-freeze'],
  },
};

/** A headline figure a section offers the docs (docs/lab-results.md checks them against it). */
export type Figures = Record<string, number | null>;

export interface SectionEntry {
  id: SectionId;
  provenance: Provenance;
  settings: RunSettings;
  /** How `settings` differ from the defaults, in words; empty on the defaults. */
  nonDefault: string[];
  minutes: number;
  /** What could not be measured, with its coded error. */
  errors: string[];
  figures: Figures;
}

export interface ReportTarget extends Target {
  section: SectionId;
  provenance: Provenance;
  settings: RunSettings;
  nonDefault: string[];
  /** Whether the figure meets the goal; `met` is that and the defaults. */
  figureMeetsGoal: boolean;
}

export interface WholeRun {
  startedAt: string;
  minutes: number;
  commit: string;
  sections: SectionId[];
  /** Sections that ended with an error, by id. */
  failed: SectionId[];
}

export interface LabReport {
  schema: typeof REPORT_SCHEMA;
  /** The last time any section was merged. */
  updatedAt: string;
  /** The last `npm run lab` that ran every section, if any. */
  wholeRun: WholeRun | null;
  /** In SECTION_IDS order; a section never run is absent. */
  sections: SectionEntry[];
  /** In SECTION_IDS order, each section's in its catalog's order. */
  targets: ReportTarget[];
}

export const emptyReport = (): LabReport => ({ schema: REPORT_SCHEMA, updatedAt: new Date(0).toISOString(), wholeRun: null, sections: [], targets: [] });

const sectionOrder = (id: SectionId): number => SECTION_IDS.indexOf(id);
const targetOrder = (t: ReportTarget): number => sectionOrder(t.section) * 1000 + SECTIONS[t.section].targetIds.indexOf(t.id);

/**
 * `report` with `entry` as its section and `targets` as that section's targets: what the
 * section had before is replaced, every other section and target is kept. A target the
 * section does not own, or one it owns missing, is refused: one id lives in one place.
 */
export function mergeSection(report: LabReport, entry: Omit<SectionEntry, 'nonDefault'>, targets: Target[]): LabReport {
  const owned = SECTIONS[entry.id].targetIds;
  const ids = targets.map((t) => t.id as string);
  const foreign = ids.filter((id) => !owned.includes(id));
  const missing = owned.filter((id) => !ids.includes(id));
  const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
  if (foreign.length + missing.length + twice.length > 0) {
    throw new Error(`section ${entry.id}: targets ${JSON.stringify({ foreign, missing, twice })}: each of ${owned.join(', ')} once`);
  }
  const deviations = nonDefault(entry.settings);
  const section: SectionEntry = { ...entry, nonDefault: deviations };
  const rows: ReportTarget[] = targets.map((t) => ({
    ...t,
    section: entry.id,
    provenance: entry.provenance,
    settings: entry.settings,
    nonDefault: deviations,
    figureMeetsGoal: t.met,
    met: t.met && deviations.length === 0,
  }));
  return {
    ...report,
    updatedAt: entry.provenance.measuredAt,
    sections: [...report.sections.filter((s) => s.id !== entry.id), section].sort((a, b) => sectionOrder(a.id) - sectionOrder(b.id)),
    targets: [...report.targets.filter((t) => t.section !== entry.id), ...rows].sort((a, b) => targetOrder(a) - targetOrder(b)),
  };
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const COMMIT = /^[0-9a-f]{7,40}(\+changes)?$/;

/** What is wrong with a provenance, in words; empty when it is whole. */
export function provenanceProblems(p: Provenance | undefined): string[] {
  if (!p) return ['no provenance'];
  const out: string[] = [];
  if (!ISO.test(p.measuredAt ?? '')) out.push(`measuredAt ${JSON.stringify(p.measuredAt)} is not an ISO time`);
  if (!ISO.test(p.startedAt ?? '')) out.push(`startedAt ${JSON.stringify(p.startedAt)} is not an ISO time`);
  if (!COMMIT.test(p.commit ?? '')) out.push(`commit ${JSON.stringify(p.commit)} is not a commit`);
  for (const k of ['node', 'tfjs', 'chromium', 'kernel'] as const) {
    if (!p.versions?.[k] || /^unknown/.test(p.versions[k])) out.push(`no ${k} version`);
  }
  if (!p.machine?.cores) out.push('no machine');
  return out;
}

/**
 * Every way `report` falls short of one whole, traceable report on the defaults: a
 * section never measured, a target missing, twice or in the wrong section, a row without
 * provenance or settings, a row whose deviations are not what its settings say, a row met
 * on a raised setting or without a figure. Empty when it holds.
 */
export function checkReport(report: LabReport): string[] {
  const out: string[] = [];
  if (report.schema !== REPORT_SCHEMA) out.push(`schema ${report.schema}, not ${REPORT_SCHEMA}`);
  for (const id of SECTION_IDS) {
    const s = report.sections.find((x) => x.id === id);
    if (!s) {
      out.push(`section ${id}: never measured`);
      continue;
    }
    for (const p of provenanceProblems(s.provenance)) out.push(`section ${id}: ${p}`);
    if (!s.settings) out.push(`section ${id}: no settings`);
    for (const t of SECTIONS[id].targetIds) {
      const rows = report.targets.filter((r) => r.id === t);
      if (rows.length !== 1) out.push(`target ${t}: ${rows.length} rows, not 1`);
      else if (rows[0]!.section !== id) out.push(`target ${t}: in section ${rows[0]!.section}, not ${id}`);
    }
  }
  for (const t of report.targets) {
    const where = `target ${t.id}`;
    if (!SECTION_IDS.includes(t.section) || !SECTIONS[t.section].targetIds.includes(t.id)) out.push(`${where}: no section owns it`);
    for (const p of provenanceProblems(t.provenance)) out.push(`${where}: ${p}`);
    if (!t.settings) {
      out.push(`${where}: no settings`);
      continue;
    }
    const deviations = nonDefault(t.settings);
    if (JSON.stringify(deviations) !== JSON.stringify(t.nonDefault)) out.push(`${where}: nonDefault ${JSON.stringify(t.nonDefault)} is not what its settings say (${JSON.stringify(deviations)})`);
    if (t.met && deviations.length > 0) out.push(`${where}: met on settings other than the defaults (${deviations.join('; ')})`);
    if (t.met && (t.value === null || !t.figureMeetsGoal)) out.push(`${where}: met without a figure that meets its goal`);
  }
  return out;
}
