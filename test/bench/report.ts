/**
 * Turns the benchmark's results into the markdown tables and the SVG chart docs/benchmarks.md shows.
 * Pure: results in, text out.
 */

export interface AllReduceRow {
  n: number;
  bytes: number;
  allreduceMs: number;
  busMBps: number;
  linkMBps: number;
  ratio: number;
  starMs: number;
  speedupVsStar: number;
}

export interface SmallBufferRow {
  n: number;
  peers: 'tabs' | 'node';
  bytes: number;
  /** The ring's measured α and β. */
  alphaMs: number;
  betaMBps: number;
  /** Halving-doubling's, measured on its own links. */
  hdAlphaMs: number;
  hdBetaMBps: number;
  ringMs: number;
  halvingDoublingMs: number;
  auto: 'ring' | 'halving-doubling';
  autoMs: number;
  speedupAutoVsRing: number;
  /** auto's time over the faster algorithm's (1: auto picked the faster); absent in rows from before. */
  autoVsBest?: number;
}

export interface StepSplitRow {
  model: 'mlp' | 'cnn';
  n: number;
  backend: string;
  steps: number;
  computeMs: number;
  readbackMs: number;
  commMs: number;
  applyMs: number;
  /** commMs over the whole step. */
  commShare: number;
}

export interface BenchResults {
  machine: { cpus: number; cpuModel: string; node: string; date: string; reps: number };
  allreduce: AllReduceRow[];
  small: SmallBufferRow[];
  split: StepSplitRow[];
}

const MB = 1024 * 1024;
const KB = 1024;
const f = (v: number, d = 1) => (Number.isFinite(v) ? v.toFixed(d) : '–');
const size = (bytes: number) => (bytes >= MB ? `${bytes / MB} MB` : `${bytes / KB} KB`);

export function markdown(r: BenchResults): string {
  const lines: string[] = [];
  lines.push(`Measured on ${r.machine.cpus} CPU cores (${r.machine.cpuModel}), Node ${r.machine.node}, ${r.machine.date}; median of ${r.machine.reps} repetitions, each rank's time the slowest rank's.`);
  if (r.allreduce.length) {
    lines.push('', '#### Ring all-reduce between Chromium tabs, against the link and a socket.io relay', '');
    lines.push('| N | buffer | all-reduce ms | bus MB/s | link MB/s | bus / link | star relay ms | ring speed-up |');
    lines.push('|---|---|---|---|---|---|---|---|');
    for (const a of r.allreduce) {
      lines.push(`| ${a.n} | ${size(a.bytes)} | ${f(a.allreduceMs)} | ${f(a.busMBps)} | ${f(a.linkMBps)} | ${f(a.ratio * 100, 0)} % | ${f(a.starMs)} | ${f(a.speedupVsStar, 2)}× |`);
    }
  }
  if (r.small.length) {
    lines.push('', '#### Small buffers: ring against halving-doubling, and what the automatic choice picks', '');
    lines.push('| N | peers | buffer | ring α ms/hop, β MB/s | halving-doubling α, β | ring ms | halving-doubling ms | auto picks | auto vs ring | auto vs the faster |');
    lines.push('|---|---|---|---|---|---|---|---|---|---|');
    for (const s of r.small) {
      lines.push(`| ${s.n} | ${s.peers === 'tabs' ? 'Chromium tabs' : 'Node peers'} | ${size(s.bytes)} | ${f(s.alphaMs, 2)}, ${f(s.betaMBps)} | ${f(s.hdAlphaMs, 2)}, ${f(s.hdBetaMBps)} | ${f(s.ringMs)} | ${f(s.halvingDoublingMs)} | ${s.auto} | ${f(s.speedupAutoVsRing, 2)}× | ${s.autoVsBest === undefined ? '–' : `${f(s.autoVsBest, 2)}×`} |`);
    }
  }
  if (r.split.length) {
    lines.push('', '#### Where a training step goes (chief, mean over the run after warm-up)', '');
    lines.push('| model | tabs | backend | compute ms | read-back ms | all-reduce ms | apply ms | all-reduce share |');
    lines.push('|---|---|---|---|---|---|---|---|');
    for (const s of r.split) {
      lines.push(`| ${s.model.toUpperCase()} | ${s.n} | ${s.backend} | ${f(s.computeMs)} | ${f(s.readbackMs)} | ${f(s.commMs)} | ${f(s.applyMs)} | ${f(s.commShare * 100, 0)} % |`);
    }
  }
  return `${lines.join('\n')}\n`;
}

