/**
 * The lab's one report (lab/report-store.ts): a section replaces its own rows and no other,
 * one target lives in one section, every row carries its provenance and settings, and a row
 * on any setting but the defaults is never met. The committed bench/lab.json is held to the
 * same rules, and so are the pages that show it (bench/lab.md, docs/lab-results.md, and every
 * figure the README and docs tie to it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { checkReport, emptyReport, mergeSection, SECTION_IDS, SECTIONS, type LabReport, type SectionEntry } from '../../lab/report-store';
import { configDeviations, nonDefault, SettingsRecorder, type RunSettings } from '../../lab/run-settings';
import type { Provenance } from '../../lab/provenance';
import type { Target } from '../../lab/report-types';
import { reportMarkdown, targetsTable } from '../../lab/report-markdown';
import { RESULTS_BEGIN, RESULTS_END, figureMarkers, resultsBlock, valueOf } from '../../lab/report-docs';
import { classTargets } from '../../lab/class-report';
import { schoolTargets } from '../../lab/school-wifi';
import { secaggTargets, summarize } from '../../lab/secagg-report';
import { SECAGG_SIZES } from '../../lab/secagg-rows';
import { localStepsTargets } from '../../lab/local-steps-targets';
import { summarize as localStepsSummary } from '../../lab/local-steps-report';
import { targets as collectivesTargets } from '../../lab/report';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

const provenance = (at = '2026-12-01T10:00:00.000Z'): Provenance => ({
  measuredAt: at,
  startedAt: '2026-12-01T09:50:00.000Z',
  commit: 'abc1234',
  versions: { node: '20.20.2', tfjs: '4.22.0', chromium: '156.0.8078.114', kernel: '6.1.0' },
  machine: { cpu: 'a CPU', cores: 2 },
});

const settings = (extra: Partial<RunSettings> = {}): RunSettings => ({ plan: 'full', cfsPeriodUs: 20_000, workerCompute: 'thread', liveness: [{ pingIntervalMs: 1_000, pingTimeoutMs: 4_000 }], icePolicies: [], config: {}, declared: [], ...extra });

const entry = (id: SectionEntry['id'], extra: Partial<SectionEntry> = {}): Omit<SectionEntry, 'nonDefault'> => ({ id, provenance: provenance(), settings: settings(), minutes: 1, errors: [], figures: {}, ...extra });

const targetsOf = (id: SectionEntry['id'], value = 1, met = true): Target[] => SECTIONS[id].targetIds.map((t) => ({ id: t, goal: `the goal of ${t}`, value, met, detail: 'as measured' }));

/** Every section merged, each with its targets met. */
function wholeReport(): LabReport {
  return SECTION_IDS.reduce((r, id) => mergeSection(r, entry(id), targetsOf(id)), emptyReport());
}

test('a section replaces its own entry and targets, with its own dates, and leaves the others as they were', () => {
  const first = wholeReport();
  assert.deepEqual(checkReport(first), []);
  const again = mergeSection(first, entry('school', { provenance: provenance('2026-12-02T08:00:00.000Z') }), targetsOf('school', 0.5, false));
  assert.deepEqual(again.targets.map((t) => t.id), first.targets.map((t) => t.id), 'the order stays: sections in order, each in its catalog order');
  for (const t of again.targets) {
    const before = first.targets.find((x) => x.id === t.id)!;
    if (t.section === 'school') assert.deepEqual([t.value, t.met, t.provenance.measuredAt], [0.5, false, '2026-12-02T08:00:00.000Z']);
    else assert.deepEqual(t, before);
  }
  assert.equal(again.updatedAt, '2026-12-02T08:00:00.000Z');
  assert.equal(again.sections.length, SECTION_IDS.length);
});

test('one id, one section: a foreign, a missing or a doubled target is refused', () => {
  const r = emptyReport();
  assert.throws(() => mergeSection(r, entry('faults'), [...targetsOf('faults'), ...targetsOf('school')]), /foreign.*school-isolated-trains/);
  assert.throws(() => mergeSection(r, entry('faults'), targetsOf('faults').slice(1)), /missing.*class8-hiccup/);
  assert.throws(() => mergeSection(r, entry('faults'), [...targetsOf('faults'), targetsOf('faults')[0]!]), /twice.*class8-hiccup/);
  const ids = SECTION_IDS.flatMap((id) => SECTIONS[id].targetIds);
  assert.equal(new Set(ids).size, ids.length, 'no id in two sections');
});

