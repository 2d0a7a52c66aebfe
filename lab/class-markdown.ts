/**
 * bench/lab-class.md (`npm run lab -- --section class`): the scaling table and where
 * a step's time goes, the time to the threshold, the mixed class and the joins, written out
 * from the class report that class-report.ts computes.
 */
import type { StepTimingReport } from '../shared/protocol';
import type { ClassReport, ClassSection } from './report-types';
import type { ModelName } from './network-models';
import type { TrainingNet } from './training-rows';
import { duration } from './class-report';
import { UNRECORDED_CFS_PERIOD_US } from './cpu-caps';
import { LAB_DATA_WORDS, LAB_WORKLOADS, labWorkloadOf } from '../shared/tasks/lab-workloads';

const f = (v: number | null | undefined, digits = 1): string => (v !== null && v !== undefined && Number.isFinite(v) ? v.toFixed(digits) : '–');
const s = (ms: number): string => `${(ms / 1000).toFixed(0)} s`;

/** bench/lab-class.md. */
export function classMarkdown(c: ClassReport): string[] {
  const lines: string[] = [];
  lines.push(`# The class (\`npm run lab -- --section class${c.quick ? ' --quick' : ''}\`)`, '');
  lines.push(
    `Measured on ${c.generatedAt.slice(0, 10)}, ${c.machine.cores} cores, in ${f(c.minutes)} minutes${c.quick ? ' (**quick**: a smoke test, not the measurement)' : ''}. Real Node workers (tfjs CPU backend) capped as \`laptop\`s (0.2 core), the real server with its hub for N > 1, \`allreduce: 'auto'\`, 32 examples per worker. The largest class's caps, ${f(c.cpuBudget.capsCores, 2)} cores, plus the ${c.cpuBudget.reservedCores} core the lab keeps for the server and its hub, ${c.cpuBudget.fits ? 'fit' : '**do not fit**'} the machine's ${c.cpuBudget.cores}.`,
  );
  const took = Object.entries(c.sectionMinutes).map(([k, v]) => `${k} ${f(v)} min`);
  if (took.length > 0) lines.push('', `Sections: ${took.join(', ')}.`);
  const periods = Object.keys(c.sectionMinutes).map((k) => `${k} ${f((c.sectionCfsPeriodUs?.[k as ClassSection] ?? UNRECORDED_CFS_PERIOD_US) / 1000, 0)} ms`);
  if (periods.length > 0) lines.push('', `The CPU caps' CFS period (a device runs its quota, then waits out the period; lab/cpu-caps.ts): ${periods.join(', ')}.`);
  for (const e of c.errors) lines.push('', `**A row of ${e.section} could not be measured:** \`${e.code}\`: ${e.message.split('\n')[0]}`);
  if (c.scaling) {
    const t = c.scaling.table;
    const ns = [...new Set(t.map((x) => x.n))].sort((a, b) => a - b);
    lines.push('', '### Scaling: examples/s against N laptops', '');
    lines.push('Each cell: examples/s, the mean step in ms, and in brackets the efficiency, examples/s(N) ÷ (N × examples/s(1)). One device sends nothing, so its row stands for every network. ✗: the row did not count (the machine was saturated, or the class lost a member).', '');
    lines.push(`| net | network | ${ns.map((n) => `N = ${n}`).join(' | ')} |`, `|---|---|${ns.map(() => '---|').join('')}`);
    const keys = [...new Set(t.filter((x) => x.n > 1).map((x) => `${x.net}|${x.model}`))];
    for (const key of keys) {
      const [net, model] = key.split('|') as [TrainingNet, ModelName];
      const cell = (n: number) => {
        const e = t.find((x) => x.net === net && x.n === n && (n === 1 || x.model === model));
        if (!e) return '–';
        return `${f(e.examplesPerSec)} · ${f(e.stepMs, 0)} ms${e.efficiency !== null ? ` (${f(e.efficiency, 2)})` : ''}${e.n > 1 ? ` ${e.algorithm}` : ''}${e.counts ? '' : ' ✗'}`;
      };
      lines.push(`| ${net} | ${model} | ${ns.map(cell).join(' | ')} |`);
    }
    lines.push('', 'Where the time goes (the chief\'s step, averaged over the window; the bound is what the network allows the gradient\'s all-reduce, lab/bounds.ts):', '');
    lines.push('| net | network | N | step ms | compute | read-back | all-reduce (bound) | apply | data | rest |', '|---|---|---|---|---|---|---|---|---|---|');
    for (const sp of c.scaling.splits) {
      const x = sp.split;
      if (!x) {
        lines.push(`| ${sp.net} | ${sp.n === 1 ? '–' : sp.model} | ${sp.n} | no timing | | | | | | |`);
        continue;
      }
      lines.push(
        `| ${sp.net} | ${sp.n === 1 ? '–' : sp.model} | ${sp.n} | ${f(x.stepMs, 0)} | ${f(x.computeMs, 0)} | ${f(x.readbackMs, 1)} | ${f(x.allReduceMs, 0)}${x.allReduceBoundMs !== null ? ` (${f(x.allReduceBoundMs, 0)})` : ''} | ${f(x.applyMs, 0)} | ${f(x.dataMs, 0)} | ${f(x.otherMs, 0)} |`,
      );
    }
    const dense = c.scaling.splits.filter((x) => x.net === LAB_WORKLOADS.dense.model && x.n > 1);
    if (dense.length > 0) lines.push('', ...dense.map((x) => `- ${x.sentence}`));
  }
  if (c.timeToAccuracy) {
    const tta = c.timeToAccuracy;
    const pct = `${Math.round(tta.threshold * 1000) / 10} %`;
    lines.push('', `### Time to ${pct} test accuracy`, '');
    if (tta.composed) {
      lines.push(
        `Composed: the steps to ${pct} come from the product's Trainer in-process on the global batch (the same sums as N devices; lab/local-steps-accuracy.ts), scored on ${LAB_DATA_WORDS.fullTest} every few steps; a step takes what the scaling row of the same network, net and N measured, and the start what that row took from Start to its window. One direct run on the lab checks it (below).`,
        '',
        '| N | global batch | scaleLearningRate | steps to it | examples | accuracy there | step (ms) | Start to window (ms) | composed | |',
        '|---|---|---|---|---|---|---|---|---|---|',
      );
      for (const r of tta.composed) {
        const reached = r.steps !== null ? `${r.steps}` : r.stoppedAt ? `not within ${r.stoppedAt.examples.toLocaleString('en-US')} examples (${f((r.stoppedAt.accuracy ?? 0) * 100, 2)} % there)` : 'no in-process run';
        lines.push(`| ${r.n} | ${r.globalBatch} | ${r.scaleLearningRate ? 'on' : 'off'} | ${reached} | ${r.examples ?? '–'} | ${r.accuracy !== null ? `${f(r.accuracy * 100, 2)} %` : '–'} | ${f(r.stepMs, 0)} | ${f(r.startToFirstMs, 0)} | ${r.composedMs !== null ? `**${s(r.composedMs)}**` : '–'} | ${r.counts ? '' : '✗'} |`);
      }
      if (tta.check) lines.push('', `The direct run, N = ${tta.check.n} ${tta.check.scaleLearningRate ? 'with' : 'without'} scaleLearningRate: ${tta.check.directMs !== null ? s(tta.check.directMs) : 'did not reach it'} against ${tta.check.composedMs !== null ? s(tta.check.composedMs) : 'nothing'} composed${tta.check.ratio !== null ? ` (${f(tta.check.ratio, 2)}×)` : ''}.`);
    }
    lines.push(
      '',
      `The direct run: the chief checkpoints every few steps; each checkpoint is scored on ${LAB_DATA_WORDS.fullTest} (10,000 digits) by the harness at idle priority, outside the caps: first on every 10th digit, then, when that is within ${Math.round(tta.screenMargin * 100)} points of ${pct}, on all 10,000. The time is from Start to the capture of the first checkpoint at ${pct} (in brackets the checkpoint before it, between which the class crossed). A row stops at ${pct} or after ${duration(tta.budgetMs)}.`,
      '',
    );
    lines.push('| net | N | global batch | scaleLearningRate | rate | time | step | examples | examples/s | stopped by | run\'s own epoch test | |', '|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const r of [...tta.rows].sort((a, b) => a.n - b.n || Number(a.scaleLearningRate) - Number(b.scaleLearningRate))) {
      const scaling = r.sameWithScaling ? 'either (the same run: global batch = reference batch)' : r.scaleLearningRate ? 'on' : 'off';
      const time = r.reached ? `**${s(r.reached.ms)}** (${s(r.reached.previousMs)}–)` : `not reached within ${duration(r.budgetMs)}`;
      const best = r.points.reduce<number | null>((b, p) => (p.accuracy !== null && (b === null || p.accuracy > b) ? p.accuracy : b), null);
      lines.push(
        `| ${r.net} | ${r.n} | ${r.globalBatch} | ${scaling} | ${r.learningRate} → ${f(r.targetRate, 4)} | ${time} | ${r.reached?.step ?? '–'} | ${r.examplesToThreshold ?? '–'} | ${f(r.examplesPerSec)} | ${r.stoppedBy}${r.reached ? '' : best !== null ? ` (best scored ${f(best * 100, 2)} %)` : ''} | ${r.runEvaluations.map((e) => `${f(e.accuracy * 100, 2)} % at step ${e.step}`).join(', ') || '–'} | ${r.counts ? '' : '✗'} |`,
      );
    }
  }
  if (c.mixed) {
    const m = c.mixed;
    lines.push('', `### A mixed class: three laptops and a phone (wired-lab, ${labWorkloadOf(m.rows[0]?.net ?? LAB_WORKLOADS.conv.model).name})`, '');
    lines.push(
      'Each rank\'s step, averaged over the window (ms): compute (its examples\' forward and backward) / all-reduce (waiting for the slowest, and its own part of the transfer) / apply (the optimizer update).',
      '',
    );
    lines.push('| class | examples/s | step ms | shares by rank | compute / all-reduce / apply by rank | |', '|---|---|---|---|---|---|');
    const names = ['4 laptops', '3 laptops + phone, equal shares', '3 laptops + phone, balanceShares'];
    const split = (t: StepTimingReport | null) => (t ? `${f(t.computeMs, 0)} / ${f(t.commMs, 0)} / ${f(t.applyMs, 0)}` : '–');
    m.rows.forEach((r, i) =>
      lines.push(`| ${names[i] ?? r.devices.join('+')} | ${f(r.examplesPerSec)} | ${f(r.stepMs, 0)} | ${r.batchShares.join(' / ')} | ${r.timingByRank?.map(split).join('; ') ?? '–'} | ${r.counts ? '' : '✗'} |`),
    );
    lines.push('', `\`mixed-class-phone\`: ${f(m.target.value, 2)} (${m.target.met ? 'met' : '**not met**'}): ${m.target.detail}.`);
  }
  if (c.joins && c.joins.rows.length > 0) {
    lines.push('', '### Joins: the class\'s pause and the joiner\'s way into lock-step', '');
    lines.push(
      `N − 1 laptops train the ${labWorkloadOf(c.joins.rows[0]!.net).name}; one more laptop (a Node worker) joins mid-run, is measured, leaves, and the next joins. The figures are the server's join telemetry (\`joins\` in GET /api/rooms/:room): pauseMs, the chief's extra stall at the switch; lockStepMs, the joiner's time from its admission to its first step in lock-step. Beside them, the harness's own view: the largest excess of a chief report interval over its median step, from the admission until the joiner steps with the class (server clock), and the joiner's first report past its admission step (polled every 250 ms). The server runs on its default liveness: the workers compute in a thread of their own.`,
      '',
    );
    lines.push('| network | N | join | generation | at step | pause | lock-step | observed stall | observed lock-step | |', '|---|---|---|---|---|---|---|---|---|---|');
    for (const r of c.joins.rows) {
      if (r.error !== null) lines.push(`| ${r.model} | ${r.n} | the row ended early: ${r.error.split('\n')[0]!.replace(/\|/g, '/')} | | | | | | | ✗ |`);
      for (const m of r.measurements) {
        const rec = m.record;
        lines.push(
          `| ${r.model} | ${r.n} | ${m.repetition} (${m.name}) | ${rec?.generation ?? '–'} | ${rec?.atStep ?? '–'} | ${rec?.pauseMs != null ? `${f(rec.pauseMs, 0)} ms` : 'not measured'} | ${rec?.lockStepMs != null ? `${f(rec.lockStepMs, 0)} ms` : 'not measured'} | ${m.observedStallMs !== null ? `${f(m.observedStallMs, 0)} ms` : '–'} | ${m.observedLockStepMs !== null ? `${f(m.observedLockStepMs, 0)} ms` : '–'} | ${m.error ?? (r.counts ? '' : '✗')} |`,
        );
      }
    }
  }
  return lines;
}
