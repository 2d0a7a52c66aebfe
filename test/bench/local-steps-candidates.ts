/**
 * `npm run bench:local-steps`: the ways of running local steps, measured side by side for
 * how well they learn (issue 40), into bench/local-steps-candidates.{json,md}.
 *
 * Each candidate (an H, an inner optimizer, a correction, an outer step) trains in-process
 * with the lab's accuracy runner (lab/local-steps-accuracy.ts: N replicas of the product's
 * Trainer over the in-memory ring, the official 60,000 training digits, scored on the
 * official 10,000 test digits) on:
 *  - IID data at N = 4 and 8: the examples to 97 % (at most 3 epochs) and the accuracy at
 *    the default run's end (2 epochs);
 *  - the class's own data split by class at N = 4 (012 / 345 / 67 / 89), masked as own data
 *    is by default: the accuracy at the default run's end, and the lowest and highest
 *    points of its second epoch (how much it swings from round to round).
 * Accuracy per example does not depend on the network; `npm run lab -- --section local-steps`
 * composes time to accuracy on emulated links from the same runs.
 *
 *   npm run bench:local-steps [-- --only <candidate id,...>] [--workers 2]
 *
 * With --only, the named candidates are measured again (or for the first time) and merged
 * into the report: the others' rows stay, and the report says when and on which commit
 * each set of rows was measured.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { AccuracyPool } from '../../lab/local-steps-pool';
import { ADAM_RESTARTED, EVERY_STEP, SERVER_DATA, type AccuracyData, type AccuracyPlan, type AccuracyResult, type LocalStepsSettings, type SyncVariant } from '../../lab/local-steps-protocol';
import { RECIPE_DEFAULTS } from '../../shared/protocol';
import { provenance, type Provenance } from './provenance';
import { factorFloats, factorLayout } from '../../shared/collectives/power-sgd';
import { buildModel } from '../../shared/compute/models';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { LAB_WORKLOADS } from '../../shared/tasks/lab-workloads';

const THRESHOLD = 0.97;
const OUT = 'bench/local-steps-candidates';

interface Candidate {
  id: string;
  /** What it is, in the table's words. */
  what: string;
  variant: SyncVariant;
  /** Which of the three settings it runs on: a candidate that is clearly out after one is not run on the others. */
  on: ReadonlyArray<Setting['id']>;
}

interface Setting {
  id: 'iid4' | 'iid8' | 'by-class4';
  n: number;
  data: AccuracyData;
  maxEpochs: number;
}

const SETTINGS: readonly Setting[] = [
  { id: 'iid4', n: 4, data: SERVER_DATA, maxEpochs: 3 },
  { id: 'iid8', n: 8, data: SERVER_DATA, maxEpochs: 3 },
  { id: 'by-class4', n: 4, data: 'own-by-class', maxEpochs: 2 },
];
const ALL = SETTINGS.map((s) => s.id);

const local = (id: string, h: number, what: string, config: LocalStepsSettings, on: ReadonlyArray<Setting['id']> = ALL): Candidate => ({
  id,
  what,
  variant: { id, sync: 'local-steps', localSteps: h, config },
  on,
});
const SGD = { localOptimizer: 'sgd', localLearningRate: 0.3 } as const;

/** The lab MLP's variables, for the floats a factored sum sends. */
const MLP_SHAPES = ((model) => {
  const shapes = model.trainableWeights.map((w) => [...w.shape] as number[]);
  model.dispose();
  return shapes;
})(buildModel(startConfigSchema.parse(LAB_WORKLOADS.dense.config)));
const MLP_FLOATS = MLP_SHAPES.reduce((n, shape) => n + shape.reduce((a, b) => a * b, 1), 0);
/** A round as PowerSGD factors of rank `r`, with the share of the floats it sends. */
function powerSgd(r: number): Candidate {
  const { first, second } = factorFloats(factorLayout(MLP_SHAPES, r), r);
  const share = ((first + second) / MLP_FLOATS) * 100;
  return local(`H10-powersgd${r}`, 10, `H = 10, SGD 0.3, each round as PowerSGD factors of rank ${r} with error feedback: ${(first + second).toLocaleString('en')} floats in two sums, ${share.toFixed(1)} % of the whole`, { ...SGD, powerSgdRank: r }, ['iid4', 'iid8', 'by-class4']);
}

