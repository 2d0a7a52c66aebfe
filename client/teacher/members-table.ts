/**
 * The members table: one row per ring member in rank order, then the students waiting to be
 * admitted (the tbody `data-testid="members"`), and in a second tbody, greyed, whoever left
 * or was dropped or evicted in the last half minute, so a teacher glancing up still sees who went.
 */
import type { DroppedMember, MemberInfo, RoomEvent, RoomStatus } from '../../shared/protocol';
import { h } from './dom';
import { explainShare } from '../../shared/training/share-balancer';
import { describeClass } from '../../shared/compute/device-probe';
import { dash, duration, fixed, percent } from './format';
import { BACKEND_LABELS } from '../../shared/protocol/vocabulary';

/** A member whose step compute time is this many times the others' median is flagged. */
export const STRAGGLER_FACTOR = 3;
/** Members that left stay on the table, greyed, this long. */
export const GONE_SHOWN_MS = 30_000;
/** Above this many members the table shows one line per student (no notes under the numbers). */
const LARGE_TABLE = 12;

export type Marker = 'chief' | 'waiting' | 'connecting' | 'straggler' | 'reconnecting' | 'relayed' | 'relay-refused' | 'dropped-before' | 'evicted-before';

const MARKER_TEXT: Record<Marker, string> = {
  chief: 'chief',
  waiting: 'waiting',
  connecting: 'connecting',
  straggler: 'straggler',
  reconnecting: 'reconnecting',
  relayed: 'via server',
  'relay-refused': 'relay refused',
  'dropped-before': 'dropped before',
  'evicted-before': 'evicted before',
};

const MARKER_TITLE: Record<Marker, string> = {
  chief: 'Rank 0: coordinates the ring and writes the checkpoints',
  waiting: 'Joined during the run; enters the ring at the next generation',
  connecting: 'Admitted into the ring; its links are opening or it is taking the chief\'s state',
  straggler: `Its compute time per step is over ${STRAGGLER_FACTOR}× the others' median: the ring waits for it`,
  reconnecting: 'Its connection to the server is down; it may be reconnecting',
  relayed:
    'No direct WebRTC link opened between this device and some classmates (Wi-Fi client isolation, blocked UDP, or WebRTC off on it), so their gradients travel through this server instead. Training goes on; the server carries their share of the traffic.',
  'relay-refused':
    'The server refused to pass on what this device sent a classmate: to a classmate it has no link with, or faster than the classmate\'s connection takes it. An ordinary page never does this; a script may. The classmate stays connected and the class trains on.',
  'dropped-before': 'Was dropped as too slow earlier in this run, then joined again',
  'evicted-before': 'Was evicted earlier in this run (for sending bad ring data, or for publishing no secure-aggregation key), then joined again',
};

