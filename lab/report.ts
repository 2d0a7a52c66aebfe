/**
 * The collectives section's rows: bench/lab-collectives.json (`models`, the rows, what
 * 'auto' picked, the rows skipped), bench/lab-collectives.md (the same as tables) and one
 * SVG per network model; its four targets go into the lab's report (lab/report-store.ts).
 * Pure: lab/collectives-section.ts measures, this turns the measurements into figures,
 * targets and text, and the unit test checks the targets against hand-made rows.
 */
import { LAB_WORKLOAD_LIST } from '../shared/tasks/lab-workloads';
import type { Algorithm, WireFormat } from '../shared/protocol';
import type { AllReduceRow, AutoRow } from './allreduce-rows';
import type { ModelName, ModelProfile } from './network-models';
import type { CollectivesReport, Target } from './report-types';

const MB = 2 ** 20;

/** The places the targets read: always measured, whatever their bound (lab/allreduce-rows.ts skips the rest when they cannot be fastest). */
export const TARGET_PLACES: ReadonlyArray<{ model: ModelName; n: number; bytes: number; wire: WireFormat; algorithms: Algorithm[] }> = [
  { model: 'wired-lab', n: 4, bytes: 16 * MB, wire: 'fp32', algorithms: ['ring', 'hub'] },
  { model: 'wifi', n: 8, bytes: 16 * MB, wire: 'fp32', algorithms: ['ring'] },
];

/** The algorithms the targets need measured at one place of `model`. */
export function requiredAt(model: ModelName, n: number, bytes: number, wire: WireFormat): Algorithm[] {
  return TARGET_PLACES.filter((p) => p.model === model && p.n === n && p.bytes === bytes && p.wire === wire).flatMap((p) => p.algorithms);
}

const find = (rows: AllReduceRow[], model: ModelName, n: number, bytes: number, wire: WireFormat, algorithm: Algorithm) =>
  rows.find((r) => r.model === model && r.n === n && r.bytes === bytes && r.wire === wire && r.algorithm === algorithm);

/** The four targets of the issue, each met or not, with its figure. */
export function targets(rows: AllReduceRow[], autos: AutoRow[], profiles: ModelProfile[]): Target[] {
  const out: Target[] = [];
  const ring = find(rows, 'wired-lab', 4, 16 * MB, 'fp32', 'ring');
  const hub = find(rows, 'wired-lab', 4, 16 * MB, 'fp32', 'hub');
  const ratio = ring && hub ? hub.ms / ring.ms : null;
  out.push({
    id: 'ring-vs-hub-wired-n4-16mb',
    goal: 'wired-lab, N = 4, 16 MB (fp32): the ring at least 2× as fast as the hub',
    value: ratio,
    met: ratio !== null && ratio >= 2,
    detail: ring && hub ? `hub ${hub.ms.toFixed(0)} ms / ring ${ring.ms.toFixed(0)} ms` : 'not measured in this run',
  });
  const wired = profiles.find((p) => p.name === 'wired-lab');
  const portMBps = wired?.name === 'wired-lab' ? (wired.params.portMbit * 1e6) / 8 / 1e6 : null;
  const share = ring && portMBps ? ring.busMBps / portMBps : null;
  out.push({
    id: 'bus-vs-port-wired-n4-16mb',
    goal: 'wired-lab, N = 4, 16 MB (fp32): the ring\'s bus bandwidth at least 85% of the port rate',
    value: share,
    met: share !== null && share >= 0.85,
    detail: ring && portMBps ? `bus ${ring.busMBps.toFixed(2)} MB/s of a ${portMBps.toFixed(2)} MB/s port` : 'not measured in this run',
  });
  const wifiAuto = autos.find((a) => a.model === 'wifi' && a.n === 8 && a.bytes === 16 * MB && a.wire === 'fp32');
  const wifiRing = find(rows, 'wifi', 8, 16 * MB, 'fp32', 'ring');
  const wifiPicked = wifiAuto ? find(rows, 'wifi', 8, 16 * MB, 'fp32', wifiAuto.picked) : undefined;
  const speedup = wifiRing && wifiPicked ? wifiRing.ms / wifiPicked.ms : null;
  out.push({
    id: 'auto-vs-ring-wifi-n8-16mb',
    goal: 'wifi, N = 8, 16 MB (fp32): what auto picks at least 1.5× as fast as the ring',
    value: speedup,
    met: speedup !== null && speedup >= 1.5,
    detail: wifiRing && wifiPicked ? `auto picked ${wifiAuto!.picked}: ${wifiPicked.ms.toFixed(0)} ms against the ring's ${wifiRing.ms.toFixed(0)} ms` : 'not measured in this run',
  });
  const judged = autos.filter((a) => Number.isFinite(a.pickedOverFastest));
  const worst = judged.reduce<AutoRow | null>((w, a) => (w === null || a.pickedOverFastest > w.pickedOverFastest ? a : w), null);
  out.push({
    id: 'auto-vs-best-worst-case',
    goal: 'every model, N, size and wire: auto within 10% of the fastest algorithm measured in the same run (the worst case)',
    value: worst ? worst.pickedOverFastest : null,
    met: worst !== null && worst.pickedOverFastest <= 1.1,
    detail: worst
      ? `worst of ${judged.length}: ${worst.model}, N = ${worst.n}, ${worst.bytes / MB} MB ${worst.wire}: picked ${worst.picked}, fastest ${worst.fastest}`
      : 'not measured in this run',
  });
  return out;
}

