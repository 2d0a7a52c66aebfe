/**
 * The secure-aggregation lab's report (`npm run lab -- --section secagg`, lab/secagg-rows.ts):
 * each mode's windows pooled per class size, the targets, and the markdown of
 * bench/lab-secagg.md. Pure: rows in, summary, targets and text out.
 */
import { defaultConfigOf } from '../shared/tasks/start-config';
import { LAB_WORKLOADS, labWorkloadOf } from '../shared/tasks/lab-workloads';
import { median } from '../shared/training/straggler';
import type { Target } from './report-types';
import type { DeviceProfile } from './cpu-caps';
import { ACCURACY_DATASET, ACCURACY_GOAL_POINTS, ACCURACY_N, SECAGG_MODES, STEP_OVERHEAD_GOAL, WARMUP_STEPS, type SecaggAccuracyRow, type SecaggMode, type SecaggReport, type SecaggStepRow } from './secagg-shapes';

/** One line of the table: every window of one mode at one class size, pooled. */
export interface SecaggSummary {
  n: number;
  mode: SecaggMode;
  device: DeviceProfile;
  /** Median of every step interval of the mode's windows at this size, ms; the windows' own medians beside it. */
  stepMs: number;
  windowMedians: number[];
  /** Mean over the windows of the measured bytes a device sent per step; the payload the buffer implies. */
  wireBytesPerStep: number;
  payloadBytesPerStep: number;
  algorithms: string[];
  /** Every window counted (no member lost, the machine not saturated). */
  counts: boolean;
}

export function summarize(rows: SecaggStepRow[]): SecaggSummary[] {
  const out: SecaggSummary[] = [];
  for (const n of [...new Set(rows.map((r) => r.n))]) {
    for (const mode of SECAGG_MODES) {
      const mine = rows.filter((r) => r.n === n && r.mode === mode && r.intervalsMs.length > 0);
      if (mine.length === 0) continue;
      const pooled = mine.flatMap((r) => r.intervalsMs).sort((a, b) => a - b);
      out.push({
        n,
        mode,
        device: mine[0]!.device,
        stepMs: median(pooled),
        windowMedians: mine.map((r) => Math.round(r.stepMs)),
        wireBytesPerStep: mine.reduce((s, r) => s + r.wireBytesPerStep, 0) / mine.length,
        payloadBytesPerStep: mine[0]!.payloadBytesPerStep,
        algorithms: [...new Set(mine.map((r) => r.algorithm))],
        counts: mine.every((r) => r.counts),
      });
    }
  }
  return out;
}

/** The three targets: the secure step against fp32's at N = 8 and at the largest size, and the one-epoch accuracies. */
export function secaggTargets(summary: SecaggSummary[], accuracy: SecaggAccuracyRow[], largest: number): Target[] {
  const step = (n: number): Target => {
    const secure = summary.find((s) => s.n === n && s.mode === 'secure');
    const fp32 = summary.find((s) => s.n === n && s.mode === 'fp32');
    const value = secure && fp32 ? secure.stepMs / fp32.stepMs : null;
    const counts = !!secure?.counts && !!fp32?.counts;
    return {
      id: `secagg-step-overhead-n${n}`,
      goal: `the secure step ≤ ${STEP_OVERHEAD_GOAL} × the fp32 step at N = ${n} on Wi-Fi`,
      value,
      met: value !== null && counts && value <= STEP_OVERHEAD_GOAL,
      detail:
        secure && fp32
          ? `${(secure.stepMs / 1000).toFixed(3)} s against ${(fp32.stepMs / 1000).toFixed(3)} s a step (medians of every window's steps; windows ${secure.windowMedians.join(', ')} and ${fp32.windowMedians.join(', ')} ms), ${secure.device}s, ${[...new Set([...secure.algorithms, ...fp32.algorithms])].join('/')}${counts ? '' : '; a window did not count (a member lost or the machine saturated)'}`
          : `not measured at N = ${n}`,
    };
  };
  const secure = accuracy.find((a) => a.mode === 'secure');
  const fp32 = accuracy.find((a) => a.mode === 'fp32');
  const diff = secure?.accuracy != null && fp32?.accuracy != null ? (secure.accuracy - fp32.accuracy) * 100 : null;
  return [
    step(8),
    ...(largest !== 8 ? [step(largest)] : []),
    {
      id: 'secagg-accuracy',
      goal: `one epoch: the secure run's final test accuracy within ${ACCURACY_GOAL_POINTS} points of fp32's (value: secure − fp32, points)`,
      value: diff,
      met: diff !== null && Math.abs(diff) <= ACCURACY_GOAL_POINTS && !secure?.lost && !fp32?.lost,
      detail:
        secure && fp32
          ? `N = ${ACCURACY_N}, one epoch of ${ACCURACY_DATASET} (${secure.steps} steps): secure ${pct(secure.accuracy)}, fp32 ${pct(fp32.accuracy)} on its ${ACCURACY_DATASET} test digits`
          : 'not measured',
    },
  ];
}

const pct = (x: number | null): string => (x === null ? '–' : `${(x * 100).toFixed(2)} %`);
const kB = (b: number): string => `${(b / 1e3).toFixed(1)}`;
const s3 = (ms: number): string => (ms / 1000).toFixed(3);