function median(xs: number[]): number | null {
  if (xs.length === 0) return null;
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** True when `m`'s compute time is far above the median of the other members' (0 means not measured yet). */
export function isStraggler(m: MemberInfo, members: readonly MemberInfo[]): boolean {
  if (m.computeMs <= 0) return false;
  const others = median(members.filter((o) => o.id !== m.id && o.computeMs > 0).map((o) => o.computeMs));
  return others !== null && m.computeMs > STRAGGLER_FACTOR * others;
}

export function markersOf(m: MemberInfo, s: RoomStatus): Marker[] {
  const markers: Marker[] = [];
  if (m.rank === 0) markers.push('chief');
  if (m.rank === null) markers.push('waiting');
  if (m.connecting) markers.push('connecting');
  if (m.rank !== null && isStraggler(m, s.members)) markers.push('straggler');
  if (!m.connected) markers.push('reconnecting');
  if (s.relay.members.some((r) => r.id === m.id)) markers.push('relayed');
  if (s.relay.refused.some((r) => r.id === m.id)) markers.push('relay-refused');
  if (s.dropped.some((d: DroppedMember) => d.name === m.name && d.reason !== 'evicted')) markers.push('dropped-before');
  if (s.dropped.some((d: DroppedMember) => d.name === m.name && d.reason === 'evicted')) markers.push('evicted-before');
  return markers;
}

export interface GoneMember {
  name: string;
  kind: 'left' | 'dropped' | 'evicted';
  at: number;
  detail: string;
}

/** Members who left or were dropped within `GONE_SHOWN_MS` of `serverNow` and are not back. */
export function recentlyGone(events: readonly RoomEvent[], present: readonly MemberInfo[], serverNow: number): GoneMember[] {
  const here = new Set(present.map((m) => m.name));
  const gone = new Map<string, GoneMember>();
  for (const e of events) {
    if ((e.kind !== 'left' && e.kind !== 'dropped' && e.kind !== 'evicted') || serverNow - e.at > GONE_SHOWN_MS) continue;
    for (const name of e.members) if (!here.has(name)) gone.set(name, { name, kind: e.kind, at: e.at, detail: e.detail });
  }
  return [...gone.values()].sort((a, b) => b.at - a.at);
}

function badge(marker: Marker, m: MemberInfo, s: RoomStatus): HTMLElement {
  if (marker === 'relayed') {
    // How many of its partners it reaches through the server: all of them for a device that opens no direct link.
    const peers = s.relay.members.find((r) => r.id === m.id)?.peers.length ?? 0;
    return h('span', { class: 'badge badge-relayed', title: MARKER_TITLE.relayed, 'data-testid': 'relayed' }, `${MARKER_TEXT.relayed} (${peers} link${peers === 1 ? '' : 's'})`);
  }
  return h('span', { class: `badge badge-${marker}`, title: MARKER_TITLE[marker] }, MARKER_TEXT[marker]);
}

/**
 * How many examples of each class the member holds on its own device (counts only: the
 * examples never leave it), for a run on the class's own data; nothing when it has none.
 */
function ownExamples(m: MemberInfo): HTMLElement | null {
  const entries = Object.entries(m.ownExamples);
  if (entries.length === 0) return null;
  const total = entries.reduce((n, [, count]) => n + count, 0);
  return h(
    'span',
    { class: 'adapter', 'data-testid': 'member-own-examples', title: 'Examples this student collected, per class; they stay on their device' },
    `${total} own: ${entries.map(([label, count]) => `${label} ${count}`).join(' · ')}`,
  );
}

function memberRow(m: MemberInfo, s: RoomStatus, chief: MemberInfo | undefined): HTMLTableRowElement {
  const markers = markersOf(m, s);
  const hashDiffers = !!(chief && chief !== m && m.weightsHash && chief.weightsHash && m.step === chief.step && m.weightsHash !== chief.weightsHash);
  const backend = h('td', { 'data-label': 'Backend' }, BACKEND_LABELS[m.backend], m.kind === 'node' ? ' · Node' : null);
  if (m.adapter) backend.append(h('span', { class: 'adapter' }, m.adapter));
  // The admission probe: what the device is, and how fast it stepped the default model alone.
  if (m.probe) backend.append(h('span', { class: 'adapter', 'data-testid': 'member-probe' }, `${m.probe.device} · ${fixed(m.probe.msPerExample, 2)} ms/example (${m.probe.model})`));
  return h(
    'tr',
    { 'data-member-id': m.id, 'data-markers': markers.join(' '), class: markers.map((k) => `is-${k}`).join(' ') },
    h('th', { scope: 'row', title: `join index ${m.index}` }, m.name, ownExamples(m)),
    h('td', { class: 'num', 'data-label': 'Rank' }, m.rank === null ? dash : String(m.rank)),
    backend,
    h('td', { class: 'num', 'data-label': 'Examples/s' }, m.rank === null || m.examplesPerSec <= 0 ? dash : fixed(m.examplesPerSec, 0)),
    h(
      'td',
      { class: 'num', 'data-label': 'Batch share', 'data-testid': 'batch-share' },
      m.rank === null || m.batchShare <= 0 ? dash : percent(m.batchShare),
      m.rank === null || m.batchShare <= 0 ? null : h('span', { class: 'share-why' }, explainShare(m.speedVsMedian, m.batchShare * s.members.length)),
    ),
    h('td', { class: 'num', 'data-label': 'ms/step' }, m.computeMs > 0 ? fixed(m.computeMs, 0) : dash),
    h('td', { class: 'num', 'data-label': 'Step' }, String(m.step)),
    h(
      'td',
      { class: hashDiffers ? 'hash hash-differs' : 'hash', 'data-label': 'Weights', title: m.weightsHash ? `${m.weightsHash}${hashDiffers ? ' (differs from the chief at the same step)' : ''}` : null },
      m.weightsHash ? m.weightsHash.slice(0, 8) : dash,
    ),
    h('td', { class: 'markers', 'data-label': 'Status' }, ...markers.map((k) => badge(k, m, s))),
  );
}

const GONE_TEXT: Record<GoneMember['kind'], string> = { left: 'left', dropped: 'dropped (too slow)', evicted: 'evicted (bad ring data)' };

function goneRow(g: GoneMember, serverNow: number): HTMLTableRowElement {
  const ago = `${duration(serverNow - g.at)} ago`;
  return h(
    'tr',
    { class: 'is-gone', 'data-gone': g.kind },
    h('th', { scope: 'row' }, g.name),
    h(
      'td',
      { colspan: 8 },
      h('span', { class: `badge badge-${g.kind}` }, GONE_TEXT[g.kind]),
      ` ${ago}${g.detail ? ` · ${g.detail}` : ''}`,
    ),
  );
}

/** Fills the table's two bodies, and the caption's one-line summary. */
export function renderMembers(body: HTMLElement, goneBody: HTMLElement, summary: HTMLElement, s: RoomStatus, serverNow: number): void {
  const chief = s.members.find((m) => m.rank === 0);
  body.replaceChildren(...[...s.members, ...s.waiting].map((m) => memberRow(m, s, chief)));
  // A class of thirty: one line per student, so that the whole class fits on one screen.
  body.closest('table')?.classList.toggle('is-large', s.members.length + s.waiting.length > LARGE_TABLE);
  goneBody.replaceChildren(...recentlyGone(s.events, [...s.members, ...s.waiting], serverNow).map((g) => goneRow(g, serverNow)));
  const total = s.members.reduce((sum, m) => sum + m.examplesPerSec, 0);
  const connecting = s.members.filter((m) => m.connecting).length;
  const parts = [`${s.members.length} in the ring`];
  if (connecting > 0) parts.push(`${connecting} connecting`);
  if (s.waiting.length > 0) parts.push(`${s.waiting.length} waiting`);
  if (total > 0) parts.push(`${total.toFixed(0)} examples/s together`);
  const relayed = s.relay.members.filter((r) => s.members.some((m) => m.id === r.id)).length;
  if (relayed > 0) parts.push(`${relayed} reach classmates through this server (no direct link opened)`);
  const lastJoin = s.joins.at(-1);
  if (lastJoin?.pauseMs != null) parts.push(`the last join paused the class ${(lastJoin.pauseMs / 1000).toFixed(1)} s`);
  // The class's devices from their admission probes, readable before Start: "3 laptops, 1 slow tablet".
  const devices = describeClass([...s.members, ...s.waiting].map((m) => m.probe));
  summary.replaceChildren(h('span', { 'data-testid': 'class-devices' }, devices), devices ? ' · ' : '', parts.join(' · '));
}