const f = (v: number, digits = 1): string => (Number.isFinite(v) ? v.toFixed(digits) : '–');
const pct = (v: number): string => `${Math.round(v * 100)} %`;
const ALGORITHMS: Algorithm[] = ['ring', 'halving-doubling', 'hub'];
const SHORT: Record<Algorithm, string> = { ring: 'ring', 'halving-doubling': 'h-d', hub: 'hub' };

function paramsText(p: ModelProfile['params']): string {
  return Object.entries(p)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
}

/** bench/lab-collectives.md: the targets first, then each model's validation and all-reduce rows. */
export function markdown(r: CollectivesReport, profiles: ModelProfile[]): string {
  const lines: string[] = [];
  lines.push('# The classroom lab: the collectives', '');
  lines.push(
    `Measured by \`npm run lab -- --section collectives${r.quick ? ' --quick' : ''}\` on ${r.generatedAt.slice(0, 10)}, ${r.machine.cores} cores, kernel ${r.machine.kernel}, Node ${r.machine.node}; ${f(r.minutes)} minutes; the commit and versions are in bench/lab.md. netem: ${r.netem ? 'present' : 'absent (rates only, no added delay)'}. Every worker is its own network namespace under a CPU cap; times are the median over repetitions of the slowest rank. Workloads: ${LAB_WORKLOAD_LIST.map((w) => `${w.role}, the ${w.task.id} task's ${w.model}`).join('; ')} (shared/tasks/lab-workloads.ts). See docs/lab.md.`,
    '',
  );
  lines.push('## Targets', '', '| target | goal | figure | met |', '|---|---|---|---|');
  for (const t of r.targets) lines.push(`| \`${t.id}\` | ${t.goal} | ${t.value === null ? 'not measured' : f(t.value, 2)} (${t.detail}) | ${t.met ? 'yes' : '**no**'} |`);
  lines.push('', '## The network models, measured before use (TCP goodput, Mbit/s)', '', '| model | parameters | check | measured | profile says | within 15 % |', '|---|---|---|---|---|---|');
  for (const m of r.models) {
    if (m.firstAttempt) lines.push(`| ${m.name} | first measurement, missed: ${Object.entries(m.firstAttempt).map(([k, v]) => `${k} ${f(v, 2)}`).join(', ')}; measured again | | | | |`);
    for (const key of Object.keys(m.expected)) {
      const ok = Math.abs(m.measured[key]! - m.expected[key]!) <= 0.15 * m.expected[key]!;
      lines.push(`| ${m.name} | ${paramsText(m.params)} | ${key} | ${f(m.measured[key]!, 2)} | ${f(m.expected[key]!, 2)} | ${ok ? 'yes' : '**no**'} |`);
    }
  }
  for (const profile of profiles) {
    const rows = r.allreduce.filter((x) => x.model === profile.name);
    if (rows.length === 0) continue;
    lines.push('', `## All-reduce on \`${profile.name}\` (${paramsText(profile.params)})`, '');
    lines.push('Times in ms; in brackets the share of the model\'s bound (lab/bounds.ts) each reached. ✗: the machine or the devices\' CPU caps limited the row (it does not count). skipped: its bound alone is slower than a time measured beside it (below).', '');
    lines.push('| N | buffer | wire | ring | halving-doubling | hub | auto picks | auto / fastest | network shape seen | machine CPU |', '|---|---|---|---|---|---|---|---|---|---|');
    const keys = [...new Set(rows.map((x) => `${x.n}|${x.bytes}|${x.wire}`))];
    for (const key of keys) {
      const [n, bytes, wire] = key.split('|');
      const cell = (a: Algorithm) => {
        const x = rows.find((y) => `${y.n}|${y.bytes}|${y.wire}` === key && y.algorithm === a);
        const gone = (r.skipped ?? []).some((y) => y.model === profile.name && `${y.n}|${y.bytes}|${y.wire}` === key && y.algorithm === a);
        return x ? `${f(x.ms, 0)} (${pct(x.ofBound)})${x.counts ? '' : ' ✗'}` : gone ? 'skipped' : '–';
      };
      const auto = r.auto.find((a) => a.model === profile.name && `${a.n}|${a.bytes}|${a.wire}` === key);
      const cpu = Math.max(...rows.filter((y) => `${y.n}|${y.bytes}|${y.wire}` === key).map((y) => y.cpu.mean));
      lines.push(
        `| ${n} | ${Number(bytes) / MB} MB | ${wire} | ${ALGORITHMS.map(cell).join(' | ')} | ${auto ? SHORT[auto.picked] : '–'} | ${auto ? `${f(auto.pickedOverFastest, 2)}×` : '–'} | ${auto?.shape ?? '–'} | ${pct(cpu)} |`,
      );
    }
  }
  const skipped = r.skipped ?? [];
  if (skipped.length > 0) {
    lines.push('', '## Rows not run: their bound alone is slower than a time measured beside them', '');
    lines.push('| model | N | buffer | wire | algorithm | its bound (ms) | measured beside it (ms) |', '|---|---|---|---|---|---|---|');
    for (const x of skipped) lines.push(`| ${x.model} | ${x.n} | ${x.bytes / MB} MB | ${x.wire} | ${x.algorithm} | ${f(x.boundMs, 0)} | ${f(x.fasterMs, 0)} |`);
  }
  lines.push('', `Real GPU: ${r.gpu.why}`, '');
  return lines.join('\n');
}