test('a raised setting says so and is never met; the experiment\'s own fields and run lengths are not deviations', () => {
  const raised = settings({ liveness: [{ pingIntervalMs: 1_000, pingTimeoutMs: 60_000 }] });
  assert.deepEqual(nonDefault(raised), ['PING_TIMEOUT_MS 60000 (default 4000)']);
  const merged = mergeSection(emptyReport(), entry('faults', { settings: raised }), targetsOf('faults'));
  assert.ok(merged.targets.every((t) => !t.met && t.figureMeetsGoal && t.nonDefault.length === 1));
  assert.deepEqual(nonDefault(settings({ plan: 'quick', cfsPeriodUs: 100_000, workerCompute: 'main' })), [
    'plan quick (the measurement is the full plan)',
    'CFS period 100000 µs (default 20000)',
    'LAB_WORKER_COMPUTE main (default: the compute thread)',
  ]);
  // A declared field is the target's subject; any other field away from its task's default is a deviation.
  assert.deepEqual(nonDefault(settings({ config: { secureAggregation: [true] }, declared: ['secureAggregation'] })), []);
  assert.deepEqual(nonDefault(settings({ config: { learningRate: [0.01] }, declared: ['secureAggregation'] })), ['learningRate 0.01 (not its task\'s default)']);
});

test('the settings a section saw: each server\'s liveness, each config\'s fields away from its task\'s defaults, run lengths left out', () => {
  assert.deepEqual(configDeviations({ task: 'mnist', maxSteps: 100, resumeFrom: 'none', epochs: 50, saveEverySteps: 10 }), {});
  assert.deepEqual(configDeviations({ task: 'mnist', learningRate: 0.01, allreduce: 'auto' }), { learningRate: 0.01 });
  // The schema's derived defaults are defaults: local steps travel in fp16 unless the teacher names a wire.
  assert.deepEqual(Object.keys(configDeviations({ task: 'mnist', sync: 'local-steps' })).sort(), ['sync', 'wire']);
  assert.match(String(configDeviations({ task: 'mnist', learningRate: -1 }).invalidConfig), /learningRate/);
  const r = new SettingsRecorder();
  r.noteServer({ PING_TIMEOUT_MS: '60000' });
  r.noteServer({});
  r.noteConfig({ task: 'mnist', scaleLearningRate: true });
  r.noteConfig({ task: 'mnist', scaleLearningRate: true });
  const s = r.settings('full', 20_000, ['scaleLearningRate'], 'thread');
  assert.deepEqual(s.liveness, [{ pingIntervalMs: 1_000, pingTimeoutMs: 60_000 }, { pingIntervalMs: 1_000, pingTimeoutMs: 4_000 }]);
  assert.deepEqual(s.config, { scaleLearningRate: [true] });
  assert.deepEqual(nonDefault(s), ['PING_TIMEOUT_MS 60000 (default 4000)']);
});

