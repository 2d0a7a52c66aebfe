/**
 * bench/lab-local-steps.md from the local-steps lab's report (lab/local-steps-report.ts):
 * the targets, the composed times with their regimes, the crossover, non-IID and what was
 * not measured. Pure: the report in, text out.
 */
import { SERVER_DATA, classesOf, isEveryStep } from './local-steps-protocol';
import { LAB_WORKLOADS } from '../shared/tasks/lab-workloads';
import { composeMs, hOf, LOWER_THRESHOLDS, minutes, NON_IID_LITERATURE, nonIid, nonIidSlowdowns, pct, summarize, type LocalStepsReport } from './local-steps-report';
import { roundsAt } from './local-steps-check';
import { crossover, measuredKappa, measuredQ, type CrossoverLine, type StepSplit } from './local-steps-crossover';

const s2 = (ms: number | null | undefined): string => (ms == null ? '–' : (ms / 1000).toFixed(2));
const kb = (b: number | null | undefined): string => (b == null ? '–' : (b / 1e3).toFixed(1));
const mb = (b: number | null | undefined): string => (b == null ? '–' : (b / 1e6).toFixed(0));

export interface MarkdownExtras {
  /** Step splits from elsewhere (bench/lab-class.json's scaling rows) for the crossover. */
  otherSplits: StepSplit[];
}

