/**
 * The names task against its baseline, in one run: the n-gram count models' held-out nats
 * per character (shared/tasks/names/ngram-baseline.ts), then the default recipe trained by
 * 1 and by 3 Node workers (separate processes, the CPU backend) through a real signaling
 * server and its data service, with the same global batch, and the time each takes to reach
 * 2.10 (the 4-gram's neighbourhood) and 2.00 nats per character held out.
 *
 *   npm run bench:names [-- --epochs 6] [--workers 1,3]
 *
 * Held out is scored at every epoch's end, so a crossing's time is the end of the epoch that
 * crossed. It writes bench/names.json and bench/names.md: when, the commit, Node's and
 * tfjs's versions, the settings, and the regime: processes sharing this machine's cores on
 * loopback, so CPU cost, not a link.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { version as tfjsVersions } from '@tensorflow/tfjs';
import { AS_TEACHER, codeFor, startTestServer } from '../support/server';
import { createLogger } from '../../signaling-server/logger';
import type { RoomMetrics, RoomStatus, StartConfig } from '../../shared/protocol';
import { defaultConfigOf } from '../../shared/tasks/start-config';
import { NAME_FILES, namesSplitOf } from '../../shared/tasks/names/datasets';
import { ngramBaselines } from '../../shared/tasks/names/ngram-baseline';
import { packageFilePath } from '../../signaling-server/data/datasets';
import { namesParameterCount } from '../../shared/tasks/names/names-models';

const { values } = parseArgs({ options: { epochs: { type: 'string' }, workers: { type: 'string', default: '1,3' } } });
const recipe = defaultConfigOf('names');
const epochs = values.epochs ? Number(values.epochs) : recipe.epochs;
const classes = values.workers!.split(',').map(Number);
/** The recipe's global batch on three: every class trains the same steps on the same batches. */
const GLOBAL_BATCH = recipe.batchSizePerWorker * 3;
const TARGETS = [2.1, 2.0];
const POLL_MS = 250;

interface ClassRun {
  workers: number;
  batchSizePerWorker: number;
  /** Held out after each epoch, and when (s since Start). */
  epochs: Array<{ epoch: number; step: number; testLoss: number; atS: number }>;
  /** Seconds from Start to the first epoch at or below each target; null if never. */
  toTarget: Record<string, number | null>;
  wallS: number;
  meanStepMs: number;
}

async function trainClass(workers: number): Promise<ClassRun> {
  const room = `bench-names-${workers}`;
  const server = await startTestServer({ log: createLogger('warn') });
  const auth = AS_TEACHER.headers;
  const get = async <T>(path: string): Promise<T> => (await (await fetch(`${server.url}/api/rooms/${room}${path}`, { headers: auth })).json()) as T;
  const children: ChildProcess[] = [];
  for (let i = 0; i < workers; i++) {
    const child = spawn(process.execPath, ['--import', 'tsx', 'node-worker/main.ts', '--url', server.url, '--room', room, '--code', codeFor(room), '--name', `w${i}`, '--backend', 'cpu'], { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (d: Buffer) => process.stderr.write(`[w${i}] ${d.toString()}`));
    children.push(child);
  }
  try {
    while ((await get<RoomStatus>('')).members.length < workers) await new Promise((r) => setTimeout(r, POLL_MS));
    const config: Partial<StartConfig> = { task: 'names', batchSizePerWorker: GLOBAL_BATCH / workers, epochs, saveEverySteps: 1_000_000, resumeFrom: 'none' };
    const started = await fetch(`${server.url}/api/rooms/${room}/start`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(config) });
    if (!started.ok) throw new Error(`start: ${await started.text()}`);
    const t0 = performance.now();
    const seen: ClassRun['epochs'] = [];
    let last = await get<RoomStatus>('');
    while (last.state !== 'done' || seen.length < epochs) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      last = await get<RoomStatus>('');
      if (last.lastError) throw new Error(`the run failed: ${last.lastError.code} ${last.lastError.message}`);
      const metrics = await get<RoomMetrics>('/metrics');
      for (const e of metrics.evaluations.slice(seen.length)) {
        seen.push({ epoch: e.epoch, step: e.step, testLoss: Number(e.testLoss.toFixed(4)), atS: Number(((performance.now() - t0) / 1000).toFixed(1)) });
        console.log(`  ${workers} worker(s): epoch ${e.epoch} held out ${e.testLoss.toFixed(4)} nats/char at ${seen.at(-1)!.atS} s`);
      }
    }
    const wallS = (performance.now() - t0) / 1000;
    const toTarget = Object.fromEntries(TARGETS.map((t) => [t.toFixed(2), seen.find((e) => e.testLoss <= t)?.atS ?? null]));
    return { workers, batchSizePerWorker: GLOBAL_BATCH / workers, epochs: seen, toTarget, wallS: Number(wallS.toFixed(1)), meanStepMs: Number(((wallS * 1000) / last.step).toFixed(1)) };
  } finally {
    for (const c of children) c.kill('SIGKILL');
    await server.close();
  }
}