test('checkReport: what makes a report not whole, not traceable or not on the defaults', () => {
  const good = wholeReport();
  const mutate = (f: (r: LabReport) => void): string[] => {
    const r = structuredClone(good);
    f(r);
    return checkReport(r);
  };
  assert.deepEqual(mutate(() => undefined), []);
  assert.match(mutate((r) => void (r.targets[0]!.provenance.commit = 'unknown (no git)')).join(), /ring-vs-hub-wired-n4-16mb: commit "unknown/);
  assert.match(mutate((r) => void delete (r.targets[1] as Partial<LabReport['targets'][number]>).provenance).join(), /bus-vs-port-wired-n4-16mb: no provenance/);
  assert.match(mutate((r) => void (r.targets[2]!.provenance.versions.chromium = '')).join(), /no chromium version/);
  // A raised setting written into a row that still says met: the row is refused twice over.
  const raised = mutate((r) => {
    r.targets[3]!.settings.liveness = [{ pingIntervalMs: 1_000, pingTimeoutMs: 60_000 }];
  });
  assert.match(raised.join('\n'), /auto-vs-best-worst-case: nonDefault \[\] is not what its settings say/);
  assert.match(raised.join('\n'), /auto-vs-best-worst-case: met on settings other than the defaults \(PING_TIMEOUT_MS 60000/);
  assert.match(mutate((r) => void r.sections.splice(0, 1)).join(), /section collectives: never measured/);
  assert.match(mutate((r) => void r.targets.splice(0, 1)).join(), /target ring-vs-hub-wired-n4-16mb: 0 rows, not 1/);
  assert.match(mutate((r) => void (r.targets[0]!.value = null)).join(), /met without a figure/);
});

test('each section\'s target functions name exactly the ids its catalog owns', () => {
  const ids = (ts: Target[]) => ts.map((t) => t.id);
  assert.deepEqual(ids(collectivesTargets([], [], [])), [...SECTIONS.collectives.targetIds]);
  assert.deepEqual(ids(classTargets({ scaling: null, timeToAccuracy: null, mixed: null, joins: null })), [...SECTIONS.class.targetIds]);
  assert.deepEqual(ids(schoolTargets([])), [...SECTIONS.school.targetIds]);
  assert.deepEqual(ids(secaggTargets(summarize([]), [], Math.max(...SECAGG_SIZES))), [...SECTIONS.secagg.targetIds]);
  assert.deepEqual(ids(localStepsTargets(localStepsSummary({ windows: [], accuracy: [], classes: [], threshold: 0.97 }), [])), [...SECTIONS['local-steps'].targetIds]);
  assert.match(read('lab/sections.ts'), /const FAULT_CLASS = 8;/, 'the faults section names class8-*');
  assert.match(read('test/bench/class.ts'), /const CLASS_SIZE = Number\(process\.env\.BENCH_CLASS \?\? 30\);/, 'the class of thirty names class30-*');
});

// ---------------------------------------------------------------------------
// The committed report and the pages that show it

const committed = JSON.parse(read('bench/lab.json')) as LabReport;

test('bench/lab.json is one whole report on the defaults: every section, every target once, each row traced', () => {
  assert.deepEqual(checkReport(committed), []);
  for (const t of committed.targets) assert.deepEqual(t.nonDefault, [], `${t.id} ran on the defaults`);
  assert.ok(committed.wholeRun, 'a whole `npm run lab` is recorded');
});

test('the targets live in bench/lab.json alone: no other report in bench/ holds a `targets` list', () => {
  const holders = readdirSync(path.join(ROOT, 'bench')).filter((f) => f.endsWith('.json') && f !== 'lab.json').filter((f) => 'targets' in (JSON.parse(read(`bench/${f}`)) as object));
  assert.deepEqual(holders, []);
});

test('bench/lab.md and docs/lab-results.md show what bench/lab.json holds', () => {
  assert.equal(read('bench/lab.md'), reportMarkdown(committed));
  const page = read('docs/lab-results.md');
  const from = page.indexOf(RESULTS_BEGIN);
  const to = page.indexOf(RESULTS_END);
  assert.ok(from >= 0 && to > from, 'docs/lab-results.md holds the generated block');
  assert.equal(page.slice(from, to + RESULTS_END.length), resultsBlock(committed));
  assert.ok(resultsBlock(committed).includes(targetsTable(committed).join('\n')));
});

test('every figure the README and docs tie to the report is the report\'s, as written', () => {
  const files = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  let seen = 0;
  for (const file of files) {
    for (const m of figureMarkers(read(file))) {
      seen++;
      const value = valueOf(committed, m.key);
      assert.notEqual(value, undefined, `${file}: ${m.key} is not in the report`);
      assert.notEqual(value, null, `${file}: ${m.key} has no figure in the report`);
      const written = Number(m.written.replace(/,/g, ''));
      const decimals = m.written.split('.')[1]?.length ?? 0;
      assert.equal(written, Number(value!.toFixed(decimals)), `${file}: ${m.key} is written ${m.written}, the report says ${value}`);
    }
  }
  assert.ok(seen >= 10, `the README and docs tie ${seen} figures to the report`);
});

test('a figure marker reads the number written just before it, and a mistyped one is caught', () => {
  const text = 'the ring is 2.76× <!-- lab: target:ring-vs-hub-wired-n4-16mb --> as fast; 96.44 %<!-- lab: school.isolated-accuracy-pct --> and 1,334 B <!-- lab: local-steps.x -->';
  assert.deepEqual(figureMarkers(text), [
    { key: 'target:ring-vs-hub-wired-n4-16mb', written: '2.76' },
    { key: 'school.isolated-accuracy-pct', written: '96.44' },
    { key: 'local-steps.x', written: '1,334' },
  ]);
  const r = wholeReport();
  assert.equal(valueOf(r, 'target:ring-vs-hub-wired-n4-16mb'), 1);
  assert.equal(valueOf(r, 'target:no-such-target'), undefined);
  assert.equal(valueOf(r, 'school.no-such-figure'), undefined);
  assert.throws(() => figureMarkers('no number here <!-- lab: target:x -->'), /no number before/);
});