/** A round in `bits`-bit words with error feedback, after PowerSGD factors of rank `r` when r > 0. */
function words(bits: 8 | 16, r = 0): Candidate {
  const factors = r > 0 ? `PowerSGD factors of rank ${r}, ` : '';
  return local(`H10-${r > 0 ? `powersgd${r}-` : ''}words${bits}`, 10, `H = 10, SGD 0.3, each round as ${factors}${bits}-bit words on a grid agreed per block, with error feedback`, { ...SGD, powerSgdRank: r, sumWordBits: bits });
}

/** The candidates, in the table's order: the reference, the product before, the adopted default, and what else was tried. */
const CANDIDATES: readonly Candidate[] = [
  { id: 'every-step', what: 'every step (Adam 0.003)', variant: EVERY_STEP, on: ALL },
  local('H20-adam', 20, "H = 20, the run's Adam restarted every round (the product until 2026-11-29)", ADAM_RESTARTED),
  local('H10-adam', 10, "H = 10, the run's Adam restarted every round", ADAM_RESTARTED, ['by-class4']),
  local('H20-adam-scaffold', 20, 'H = 20, Adam restarted, SCAFFOLD in the update space', { ...ADAM_RESTARTED, localCorrection: 'scaffold' }, ['by-class4']),
  local('H20-sgd', 20, 'H = 20, plain SGD at 0.3 inside', SGD),
  local('H10-sgd', 10, 'H = 10, plain SGD at 0.3 inside (the default)', SGD),
  local('H10-sgd-scaffold', 10, 'H = 10, SGD 0.3, SCAFFOLD in the update space', { ...SGD, localCorrection: 'scaffold' }, ['iid4', 'by-class4']),
  local('H10-sgd-fedavg', 10, 'H = 10, SGD 0.3, FedAvg outside (rate 1, no momentum)', { ...SGD, outerLearningRate: 1, outerMomentum: 0 }, ['iid4', 'by-class4']),
  local('H10-sgd0.1', 10, 'H = 10, plain SGD at 0.1 inside', { localOptimizer: 'sgd', localLearningRate: 0.1 }, ['iid4', 'by-class4']),
  local('H5-sgd', 5, 'H = 5, plain SGD at 0.3 inside', SGD, ['iid4', 'by-class4']),
  powerSgd(4),
  powerSgd(8),
  powerSgd(16),
  words(8),
  words(8, 16),
];

function planOf(c: Candidate, s: Setting): AccuracyPlan {
  return {
    id: `${c.id}@${s.id}`,
    n: s.n,
    variant: c.variant,
    data: s.data,
    threshold: THRESHOLD,
    defaultEpochs: RECIPE_DEFAULTS.epochs,
    maxEpochs: s.maxEpochs,
    scoreEveryExamples: 6_000,
    screenStride: 5,
    screenMargin: 0.005,
    everyStepAsOne: true,
  };
}

interface Report extends Provenance {
  settings: { threshold: number; defaultEpochs: number; settings: readonly Setting[] };
  candidates: Array<Pick<Candidate, 'id' | 'what' | 'variant'>>;
  results: AccuracyResult[];
  /** Rows measured after the report's own run (--only), each set with its own provenance. */
  added?: Array<Provenance & { candidates: string[] }>;
}

/** The candidate id of a result (its plan id is `<candidate>@<setting>`). */
const candidateOf = (r: AccuracyResult): string => r.plan.id.split('@')[0]!;

/** Earlier sets of added rows, without the candidates measured again now. */
const remaining = (added: NonNullable<Report['added']>, remeasured: readonly string[]): NonNullable<Report['added']> =>
  added.map((a) => ({ ...a, candidates: a.candidates.filter((c) => !remeasured.includes(c)) })).filter((a) => a.candidates.length > 0);

/** The report measured before, with the rows of `remeasured` taken out: what --only merges into. */
function earlier(remeasured: readonly string[]): Report | null {
  if (!existsSync(`${OUT}.json`)) return null;
  const before = JSON.parse(readFileSync(`${OUT}.json`, 'utf8')) as Report;
  return { ...before, results: before.results.filter((r) => !remeasured.includes(candidateOf(r))) };
}

const pct = (x: number | null | undefined) => (x === null || x === undefined ? '–' : `${(x * 100).toFixed(2)} %`);