export function secaggMarkdown(r: SecaggReport): string {
  const summary = summarize(r.steps);
  const fp32Of = (n: number) => summary.find((x) => x.n === n && x.mode === 'fp32');
  return [
    '# Secure aggregation in the lab: what it costs on Wi-Fi',
    '',
    `Measured ${r.generatedAt} by \`npm run lab -- --section secagg\` in ${r.minutes.toFixed(1)} minutes, on one ${r.machine.cores}-core machine (kernel ${r.machine.kernel}, Node ${r.machine.node}, netem ${r.netem ? 'present' : 'absent: rates only, no added delay'}): Node workers, each in its own network namespace on the emulated ${r.model} (${JSON.stringify(r.params)}; no hub, as the server runs by default) under a CPU cap (${r.sizes.map((s) => `N = ${s.n}: ${s.device}s at ${s.cores} core`).join('; ')}), train the ${labWorkloadOf(r.net).name} on the product's defaults. Every mode of one class size runs on the same server and workers, one run after another, each timed after its own warm-up of ${WARMUP_STEPS} steps.`,
    '',
    '| target | goal | value | met |',
    '|---|---|---|---|',
    ...r.targets.map((t) => `| ${t.id} | ${t.goal} | ${t.value === null ? '–' : t.value.toFixed(2)} | ${t.met ? 'yes' : 'no'} |`),
    '',
    '## The step and the bytes',
    '',
    'Step: the median of every step interval of the mode\'s windows (the chief\'s reports on the server\'s clock); each window\'s own median beside it. Bytes: measured, what a device\'s interface sent per step (all of it: framing, acknowledgements and signaling included), the mean over the devices and windows; the payload is what the buffer implies (4 B a parameter for fp32, 2 for fp16, 4 plus one 4 B check word for secure, times 2(N−1)/N for the ring and halving-doubling).',
    '',
    '| N | devices | mode | algorithm | step (s) | windows (s) | × fp32 | sent per step, measured (kB) | payload (kB) | counts |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...summary.map((s) => {
      const base = fp32Of(s.n);
      return `| ${s.n} | ${s.device} | ${s.mode} | ${s.algorithms.join(', ')} | ${s3(s.stepMs)} | ${s.windowMedians.map(s3).join(', ')} | ${base ? (s.stepMs / base.stepMs).toFixed(2) : '–'} | ${kB(s.wireBytesPerStep)} | ${kB(s.payloadBytesPerStep)} | ${s.counts ? 'yes' : 'no'} |`;
    }),
    '',
    '## One epoch: test accuracy',
    '',
    `One epoch of ${ACCURACY_DATASET} (8,000 training digits; the test accuracy on its 2,000 test digits) at N = ${ACCURACY_N}, with \`balanceShares\` off and seed ${r.accuracy[0]?.config.seed ?? '–'}: around an epoch's end a worker's prefetch can ask the data service for one example twice (it is in both epochs' permutations), the service refuses, and that worker's run fails. With equal shares every rank's plan is known in advance, and the run takes the first seed from the default ${defaultConfigOf(LAB_WORKLOADS.dense.task.id).seed} on whose plan no rank does so (\`cleanSeed\` in lab/secagg-rows.ts). The split of the global batch does not change its sum.`,
    '',
    '| N | mode | dataset | steps | final test accuracy | step (s) | run (s) |',
    '|---|---|---|---|---|---|---|',
    ...r.accuracy.map((a) => `| ${a.n} | ${a.mode} | ${a.dataset} | ${a.steps} | ${pct(a.accuracy)} | ${s3(a.stepMs)} | ${a.seconds.toFixed(0)} |`),
    '',
    '## Every window',
    '',
    'In run order. The chief\'s split is the mean over the window\'s steps its reports showed: compute (forward, backward, read-back and the crossing to its compute thread), the all-reduce (for secure: waiting for the masks, masking, the sum and unmasking) and apply.',
    '',
    '| N | mode | steps | step (s), median | quartiles (s) | chief: compute / all-reduce / apply (ms) | sent per step (kB) | machine busy | counts |',
    '|---|---|---|---|---|---|---|---|---|',
    ...r.steps.map((w) => {
      const t = w.timingMean;
      const split = t ? `${Math.round(t.computeMs + t.readbackMs + t.crossMs)} / ${Math.round(t.commMs)} / ${Math.round(t.applyMs)}` : '–';
      return `| ${w.n} | ${w.mode} | ${w.fromStep}–${w.toStep} | ${s3(w.stepMs)} | ${s3(w.stepMsQ1)}–${s3(w.stepMsQ3)} | ${split} | ${kB(w.wireBytesPerStep)} | ${(w.cpu.mean * 100).toFixed(0)} % | ${w.counts ? 'yes' : `no${w.lost ? `: ${w.lost.split(';')[0]}` : ': the machine saturated'}`} |`;
    }),
    ...(r.errors.length > 0 ? ['', '## Not measured', '', ...r.errors.map((e) => `- ${e.what}: ${e.message.split('\n')[0]}`)] : []),
    '',
  ].join('\n');
}