const esc = (t: string) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;');

interface Bar {
  value: number;
  color: string;
}

interface Group {
  label: string;
  bars: Bar[];
}

/** One bar panel: groups of bars on a shared linear axis, with a legend. */
function panel(x0: number, y0: number, width: number, height: number, title: string, unit: string, groups: Group[], legend: Array<{ label: string; color: string }>): string {
  const max = Math.max(1e-9, ...groups.flatMap((g) => g.bars.map((b) => b.value)).filter(Number.isFinite));
  const plotTop = y0 + 48;
  const plotBottom = y0 + height - 36;
  const plotH = plotBottom - plotTop;
  const groupW = width / Math.max(groups.length, 1);
  const out: string[] = [];
  out.push(`<text x="${x0}" y="${y0 + 18}" font-size="15" font-weight="600">${esc(title)}</text>`);
  let lx = x0;
  for (const l of legend) {
    out.push(`<rect x="${lx}" y="${y0 + 28}" width="11" height="11" fill="${l.color}"/><text x="${lx + 15}" y="${y0 + 38}" font-size="12">${esc(l.label)}</text>`);
    lx += 22 + l.label.length * 6.6;
  }
  out.push(`<line x1="${x0}" y1="${plotBottom}" x2="${x0 + width}" y2="${plotBottom}" stroke="#999"/>`);
  out.push(`<text x="${x0 + width}" y="${plotTop - 4}" font-size="11" text-anchor="end" fill="#555">max ${f(max)} ${esc(unit)}</text>`);
  groups.forEach((g, gi) => {
    const gx = x0 + gi * groupW;
    const barW = Math.min(18, (groupW - 8) / g.bars.length);
    const start = gx + (groupW - barW * g.bars.length) / 2;
    g.bars.forEach((b, bi) => {
      const h = Number.isFinite(b.value) ? (b.value / max) * plotH : 0;
      out.push(`<rect x="${f(start + bi * barW, 1)}" y="${f(plotBottom - h, 1)}" width="${f(barW - 1, 1)}" height="${f(h, 1)}" fill="${b.color}"><title>${f(b.value)} ${esc(unit)}</title></rect>`);
    });
    out.push(`<text x="${f(gx + groupW / 2, 1)}" y="${plotBottom + 14}" font-size="10.5" text-anchor="middle">${esc(g.label)}</text>`);
  });
  return out.join('\n');
}

const RING = '#4c78a8';
const LINK = '#9ecae9';
const STAR = '#e45756';
const HD = '#54a24b';

export function chartSvg(r: BenchResults): string {
  const width = 900;
  const panelH = 260;
  const parts: string[] = [];
  let y = 10;
  if (r.allreduce.length) {
    parts.push(
      panel(20, y, width - 40, panelH, 'All-reduce bus bandwidth between Chromium tabs (higher is better)', 'MB/s', r.allreduce.map((a) => ({
        label: `N${a.n} ${size(a.bytes)}`,
        bars: [
          { value: a.busMBps, color: RING },
          { value: a.linkMBps, color: LINK },
          { value: (a.bytes / MB / (a.starMs / 1000)) * ((2 * (a.n - 1)) / a.n), color: STAR },
        ],
      })), [
        { label: 'ring (bus MB/s)', color: RING },
        { label: 'link: ring shift', color: LINK },
        { label: 'socket.io star relay', color: STAR },
      ]),
    );
    y += panelH + 10;
  }
  if (r.small.length) {
    parts.push(
      panel(20, y, width - 40, panelH, 'Small buffers: all-reduce time (lower is better)', 'ms', r.small.map((s) => ({
        label: `N${s.n} ${size(s.bytes)}`,
        bars: [
          { value: s.ringMs, color: RING },
          { value: s.halvingDoublingMs, color: HD },
        ],
      })), [
        { label: 'ring', color: RING },
        { label: 'halving-doubling', color: HD },
      ]),
    );
    y += panelH + 10;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${y}" width="${width}" height="${y}" font-family="system-ui, sans-serif">
<rect width="100%" height="100%" fill="#fff"/>
${parts.join('\n')}
</svg>
`;
}
