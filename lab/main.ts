/**
 * `npm run lab`: the classroom lab. Checks the machine, removes leftovers of a crashed run,
 * then builds each network model in turn, validates it with TCP flows, prints a table and
 * writes bench/lab.json.
 *
 *   npm run lab -- [--n 4] [--quick] [--models wifi,wired-lab,internet]
 *
 * Exits 0 when everything could be measured and every model does what its profile says;
 * otherwise non-zero, with the coded error (ERR_LAB_NEEDS_ROOT, ERR_LAB_NO_NETNS,
 * ERR_LAB_MODEL_INVALID, …) on stderr.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { LabError } from './lab-error';
import { checkPreconditions } from './preconditions';
import { cleanupLab, installTeardownHandlers, withLab } from './netlab';
import { MAX_WORKERS, MODEL_NAMES, profileByName, type ModelProfile } from './network-models';
import { assertModelValid, validateModel, DEFAULT_FLOW_SECONDS, type ModelValidation } from './validate-models';
import { progress } from './progress';

const USAGE = 'usage: npm run lab -- [--n 4] [--quick] [--models wifi,wired-lab,internet]';
const DEFAULT_WORKERS = 4;
const QUICK_FLOW_SECONDS = 1;
const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;
export const LAB_REPORT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'bench', 'lab.json');

/**
 * bench/lab.json. Sections beyond `models` (all-reduce rows, targets) are added by the row
 * runners that produce them; readers must ignore keys they do not know.
 */
export interface LabReport {
  generatedAt: string;
  machine: { cores: number; kernel: string };
  /** Whether the kernel had netem: without it no model adds delay. */
  netem: boolean;
  workers: number;
  models: Array<Pick<ModelValidation, 'name' | 'params' | 'measured' | 'expected' | 'ok' | 'delayMs'>>;
  [section: string]: unknown;
}

function parse(): { n: number; quick: boolean; models: ModelProfile[] } {
  const { values } = parseArgs({ options: { n: { type: 'string' }, quick: { type: 'boolean' }, models: { type: 'string' } }, strict: true });
  const n = values.n === undefined ? DEFAULT_WORKERS : Number(values.n);
  if (!Number.isInteger(n) || n < 2 || n > MAX_WORKERS) throw new LabError('ERR_LAB_USAGE', `--n must be 2 to ${MAX_WORKERS}`);
  const models = (values.models ?? MODEL_NAMES.join(',')).split(',').filter(Boolean).map(profileByName);
  return { n, quick: values.quick ?? false, models };
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

async function main(): Promise<void> {
  let args;
  try {
    args = parse();
  } catch (err) {
    console.error(`webring lab: ${err instanceof LabError ? `${err.code}: ` : ''}${(err as Error).message}\n${USAGE}`);
    process.exit(EXIT_USAGE);
  }
  const capabilities = checkPreconditions();
  installTeardownHandlers();
  const leftovers = cleanupLab();
  if (leftovers.length > 0) progress(`removed leftovers of a crashed run: ${leftovers.join(', ')}`);
  progress(`netem ${capabilities.netem ? 'present: profiles add their delays' : 'missing in this kernel: rates only, no added delay'}`);
  const seconds = args.quick ? QUICK_FLOW_SECONDS : DEFAULT_FLOW_SECONDS;
  const results: ModelValidation[] = [];
  for (const profile of args.models) {
    results.push(await withLab(profile, args.n, (lab) => validateModel(lab, seconds), capabilities));
  }
  console.log(table(results));
  const report: LabReport = {
    generatedAt: new Date().toISOString(),
    machine: { cores: os.availableParallelism(), kernel: os.release() },
    netem: capabilities.netem,
    workers: args.n,
    models: results.map(({ name, params, measured, expected, ok, delayMs }) => ({ name, params, measured, expected, ok, delayMs })),
  };
  mkdirSync(path.dirname(LAB_REPORT), { recursive: true });
  writeFileSync(LAB_REPORT, `${JSON.stringify(report, null, 2)}\n`);
  progress(`wrote ${path.relative(process.cwd(), LAB_REPORT)}`);
  for (const v of results) assertModelValid(v);
}

main().catch((err: unknown) => {
  if (err instanceof LabError) console.error(`webring lab: ${err.code}: ${err.message}`);
  else console.error('webring lab: failed:', err);
  process.exit(EXIT_FAILURE);
});