export function localStepsMarkdown(r: LocalStepsReport, extras: MarkdownExtras = { otherSplits: [] }): string {
  const s = summarize(r);
  const lines: string[] = [];
  const th = `${(r.threshold * 100).toFixed(0)} %`;
  lines.push(
    '# Local steps against every-step sync in the lab',
    '',
    `Measured ${r.generatedAt} by \`npm run lab -- --section local-steps${(r.plan as { name?: string }).name === 'quick' ? ' --quick' : ''}\` in ${r.minutes.toFixed(1)} minutes, on one ${r.machine.cores}-core machine (kernel ${r.machine.kernel}, Node ${r.machine.node}, CFS period ${r.cfsPeriodUs / 1000} ms, netem ${r.netem ? 'present: school-uplink adds its 20 ms each way' : 'absent: rates only, no added delay, so school-uplink has no 20 ms of delay'}). The ${LAB_WORKLOADS.dense.name} on the product's defaults (Adam 0.003 after a 50-step warm-up, 32 examples a worker, balanced shares, \`allreduce: 'auto'\`, the server without a hub; local steps: Nesterov at 0.7 with momentum 0.9, rounds in fp16), only \`sync\` and \`localSteps\` changed (and, for the compressed rows, \`powerSgdRank\` and \`sumWordBits\`). Commit and versions: bench/lab.md.`,
    '',
    '**How the times are made.** Time to ' + th + ' is **composed from measured parts**, not one stopwatch:',
    '',
    '- *seconds a turn* (a step, or a round of H local steps) are measured on the emulated network: N capped Node workers in their own namespaces, the real server, each way of summing timed after its warm-up (past step 8 and its links measured) over a few turns on the server\'s clock. A way not timed takes the line through the timed local-steps rounds (H × local step + one all-reduce), marked *fit*;',
    '- *turns to ' + th + '* are measured in-process with the same Trainer over the in-memory ring (lab/local-steps-accuracy.ts), on the official 60,000 training digits, scored on the official 10,000 test digits as it goes (a 2,000-digit screen, all 10,000 within half a point of the threshold). Every step runs as one Trainer on the global batch (test/unit/equivalence.test.ts proves it equal to N ring workers); local steps run N replicas. Accuracy per example does not depend on the network;',
    '- time = the warm-up\'s excess over steady turns (measured) + steps × the local step + rounds × the round\'s all-reduce. The end-of-epoch evaluation a real run makes is not in it.',
    '',
    `Each run trains at least the default run (${(r.plan as { accuracy?: { defaultEpochs?: number } }).accuracy?.defaultEpochs ?? 2} epochs, whose end gives the final accuracy) and on to its first crossing of ${th}, at most ${(r.plan as { accuracy?: { maxEpochs?: number } }).accuracy?.maxEpochs ?? '?'} epochs.`,
    '',
    '| target | goal | value | met |',
    '|---|---|---|---|',
    ...r.targets.map((t) => `| ${t.id} | ${t.goal} | ${t.value === null ? '–' : t.value.toFixed(2)} | ${t.met ? 'yes' : 'no'} |`),
    '',
    ...r.targets.map((t) => `- \`${t.id}\`: ${t.detail}`),
    '',
    '## Time to ' + th + ', bytes, final accuracy',
    '',
    `Turn: measured (or fit); local step and all-reduce: the model the time is composed with. Examples, steps and rounds to ${th}: in-process, the first scored point at ${th} on all 10,000 digits (the one before it brackets the crossing). Time to ${LOWER_THRESHOLDS.map((t) => `${(t * 100).toFixed(0)} %`).join(' and ')}: composed the same way to the first point at it (on the 2,000-digit screen below ${(LOWER_THRESHOLDS.at(-1)! * 100 + 0.5).toFixed(1)} %, so a few tenths of a point either way), for the runs that never reach ${th}. Bytes per example: measured, everything the class's interfaces sent in the window over the examples trained (framing, acknowledgements and signaling included); the product's own figure (bytesSentPerExample, the all-reduce's payload) beside it. Final accuracy: the default run's end, all 10,000 digits.`,
    '',
    `| network | N | sync | wire | turn (s) | local step / all-reduce (s) | examples to ${th} | steps / rounds | time to ${th} (composed) | ${LOWER_THRESHOLDS.map((t) => `time to ${(t * 100).toFixed(0)} %`).join(' | ')} | bytes per example, measured (product's) | MB sent to ${th} | final accuracy | counts |`,
    `|---|---|---|---|---|---|---|---|---|${LOWER_THRESHOLDS.map(() => '---|').join('')}---|---|---|---|`,
  );
  for (const row of s.rows) {
    const m = row.model;
    const a = row.accuracy;
    const c = a?.crossed ?? null;
    const turn = m ? `${s2(isEveryStep(row.variant) ? m.localStepMs + m.allReduceMs : (hOf(row.variant)! * m.localStepMs + m.allReduceMs))}${m.source === 'fit' ? ' (fit)' : ''}` : '–';
    const time = row.timeMs !== null ? `${minutes(row.timeMs)} (${minutes(row.timeBeforeMs)}–)` : row.timeAtEndMs !== null ? `not reached: below ${th} after ${minutes(row.timeAtEndMs)} (${a!.end.examples} examples)` : '–';
    lines.push(
      `| ${row.network} | ${row.n} | ${row.variant} | ${row.wire ?? '–'} | ${turn} | ${m ? `${s2(m.localStepMs)} / ${s2(m.allReduceMs)}` : '–'} | ${c ? c.examples.toLocaleString('en-US') : a ? `– (${a.stoppedBy})` : 'not run'} | ${c ? `${c.steps} / ${c.rounds}` : '–'} | ${time} | ${row.timeTo.map((x) => (x.ms === null ? (a ? 'not reached' : '–') : minutes(x.ms))).join(' | ')} | ${row.bytesPerExample === null ? '–' : row.bytesPerExample.toFixed(0)} (${row.reportedBytesPerExample === null ? '–' : row.reportedBytesPerExample.toFixed(0)}) | ${mb(row.bytesToThreshold)} | ${pct(row.finalAccuracy)} | ${row.counts ? 'yes' : 'no'} |`,
    );
  }
  if (r.direct) {
    const d = r.direct;
    const row = s.rows.find((x) => x.network === d.network && x.n === d.n && x.variant === d.variant);
    const m = row?.model ?? null;
    lines.push('', '## The composition checked: one class run directly on the lab', '');
    lines.push(
      `${d.network}, N = ${d.n} ${d.device}s, ${d.variant} (${d.wire}): trained on the lab from Start until a checkpoint (the product's default schedule: every 50 steps and each epoch's end) scored ${th} on all 10,000 test digits (the lab's scorer, lab/checkpoint-eval.ts), or for ${minutes(d.budgetMs)}: what it checks is each checkpoint's time against the composition's. ${d.reached ? `**${th} at ${minutes(d.reached.ms)}** (the checkpoint at step ${d.reached.step}, ${pct(d.reached.accuracy)}; the one before at ${minutes(d.reached.previousMs)}).` : `Not ${th} within the budget (stopped by ${d.stoppedBy} after ${minutes(d.runMs)}).`}`,
      '',
      'Each checkpoint against the composition: its capture time against the composed time of its step (the same time model as above), and its accuracy against the in-process run\'s at the nearest scored point at or before the same examples.',
      '',
      '| step | captured (s) | composed (s) | captured / composed | screen (every 10th test digit) | all 10,000 | in-process at that point |',
      '|---|---|---|---|---|---|---|',
    );
    const acc = row?.accuracy ?? null;
    for (const p of d.points) {
      const rounds = roundsAt(d.history, p.step);
      const composed = m && rounds !== null ? composeMs(m, p.step, rounds) : null;
      const examples = p.step * (row?.accuracy ? row.accuracy.config.batchSizePerWorker * d.n : 32 * d.n);
      const inproc = acc ? [...acc.points].reverse().find((x) => x.examples <= examples) ?? null : null;
      lines.push(`| ${p.step} | ${(p.ms / 1000).toFixed(0)} | ${composed === null ? '–' : (composed / 1000).toFixed(0)} | ${composed ? (p.ms / composed).toFixed(2) : '–'} | ${pct(p.screen)} | ${pct(p.accuracy)} | ${inproc ? `${pct(inproc.full ?? inproc.screen)} at ${inproc.examples} examples` : '–'} |`);
    }
    if (row?.timeMs != null && d.reached) lines.push('', `Composed time to ${th} for this configuration: ${minutes(row.timeMs)} (${minutes(row.timeBeforeMs)}–); measured directly: ${minutes(d.reached.ms)} (${minutes(d.reached.previousMs)}–). The direct run reads checkpoints every 50 steps, the in-process run every ${(r.plan as { accuracy?: { scoreEveryExamples?: number } }).accuracy?.scoreEveryExamples ?? '?'} examples.`);
  }
  if (r.extension && r.extension.runs.length > 0) {
    const ext = r.extension;
    const swapped = summarize({ ...r, accuracy: r.accuracy.map((a) => ext.runs.find((e) => e.plan.id === a.plan.id) ?? a) });
    lines.push('', `## Beyond the run's cap: ${ext.note}`, '', `Composed with this run's windows, as above; the targets above are the run's own and do not use these.`, '', `| network | N | sync | examples to ${th} | steps / rounds | time to ${th} (composed) | every step's | every step ÷ this | stopped by | max epochs |`, '|---|---|---|---|---|---|---|---|---|---|');
    for (const e of ext.runs) {
      for (const row of swapped.rows.filter((x) => x.n === e.plan.n && x.variant === e.plan.variant.id)) {
        const es = swapped.rows.find((x) => x.network === row.network && x.n === row.n && x.variant === 'every-step');
        const c = e.crossed;
        const esMs = es?.timeMs ?? null;
        lines.push(`| ${row.network} | ${row.n} | ${row.variant} | ${c ? c.examples.toLocaleString('en-US') : `not reached (${e.end.examples.toLocaleString('en-US')}: ${pct(e.end.accuracy)})`} | ${c ? `${c.steps} / ${c.rounds}` : '–'} | ${row.timeMs !== null ? `${minutes(row.timeMs)} (${minutes(row.timeBeforeMs)}–)` : '–'} | ${esMs === null ? (es?.timeAtEndMs != null ? `not reached in ${minutes(es.timeAtEndMs)}` : '–') : minutes(esMs)} | ${row.timeMs !== null && esMs !== null ? `${(esMs / row.timeMs).toFixed(2)}×` : row.timeMs !== null && es?.timeAtEndMs != null ? `≥ ${(es.timeAtEndMs / row.timeMs).toFixed(2)}×` : '–'} | ${e.stoppedBy} | ${e.plan.maxEpochs} |`);
      }
    }
  }
  // Crossover
  const qs = measuredQ(s);
  const q = qs.length > 0 ? qs.reduce((x, y) => x + y.q, 0) / qs.length : 0.5;
  const ks = measuredKappa(s);
  const kappa = ks.length > 0 ? ks.reduce((x, y) => x + y.kappa, 0) / ks.length : 1;
  const splits: StepSplit[] = [
    ...s.rows.filter((x) => x.variant === 'every-step' && x.model).map((x) => ({ what: `${x.network}, N = ${x.n} ${x.device}s`, source: 'measured here (every-step window)', n: x.n, computeMs: x.model!.localStepMs, allReduceMs: x.model!.allReduceMs })),
    ...extras.otherSplits,
  ];
  const cross = crossover(splits, r.accuracy, q, kappa);
  const rStar = (b: CrossoverLine['byH'][number]) => (b.breakEven === null ? '– (ρκ ≤ 1)' : b.breakEven === Number.POSITIVE_INFINITY ? '∞' : b.breakEven.toFixed(2));
  lines.push(
    '',
    '## Where every step is still the better choice',
    '',
    `A step costs c (compute and the optimizer) and a (the all-reduce); every step takes S_es·(c + a), local steps S_ls·(κc + q·a/H): q is a round's all-reduce over a step's (measured: ${qs.map((x) => `${x.network} N = ${x.n}: ${x.q.toFixed(2)}`).join(', ') || 'none'}; shared/training/sync-advice.ts assumes ½ for fp16 rounds against fp32 steps; their mean, ${q.toFixed(2)}, below), κ a local step's compute over an every-step step's (measured: ${ks.map((x) => `${x.network} N = ${x.n}: ${x.kappa.toFixed(2)}`).join(', ') || 'none'}; ${kappa.toFixed(2)} below: every step's split counts the wait for the slowest rank as all-reduce, a round's line spreads it over the local steps) and ρ = S_ls/S_es the steps local steps need for the same accuracy over every step's, in-process, at ${th} where both reach it and otherwise at the highest of ${LOWER_THRESHOLDS.map((t) => `${(t * 100).toFixed(0)} %`).join(', ')} they do (the column says which). With r = a/c, every step is the faster while r < r* = (ρκ − 1)/(1 − ρq/H). Whatever r, a setting that never reaches ${th} cannot beat every step to it.`,
    '',
    '| class | source | c (s) | a (s) | r = a/c | ρ at | ρ, r* and every step ÷ local steps, by H (ρ at the nearest class size the accuracy runs cover) | every step better? |',
    '|---|---|---|---|---|---|---|---|',
    ...cross.map((x) => `| ${x.split.what} | ${x.split.source} | ${s2(x.split.computeMs)} | ${s2(x.split.allReduceMs)} | ${x.r.toFixed(2)} | ${x.threshold === null ? '–' : `${(x.threshold * 100).toFixed(0)} %`} | ${x.byH.map((b) => `H${b.h}: ρ ${b.rho.toFixed(2)}, r* ${rStar(b)}, ${b.predictedRatio.toFixed(2)}×`).join('; ') || '–'} | ${x.byH.length === 0 ? '–' : x.everyStepBetter ? '**yes**' : 'no'} |`),
  );
  // Non-IID
  const ni = nonIid(r.accuracy);
  if (ni.length > 0) {
    lines.push(
      '',
      '## Non-IID: the class\'s own data, each device some classes only',
      '',
      `In-process, N = ${ni[0]!.n}, data 'own' on the product's defaults for it (secure aggregation on, so rounds travel fp32): the 60,000 training digits in the devices' own stores (a fifth of each kept out as the holdout, as on every device), by class (the devices hold the digits ${Array.from({ length: ni[0]!.n }, (_, i) => classesOf(i, ni[0]!.n).join('')).join(' / ')}; at N = 3 that is test/e2e/own-data-tabs.spec.ts's 0–3 / 4–6 / 7–9) or at random. Examples to 90 % and 95 % on the 2,000-digit screen, to ${th} on all 10,000; the final accuracy at the default run's end.`,
      '',
      '| data | sync | wire, secure | examples to 90 % | to 95 % | to ' + th + ' | final accuracy |',
      '|---|---|---|---|---|---|---|',
      ...ni.map((x) => `| ${x.data === SERVER_DATA ? "the server's digits (reference)" : x.data} | ${x.variant} | ${x.wire}, ${x.secure ? 'secure' : 'plain'} | ${x.examplesTo.map((e) => (e.examples === null ? 'not reached' : e.examples.toLocaleString('en-US'))).join(' | ')} | ${pct(x.finalAccuracy)} |`),
      '',
      ...nonIidSlowdowns(ni).map((t) => `- ${t}`),
      '',
      'What the literature predicts:',
      '',
      ...NON_IID_LITERATURE.map((t) => `- ${t}`),
    );
  }
  lines.push('', '## Every window', '', 'In run order. Turn: the median of the chief\'s report intervals; the chief\'s split is the mean over the window\'s turns (compute summed over a round\'s local steps).', '');
  lines.push('| network | N | sync | wire | steps | turns (s) | chief: compute / all-reduce / apply (s) | start-up to the window (s) | sent per device a turn (kB) | the product\'s bytesSentPerRound (kB) | machine busy without the accuracy runs | counts |', '|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const w of r.windows) {
    const t = w.timingMean;
    lines.push(`| ${w.network} | ${w.n} | ${w.variant} | ${w.wire} | ${w.fromStep}–${w.toStep} | ${w.intervalsMs.map((x) => (x / 1000).toFixed(2)).join(', ')} | ${t ? `${s2(t.computeMs + t.readbackMs + t.crossMs)} / ${s2(t.commMs)} / ${s2(t.applyMs)}` : '–'} | ${s2(w.startupMs)} | ${kb(w.wireBytesPerTurn)} | ${kb(w.reportedBytesPerTurn)} | ${(w.machineBusyWithout * 100).toFixed(0)} % | ${w.counts ? 'yes' : `no${w.lost ? `: ${w.lost.split(';')[0]}` : ''}`} |`);
  }
  lines.push('', '## Every accuracy run', '', 'In-process; CPU seconds are the run\'s own (at idle priority beside the windows, then on a free core).', '', '| run | wire | stopped by | crossed at (examples) | default run\'s end | last point | CPU s | shares |', '|---|---|---|---|---|---|---|---|');
  for (const a of r.accuracy) {
    lines.push(`| ${a.plan.id}${a.plan.everyStepAsOne && a.plan.variant.sync === 'every-step' && a.plan.data === SERVER_DATA ? ' (one Trainer on the global batch)' : ''} | ${a.config.wire}${a.config.secureAggregation ? ', secure' : ''} | ${a.stoppedBy}${a.error ? `: ${a.error}` : ''} | ${a.crossed ? `${a.crossed.examples} (${pct(a.crossed.accuracy)})` : '–'} | ${a.defaultRun ? `${pct(a.defaultRun.accuracy)} at ${a.defaultRun.examples}` : '–'} | ${a.end.examples}: ${pct(a.end.accuracy)} | ${a.cpuSeconds.toFixed(0)} | ${a.lastShares.join('/')} |`);
  }
  if (r.validations.length > 0) {
    lines.push('', '## The profiles, validated before use (TCP goodput, Mbit/s)', '', '| profile | model | check | measured | expected |', '|---|---|---|---|---|');
    for (const v of r.validations) for (const k of Object.keys(v.expected)) lines.push(`| ${v.network} | ${v.name} ${JSON.stringify(v.params)} | ${k} | ${v.measured[k]} | ${v.expected[k]} |`);
  }
  if (r.errors.length > 0 || r.notRun.length > 0) {
    lines.push('', '## Not measured', '', ...r.errors.map((e) => `- ${e.what}: ${e.message.split('\n')[0]}`), ...r.notRun.map((x) => `- not run: ${x}`));
  }
  lines.push('');
  return lines.join('\n');
}
