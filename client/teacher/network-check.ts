/**
 * "Check the network", and the run's estimate, for a teacher planning the lesson: the button
 * asks every joined device to measure its network (shared/training/network-check.ts); the
 * panel says in plain words who reaches whom, how fast the server is reached, and which way
 * the gradients will travel, with a row per device. The estimate of the run (run-estimate.ts)
 * shows under the form's lesson choices before Start, and once the run is over the run card
 * sets it beside the time the run took.
 */
import type { RoomStatus, StartConfig } from '../../shared/protocol';
import { h } from './dom';
import { duration, fixed } from './format';
import { ASSUMED_MBPS, ASSUMED_RTT_MS, estimateRun, type EstimateResult, type Path } from './run-estimate';
import type { RoomApi } from './api';
import { findTask } from '../../shared/tasks/registry';

const RUN_CLOCK_KEY = 'webring:teacher:run-clock';

/** The words for each way the gradients travel. */
const PATH_WORDS: Record<Path, string> = {
  hub: 'through the hub on this laptop: each device sends its gradient once and gets the sum back, which on one shared Wi-Fi takes about half the airtime of a ring',
  ring: 'around the ring: each device sends to its neighbour, so no single link carries the whole class',
  'halving-doubling': 'by halving-doubling between pairs of devices: fewest round trips, for small gradients',
  relay: 'through this server: no two devices opened a direct link, so every exchange goes through this laptop',
};

interface RunClock {
  room: string;
  run: number;
  startedAt: number;
  estimateMs: number | null;
}

export interface NetworkCheckSlots {
  /** The panel: the button, the summary and the table. */
  panel: HTMLElement;
  /** Under the form's lesson choices: the estimate before Start. */
  estimate: HTMLElement;
  /** On the run card: estimated against measured, once a run is over. */
  comparison: HTMLElement;
}

export class NetworkCheckPanel {
  private readonly summary = h('div', { 'data-testid': 'network-summary', role: 'status' });
  private readonly error = h('p', { class: 'inline-error', role: 'alert', hidden: '' });
  private readonly button = h('button', { type: 'button', class: 'secondary', 'data-testid': 'network-check' }, 'Check the network');
  private last: RoomStatus | null = null;

  constructor(
    private readonly slots: NetworkCheckSlots,
    private readonly api: RoomApi,
    private readonly config: () => StartConfig | null,
  ) {
    this.button.addEventListener('click', () => void this.check());
    slots.panel.replaceChildren(
      h('p', { class: 'hint' }, 'Before the lesson, with the students joined: every device measures its way to this server and to its classmates, and this page says how the gradients will travel and how long the run will take.'),
      this.button,
      this.error,
      this.summary,
    );
  }

  /** The form changed: the estimate follows it. */
  formChanged(): void {
    if (this.last) this.renderEstimate(this.last);
  }

  render(s: RoomStatus): void {
    this.last = s;
    this.renderEstimate(s);
    this.renderComparison(s);
    if (!s.network) return;
    const names = new Map([...s.members, ...s.waiting].map((m) => [m.id, m.name]));
    const devices = s.members.length + s.waiting.length;
    const reports = s.network.reports;
    const lines = [`${reports.length} of ${devices} devices answered the check of ${new Date(s.network.startedAt).toLocaleTimeString()}.`];
    if (reports.length > 0) lines.push(...describe(s, reports, names));
    const rows = reports.map((r) => {
      const counts = (['direct', 'relay', 'shut'] as const).map((p) => [p, r.links.filter((l) => l.path === p).length] as const).filter(([, n]) => n > 0);
      return h(
        'tr',
        { 'data-member-id': r.member },
        h('th', { scope: 'row' }, names.get(r.member) ?? r.member),
        h('td', { class: 'num' }, `${fixed(r.serverRttMs, 1)} ms`),
        h('td', { class: 'num' }, `${fixed(r.downMBps, 1)} MB/s`),
        h('td', { class: 'num' }, `${fixed(r.upMBps, 1)} MB/s`),
        h('td', { 'data-testid': 'network-links' }, counts.map(([p, n]) => `${n} ${p === 'relay' ? 'via server' : p}`).join(', ') || 'none'),
        h('td', { class: 'num', 'data-testid': 'network-slowest-link' }, slowestLink(r.links)),
      );
    });
    const table =
      rows.length === 0
        ? []
        : [
            h(
            'table',
            { class: 'network-table' },
            h('thead', {}, h('tr', {}, ...['Device', 'Round trip', 'Download', 'Upload', 'Links', 'Slowest link'].map((t) => h('th', { scope: 'col' }, t)))),
            h('tbody', {}, ...rows),
            ),
          ];
    this.summary.replaceChildren(...lines.map((l) => h('p', {}, l)), ...table);
  }