// The code that runs is the code at the start: record its commit then, not when the run ends.
const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== '';
const split = namesSplitOf(NAME_FILES.map((file) => readFileSync(packageFilePath(file), 'utf8')));
const baselines = ngramBaselines(split.train, split.heldOut);
console.log(`baselines (add-0.1, held out): bigram ${baselines.bigram.toFixed(4)}, 4-gram ${baselines.fourgram.toFixed(4)} nats/char`);
const runs: ClassRun[] = [];
for (const workers of classes) runs.push(await trainClass(workers));

const report = {
  at: new Date().toISOString(),
  commit: dirty ? `${commit} with uncommitted changes` : commit,
  versions: { node: process.version, tfjs: tfjsVersions['tfjs-core'] },
  regime: `Node worker processes on the CPU backend through a real signaling server on loopback, sharing ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}): CPU cost, not a link`,
  settings: { ...recipe, epochs, globalBatch: GLOBAL_BATCH, parameters: namesParameterCount(), trainNames: split.train.length, heldOutNames: split.heldOut.length },
  baselines: { bigram: Number(baselines.bigram.toFixed(4)), fourgram: Number(baselines.fourgram.toFixed(4)) },
  runs,
};
writeFileSync('bench/names.json', `${JSON.stringify(report, null, 2)}\n`);
const fmt = (s: number | null) => (s === null ? 'not reached' : `${s} s`);
const md = [
  '# The names task against its baseline',
  '',
  `Measured ${report.at} on commit ${report.commit} (Node ${report.versions.node}, tfjs ${report.versions.tfjs}) by \`npm run bench:names\`.`,
  `Regime: ${report.regime}.`,
  `Settings: the task's default recipe (${report.settings.model}, ${report.settings.parameters.toLocaleString('en')} parameters; Adam at ${recipe.learningRate} after ${recipe.warmupSteps} warm-up steps; ${epochs} epochs), global batch ${GLOBAL_BATCH} in every class; ${report.settings.trainNames} training and ${report.settings.heldOutNames} held-out names.`,
  '',
  '| model | held out (nats per character) |',
  '|---|---|',
  `| bigram, add-0.1 | ${report.baselines.bigram} |`,
  `| 4-gram, add-0.1 | ${report.baselines.fourgram} |`,
  ...runs.map((r) => `| ${recipe.model}, ${r.workers} worker(s), after ${epochs} epochs | ${r.epochs.at(-1)?.testLoss.toFixed(4) ?? '-'} (best ${Math.min(...r.epochs.map((e) => e.testLoss)).toFixed(4)}) |`),
  '',
  '| workers | batch each | to 2.10 | to 2.00 | run | mean step | held out per epoch |',
  '|---|---|---|---|---|---|---|',
  ...runs.map((r) => `| ${r.workers} | ${r.batchSizePerWorker} | ${fmt(r.toTarget['2.10']!)} | ${fmt(r.toTarget['2.00']!)} | ${r.wallS} s | ${r.meanStepMs} ms | ${r.epochs.map((e) => e.testLoss.toFixed(4)).join(', ')} |`),
  '',
  'A crossing is timed at the end of the epoch whose held-out score crossed (held out is scored once per epoch).',
  '',
].join('\n');
writeFileSync('bench/names.md', md);
console.log(md);
process.exit(0);
