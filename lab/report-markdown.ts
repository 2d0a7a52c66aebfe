/**
 * bench/lab.md: the lab's one report as a reader sees it. The targets first (each row with
 * its date, commit and settings), then each section's provenance and where its rows are.
 * docs/lab-results.md embeds the targets table (`targetsTable`) between markers, and a
 * unit test keeps it equal to what this renders from bench/lab.json.
 */
import { SECTIONS, type LabReport, type ReportTarget, type SectionEntry } from './report-store';

const day = (iso: string): string => iso.slice(0, 16).replace('T', ' ');

/** A target's figure as the report prints it: two decimals, or "–" without one. */
export const figureText = (value: number | null): string => (value === null ? '–' : value.toFixed(2));

function settingsText(t: Pick<ReportTarget, 'nonDefault'>): string {
  return t.nonDefault.length === 0 ? 'defaults' : `**not the defaults:** ${t.nonDefault.join('; ')}`;
}

/** The targets, one row each: id, figure, met, when and on which commit, and the settings. */
export function targetsTable(report: LabReport): string[] {
  const lines = ['| target | figure | met | measured | settings |', '|---|---|---|---|---|'];
  for (const t of report.targets) {
    lines.push(`| \`${t.id}\` | ${figureText(t.value)} | ${t.met ? 'yes' : '**no**'} | ${day(t.provenance.measuredAt)}, ${t.provenance.commit} | ${settingsText(t)} |`);
  }
  return lines;
}

function sectionLine(s: SectionEntry): string {
  const p = s.provenance;
  return `| ${s.id} | \`${SECTIONS[s.id].command}\` | ${day(p.startedAt)} | ${s.minutes.toFixed(1)} | ${p.commit} | ${s.nonDefault.length === 0 ? 'defaults' : s.nonDefault.join('; ')} | ${SECTIONS[s.id].artifacts.map((a) => `[${a.replace('bench/', '')}](${a.replace('bench/', '')})`).join(', ')} |`;
}

export function reportMarkdown(report: LabReport): string {
  const lines: string[] = ['# The classroom lab: the report', ''];
  const w = report.wholeRun;
  lines.push(
    w
      ? `The last whole run, \`npm run lab\`, started ${day(w.startedAt)} UTC on commit ${w.commit} and took ${w.minutes.toFixed(1)} minutes for ${w.sections.length} sections${w.failed.length > 0 ? ` (ended with an error: ${w.failed.join(', ')})` : ''}. A section run alone since then replaces its own rows and dates.`
      : 'No whole run (`npm run lab`) is recorded: the sections below were run one at a time.',
    '',
    'Each row says when its section was measured and on which commit; the versions are in the sections table below. A row measured with any setting other than the product\'s defaults says which, and is never met. How to read and reproduce it: docs/researcher-index.md; what each section runs: docs/lab-sections.md.',
    '',
    '## Targets',
    '',
    ...targetsTable(report),
    '',
    '## What each target asks, and what was measured',
    '',
  );
  for (const t of report.targets) lines.push(`- \`${t.id}\` (${t.met ? 'met' : 'not met'}): ${t.goal}. Measured: ${figureText(t.value)}; ${t.detail}.`);
  lines.push('', '## Sections', '', '| section | command | started (UTC) | minutes | commit | settings | rows |', '|---|---|---|---|---|---|---|');
  for (const s of report.sections) lines.push(sectionLine(s));
  lines.push('', '| section | Node | tfjs | Chromium | kernel | CPU | cores | CFS period (µs) |', '|---|---|---|---|---|---|---|---|');
  for (const s of report.sections) {
    const p = s.provenance;
    lines.push(`| ${s.id} | ${p.versions.node} | ${p.versions.tfjs} | ${p.versions.chromium} | ${p.versions.kernel} | ${p.machine.cpu} | ${p.machine.cores} | ${s.settings.cfsPeriodUs} |`);
  }
  const errors = report.sections.flatMap((s) => s.errors.map((e) => `- ${s.id}: ${e.split('\n')[0]}`));
  if (errors.length > 0) lines.push('', '## What could not be measured', '', ...errors);
  lines.push('');
  return lines.join('\n');
}