  private async check(): Promise<void> {
    this.button.disabled = true;
    this.error.hidden = true;
    // The form's model too: the devices' admission probes timed only the task's default.
    const config = this.config();
    const known = config && findTask(config.task)?.models.some((m) => m.id === config.model);
    const started = await this.api.networkCheck(known ? { workload: { task: config.task, model: config.model } } : {});
    this.button.disabled = false;
    if (!started.ok) {
      this.error.hidden = false;
      this.error.textContent = `The check did not start: ${started.error.message} (${started.error.code})`;
      return;
    }
    this.summary.replaceChildren(h('p', {}, 'Checking: each device measures for a few seconds…'));
  }

  private renderEstimate(s: RoomStatus): void {
    const config = this.config();
    const result: EstimateResult = config ? estimateRun(s, config) : { ok: false, why: 'a field of the form is not valid' };
    this.slots.estimate.textContent = estimateText(result);
    this.slots.estimate.dataset.estimateMs = result.ok ? String(Math.round(result.estimate.totalMs)) : '';
  }

  /** Remembers when the page saw each run start, with the estimate for it; compares once it is over. */
  private renderComparison(s: RoomStatus): void {
    const clock = readClock();
    if (s.state === 'training' && s.config && (!clock || clock.run !== s.run || clock.room !== s.room)) {
      const estimate = estimateRun(s, s.config);
      writeClock({ room: s.room, run: s.run, startedAt: Date.now(), estimateMs: estimate.ok ? estimate.estimate.totalMs : null });
    }
    const done = readClock();
    const show = s.state === 'done' && done !== null && done.run === s.run && done.room === s.room;
    this.slots.comparison.hidden = !show;
    if (!show) return;
    const tookMs = (done.endedAt ??= Date.now()) - done.startedAt;
    writeClock(done);
    this.slots.comparison.dataset.tookMs = String(Math.round(tookMs));
    this.slots.comparison.textContent =
      done.estimateMs === null
        ? `This run took ${duration(tookMs)} (no estimate before it).`
        : `This run took ${duration(tookMs)}; the estimate before it was ${duration(done.estimateMs)} (${fixed(tookMs / done.estimateMs, 2)}× the estimate).`;
  }
}

/** A device's slowest measured link: its bandwidth and its round trip, or a dash when none was measured. */
function slowestLink(links: NonNullable<RoomStatus['network']>['reports'][number]['links']): string {
  const measured = links.filter((l) => l.MBps != null && l.rttMs != null);
  if (measured.length === 0) return '–';
  const slowest = measured.reduce((a, b) => (b.MBps! < a.MBps! ? b : a));
  return `${fixed(slowest.MBps!, 1)} MB/s, ${fixed(slowest.rttMs!, 1)} ms`;
}

