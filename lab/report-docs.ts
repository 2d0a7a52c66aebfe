/**
 * The docs' side of the lab's report, so that no published figure can drift from it:
 *
 *  - docs/lab-results.md holds a block between RESULTS_BEGIN and RESULTS_END that the lab
 *    writes from bench/lab.json after every section (the targets, each with its date and
 *    settings); the unit test keeps it equal to what this renders;
 *  - anywhere in the README and docs, a figure followed by `<!-- lab: KEY -->` is tied to
 *    the report: KEY is `target:<id>` (a target's figure) or `<section>.<name>` (a section's
 *    headline figure, lab/sections.ts), and the unit test checks that the number written
 *    just before the marker is the report's, at the precision written.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { SECTION_IDS, type LabReport, type SectionId } from './report-store';
import { targetsTable } from './report-markdown';

export const RESULTS_BEGIN = '<!-- lab-report:begin (written by npm run lab from bench/lab.json; do not edit) -->';
export const RESULTS_END = '<!-- lab-report:end -->';

/** The generated block of docs/lab-results.md, markers included. */
export function resultsBlock(report: LabReport): string {
  const w = report.wholeRun;
  const run = w ? `The last whole run (\`npm run lab\`) started ${w.startedAt.slice(0, 16).replace('T', ' ')} UTC on commit ${w.commit} and took ${w.minutes.toFixed(1)} minutes.` : 'No whole run is recorded yet.';
  const unmet = report.targets.filter((t) => !t.met);
  return [
    RESULTS_BEGIN,
    `${run} ${report.targets.length - unmet.length} of ${report.targets.length} targets are met. Each row's section, versions and settings: [bench/lab.md](../bench/lab.md).`,
    '',
    ...targetsTable(report),
    '',
    ...(unmet.length > 0 ? ['Not met, and what was measured:', '', ...unmet.map((t) => `- \`${t.id}\`: ${t.detail}.`), ''] : []),
    RESULTS_END,
  ].join('\n');
}

/** `page` with its generated block replaced by `report`'s; the page unchanged when it has none. */
export function withResults(page: string, report: LabReport): string {
  const from = page.indexOf(RESULTS_BEGIN);
  const to = page.indexOf(RESULTS_END);
  if (from < 0 || to < from) return page;
  return page.slice(0, from) + resultsBlock(report) + page.slice(to + RESULTS_END.length);
}

/** Rewrites the block of the results page at `file` (docs/lab-results.md) from `report`. */
export function refreshResultsPage(file: string, report: LabReport): void {
  if (!existsSync(file)) return;
  const page = readFileSync(file, 'utf8');
  const next = withResults(page, report);
  if (next !== page) writeFileSync(file, next);
}

const MARKER = /<!-- lab: ([a-z0-9:.-]+) -->/g;
/** The last number before a marker: digits with thousands commas and a decimal part. */
const LAST_NUMBER = /(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?!.*\d)/;

/** Each figure marker of `text` with the number written just before it (on its line); throws where there is none. */
export function figureMarkers(text: string): Array<{ key: string; written: string }> {
  const out: Array<{ key: string; written: string }> = [];
  for (const m of text.matchAll(MARKER)) {
    const lineStart = text.lastIndexOf('\n', m.index) + 1;
    const before = text.slice(lineStart, m.index).replace(/<!--.*?-->/g, '');
    const n = LAST_NUMBER.exec(before);
    if (!n) throw new Error(`no number before the marker ${m[0]}`);
    out.push({ key: m[1]!, written: n[1]! });
  }
  return out;
}

/** The report's figure for a marker's key: a number, null (not measured), or undefined (no such key). */
export function valueOf(report: LabReport, key: string): number | null | undefined {
  if (key.startsWith('target:')) return report.targets.find((t) => t.id === key.slice('target:'.length))?.value;
  const dot = key.indexOf('.');
  const section = key.slice(0, dot) as SectionId;
  if (!SECTION_IDS.includes(section)) return undefined;
  const figures = report.sections.find((s) => s.id === section)?.figures;
  return figures && key.slice(dot + 1) in figures ? figures[key.slice(dot + 1)] : undefined;
}