/** One cell: IID, the examples to 97 % and the default run's end; by class, its end and its second epoch's range. */
function cell(r: AccuracyResult | undefined, s: Setting): string {
  if (!r) return 'not run';
  if (r.error) return `error: ${r.error.slice(0, 120)}`;
  // Rows measured since 2026-11-29 also say what a device sent on its links per example the class trained.
  const bytes = typeof r.bytesPerExample === 'number' ? `; ${Math.round(r.bytesPerExample).toLocaleString('en')} B/example` : '';
  const end = `${pct(r.defaultRun?.accuracy)}${bytes}`;
  if (s.data !== SERVER_DATA) {
    const second = r.points.filter((p) => p.epoch >= 1 && p.examples <= (r.defaultRun?.examples ?? Infinity)).map((p) => p.full ?? p.screen);
    return second.length > 0 ? `${end} (${pct(Math.min(...second))}–${pct(Math.max(...second))})` : end;
  }
  const crossed = r.crossed ? `${r.crossed.examples.toLocaleString('en')} examples` : `not in ${s.maxEpochs} epochs (${pct(r.end.accuracy)})`;
  return `${crossed}; ${end}`;
}

function markdown(report: Report): string {
  const find = (c: string, s: Setting) => report.results.find((r) => r.plan.id === `${c}@${s.id}`);
  return [
    '# Local steps: which way learns as well as every step',
    '',
    `Measured ${report.generatedAt} by \`npm run bench:local-steps\` on commit ${report.commit} (${report.machine.cpu}, ${report.machine.cores} cores, kernel ${report.machine.kernel}, Node ${report.versions.node}, tfjs ${report.versions.tfjs}).`,
    ...(report.added ?? []).map((a) => `Rows of ${a.candidates.join(', ')}: measured ${a.generatedAt} by \`npm run bench:local-steps -- --only ${a.candidates.join(',')}\` on commit ${a.commit} (kernel ${a.machine.kernel}, Node ${a.versions.node}, tfjs ${a.versions.tfjs}).`),
    'In-process with the lab\'s accuracy runner (lab/local-steps-accuracy.ts): N replicas of the product\'s Trainer over the in-memory ring, the MLP on the product\'s defaults (32 examples a worker, a 50-step warm-up, Nesterov outside at 0.7 with momentum 0.9, fp16 rounds; own data masked, fp32), the official 60,000 training digits, scored on the official 10,000 test digits. One seed (1234) each: a by-class run swings by points from round to round, so its range is given.',
    '',
    `IID: the examples to ${THRESHOLD * 100} % (at most 3 epochs); the accuracy after the default ${report.settings.defaultEpochs} epochs. By class: the accuracy after the default run, and the lowest and highest points of its second epoch.`,
    '',
    `| candidate | ${SETTINGS.map((s) => (s.data === SERVER_DATA ? `IID, N = ${s.n}` : `own data by class, N = ${s.n}`)).join(' | ')} |`,
    `|---|${SETTINGS.map(() => '---').join('|')}|`,
    ...report.candidates.map((c) => `| ${c.what} | ${SETTINGS.map((s) => cell(find(c.id, s), s)).join(' | ')} |`),
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { only: { type: 'string' }, workers: { type: 'string', default: '2' } } });
  const only = values.only?.split(',');
  const candidates = CANDIDATES.filter((c) => !only || only.includes(c.id));
  const plans = candidates.flatMap((c) => SETTINGS.filter((s) => c.on.includes(s.id)).map((s) => planOf(c, s)));
  const started = provenance();
  const before = only ? earlier(only) : null;
  const measured = new Set([...(before?.results ?? []).map(candidateOf), ...candidates.map((c) => c.id)]);
  const report: Report = {
    ...(before ?? started),
    settings: { threshold: THRESHOLD, defaultEpochs: RECIPE_DEFAULTS.epochs, settings: SETTINGS },
    candidates: CANDIDATES.filter((c) => measured.has(c.id)).map(({ id, what, variant }) => ({ id, what, variant })),
    results: before?.results ?? [],
    ...(before ? { added: [...remaining(before.added ?? [], only!), { ...started, candidates: candidates.map((c) => c.id) }] } : {}),
  };
  const write = () => {
    writeFileSync(`${OUT}.json`, `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(`${OUT}.md`, markdown(report));
  };
  const pool = new AccuracyPool(Number(values.workers));
  pool.onResult((r) => {
    report.results.push(r);
    write();
  });
  pool.add(plans);
  await pool.wait(plans.map((p) => p.id));
  pool.stop();
  for (const e of pool.errors) process.stderr.write(`${e.what}: ${e.message}\n`);
  write();
  process.stdout.write(markdown(report));
  if (pool.errors.length > 0) process.exitCode = 1;
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:local-steps: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