/** What the class's answers mean, in the teacher's words. */
function describe(s: RoomStatus, reports: NonNullable<RoomStatus['network']>['reports'], names: Map<string, string>): string[] {
  const name = (id: string) => names.get(id) ?? id;
  const lines: string[] = [];
  const alone = reports.filter((r) => r.links.length > 0 && r.links.every((l) => l.path === 'relay'));
  // Each relayed link once, by its two ends' names.
  const relayedPairs = new Set(reports.flatMap((r) => r.links.filter((l) => l.path === 'relay').map((l) => [name(r.member), name(l.peer)].sort().join('–'))));
  const shut = reports.filter((r) => r.links.some((l) => l.path === 'shut'));
  if (alone.length === reports.length && alone.length > 0) {
    lines.push('No two devices opened a direct link (Wi-Fi client isolation, or blocked UDP): the class trains entirely through this server, which carries every exchange.');
  } else if (relayedPairs.size > 0) {
    if (alone.length > 0) lines.push(`${alone.length} device(s) open no direct link to any classmate (${alone.map((r) => name(r.member)).join(', ')}): Wi-Fi client isolation or blocked UDP for them, or WebRTC off. The class trains as usual.`);
    lines.push(`${relayedPairs.size} link(s) go through this server, which carries their exchanges: ${[...relayedPairs].join(', ')}.`);
  } else {
    lines.push('Every device reaches its classmates directly.');
  }
  if (shut.length > 0) lines.push(`${shut.length} device(s) still have a link opening (${shut.map((r) => name(r.member)).join(', ')}); check again in a few seconds.`);
  const slowestRtt = reports.reduce((a, b) => (b.serverRttMs > a.serverRttMs ? b : a));
  const slowestDown = reports.reduce((a, b) => (b.downMBps < a.downMBps ? b : a));
  const slowestUp = reports.reduce((a, b) => (b.upMBps < a.upMBps ? b : a));
  lines.push(
    `To this server: round trips up to ${fixed(slowestRtt.serverRttMs, 1)} ms (${name(slowestRtt.member)}); the slowest download ${fixed(slowestDown.downMBps, 1)} MB/s (${name(slowestDown.member)}), the slowest upload ${fixed(slowestUp.upMBps, 1)} MB/s (${name(slowestUp.member)}).`,
  );
  // Each link as one device measured it over the link itself (direct or through this server).
  const measured = reports.flatMap((r) => r.links.filter((l) => l.rttMs != null && l.MBps != null).map((l) => ({ pair: `${name(r.member)}–${name(l.peer)}`, rttMs: l.rttMs!, MBps: l.MBps! })));
  if (measured.length > 0) {
    const longest = measured.reduce((a, b) => (b.rttMs > a.rttMs ? b : a));
    const slowest = measured.reduce((a, b) => (b.MBps < a.MBps ? b : a));
    lines.push(`Between devices (${measured.length} links measured): round trips up to ${fixed(longest.rttMs, 1)} ms (${longest.pair}); the slowest link ${fixed(slowest.MBps, 1)} MB/s (${slowest.pair}).`);
  }
  const estimate = s.config ? estimateRun(s, s.config) : null;
  const path = estimate?.ok ? estimate.estimate.path : s.hub ? 'hub' : 'ring';
  lines.push(`Gradients will travel ${PATH_WORDS[path]}.${s.config?.allreduce === 'auto' || !s.config ? ' With the automatic all-reduce the class measures its links in its first steps and may pick another way; the ring card says which.' : ''}`);
  return lines;
}

export function estimateText(result: EstimateResult): string {
  if (!result.ok) return `No estimate of the run yet: ${result.why}.`;
  const e = result.estimate;
  const network = e.network === 'measured' ? 'and the network check' : `and an assumed network (${ASSUMED_MBPS} MB/s, ${ASSUMED_RTT_MS} ms: Check the network for the real one)`;
  return `This run: about ${duration(e.totalMs)}, ${e.steps.toLocaleString()} steps of about ${Math.round(e.stepMs)} ms (${Math.round(e.computeMs)} computing, ${Math.round(e.exchangeMs)} exchanging ${e.path === 'relay' ? 'through the server' : `by ${e.path}`}), from the devices' speed probes ${network}.`;
}

type StoredClock = RunClock & { endedAt?: number };

function readClock(): StoredClock | null {
  try {
    const raw: unknown = JSON.parse(sessionStorage.getItem(RUN_CLOCK_KEY) ?? 'null');
    return raw && typeof raw === 'object' && typeof (raw as RunClock).run === 'number' ? (raw as StoredClock) : null;
  } catch (err) {
    console.warn(`the run's clock was unreadable: ${String(err)}`);
    return null;
  }
}

function writeClock(clock: StoredClock): void {
  try {
    sessionStorage.setItem(RUN_CLOCK_KEY, JSON.stringify(clock));
  } catch (err) {
    console.warn(`the run's clock is not kept: ${String(err)}`);
  }
}