const COLORS: Record<Algorithm, string> = { ring: '#1f77b4', 'halving-doubling': '#2ca02c', hub: '#d62728' };

/**
 * One model's SVG: all-reduce time against N for each algorithm at the largest fp32 buffer
 * measured, solid, with each algorithm's bound dashed. Log-scaled time, so the bounds and
 * the measurements of both small and large classes stay readable.
 */
export function modelSvg(model: ModelName, rows: AllReduceRow[]): string | null {
  const fp32 = rows.filter((r) => r.model === model && r.wire === 'fp32');
  if (fp32.length === 0) return null;
  const bytes = Math.max(...fp32.map((r) => r.bytes));
  const sel = fp32.filter((r) => r.bytes === bytes);
  const ns = [...new Set(sel.map((r) => r.n))].sort((a, b) => a - b);
  const W = 640;
  const H = 360;
  const left = 70;
  const right = 170;
  const top = 40;
  const bottom = 50;
  const values = sel.flatMap((r) => [r.ms, r.boundMs]).filter((v) => v > 0);
  const lo = Math.log10(Math.min(...values) * 0.8);
  const hi = Math.log10(Math.max(...values) * 1.25);
  const x = (n: number) => left + (ns.length === 1 ? 0.5 : ns.indexOf(n) / (ns.length - 1)) * (W - left - right);
  const y = (ms: number) => top + (1 - (Math.log10(ms) - lo) / (hi - lo)) * (H - top - bottom);
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  parts.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  parts.push(`<text x="${left}" y="22" font-size="14" font-weight="bold">${model}: all-reduce of ${bytes / MB} MB (fp32), ms (log scale; lower is better)</text>`);
  for (let e = Math.ceil(lo); e <= Math.floor(hi); e++) {
    const v = 10 ** e;
    parts.push(`<line x1="${left}" x2="${W - right}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/><text x="${left - 8}" y="${y(v) + 4}" text-anchor="end">${v >= 1000 ? `${v / 1000} s` : `${v} ms`}</text>`);
  }
  for (const n of ns) parts.push(`<text x="${x(n)}" y="${H - bottom + 20}" text-anchor="middle">N = ${n}</text>`);
  ALGORITHMS.forEach((a, i) => {
    const pts = ns.map((n) => sel.find((r) => r.n === n && r.algorithm === a)).filter((r): r is AllReduceRow => r !== undefined);
    if (pts.length === 0) return;
    const path = (pick: (r: AllReduceRow) => number) => pts.map((r, j) => `${j === 0 ? 'M' : 'L'}${x(r.n).toFixed(1)},${y(pick(r)).toFixed(1)}`).join(' ');
    parts.push(`<path d="${path((r) => r.ms)}" fill="none" stroke="${COLORS[a]}" stroke-width="2.5"/>`);
    parts.push(`<path d="${path((r) => r.boundMs)}" fill="none" stroke="${COLORS[a]}" stroke-width="1.2" stroke-dasharray="5 4"/>`);
    for (const r of pts) parts.push(`<circle cx="${x(r.n)}" cy="${y(r.ms)}" r="3.5" fill="${r.counts ? COLORS[a] : 'white'}" stroke="${COLORS[a]}"/>`);
    const ly = top + 10 + i * 20;
    parts.push(`<line x1="${W - right + 15}" x2="${W - right + 40}" y1="${ly}" y2="${ly}" stroke="${COLORS[a]}" stroke-width="2.5"/><text x="${W - right + 46}" y="${ly + 4}">${a}</text>`);
  });
  const ly = top + 10 + 3 * 20;
  parts.push(`<line x1="${W - right + 15}" x2="${W - right + 40}" y1="${ly}" y2="${ly}" stroke="#555" stroke-dasharray="5 4"/><text x="${W - right + 46}" y="${ly + 4}">its bound</text>`);
  parts.push(`<text x="${W - right + 15}" y="${ly + 24}">open dot: CPU-bound</text>`);
  parts.push('</svg>');
  return parts.join('\n');
}
