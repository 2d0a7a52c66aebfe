/**
 * The ring as a picture: members in rank order clockwise from the top, the chief filled, and
 * an arrow from each rank to the next labelled with the throughput the sender measured on
 * that link during the last all-reduce (MemberInfo.linkMBps). A class larger than
 * LARGE_CLASS is drawn on a wider ring without the link labels (thirty of them overlap the
 * names; the description keeps them), with the class's progress in the middle: how many
 * are in step, how many are still connecting (a join storm) and how many wait. Below it, one line on the
 * room's hub member, when it has one (with the teacher's Remove), or on its absence when the
 * teacher or the server removed it (with Let a hub join again).
 */
import type { MemberInfo, RoomStatus } from '../../shared/protocol';
import { h, s } from './dom';
import { isStraggler } from './members-table';

const VIEW_W = 480;
const VIEW_H = 440;
const CX = VIEW_W / 2;
const CY = VIEW_H / 2;
const RING_RADIUS = 140;
const LARGE_RADIUS = 150;
const NAME_MAX_CHARS = 10;
/** Names shorter still on a ring this crowded. */
const CROWDED_NAME_MAX_CHARS = 7;
/** Above this many members the ring is drawn for a class (see the file comment). */
export const LARGE_CLASS = 12;

const shorten = (name: string, max: number) => (name.length > max ? `${name.slice(0, max - 1)}…` : name);
const short = (name: string) => shorten(name, NAME_MAX_CHARS);
const mbps = (v: number) => (v > 0 ? `${v.toFixed(1)} MB/s` : '… MB/s');

/** Angle of rank `i` of `n`, clockwise from 12 o'clock. */
const angleOf = (i: number, n: number) => -Math.PI / 2 + (2 * Math.PI * i) / n;
const at = (angle: number, r: number) => ({ x: CX + r * Math.cos(angle), y: CY + r * Math.sin(angle) });
const n1 = (v: number) => v.toFixed(1);

export function renderRing(container: HTMLElement, status: RoomStatus): void {
  const members = status.members;
  const n = members.length;
  const large = n > LARGE_CLASS;
  const RADIUS = large ? LARGE_RADIUS : RING_RADIUS;
  const nameOf = (name: string) => shorten(name, n > 16 ? CROWDED_NAME_MAX_CHARS : NAME_MAX_CHARS);
  const nodeR = Math.max(12, Math.min(34, RADIUS * Math.sin(Math.PI / Math.max(n, 2)) * 0.55));
  const labelFont = n <= 8 ? 20 : n <= 16 ? 14 : 11;
  // A large class's names go outside the ring, where there is room for them at a size a projector shows.
  const nameFont = n <= 8 ? 18 : 13;

  const desc =
    n === 0
      ? 'Nobody has joined yet.'
      : members.map((m, i) => `${m.name} (rank ${i}${i === 0 ? ', chief' : ''}) sends to ${members[(i + 1) % n]!.name} at ${mbps(m.linkMBps)}`).join('; ');
  const svg = s(
    'svg',
    { viewBox: `0 0 ${VIEW_W} ${VIEW_H}`, role: 'img', 'aria-labelledby': 'ring-svg-title ring-svg-desc', class: 'ring-svg' },
    s('title', { id: 'ring-svg-title' }, `Ring of ${n} member${n === 1 ? '' : 's'}`),
    s('desc', { id: 'ring-svg-desc' }, n === 1 ? `${members[0]!.name} alone: nothing to all-reduce yet.` : desc),
    s('defs', {}, s('marker', { id: 'ring-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'ring-arrowhead' }))),
  );

  if (n === 0) {
    svg.append(s('text', { x: CX, y: CY, class: 'ring-empty', 'text-anchor': 'middle', 'dominant-baseline': 'middle' }, 'Waiting for students to join'));
    container.replaceChildren(svg);
    return;
  }

  svg.append(s('circle', { cx: CX, cy: CY, r: RADIUS, class: 'ring-track' }));
  if (n > 1) {
    // The arc leaves and enters each node at its rim: offset the end angles by the node's angular radius.
    const gap = (nodeR + 4) / RADIUS;
    members.forEach((m, i) => {
      const a0 = angleOf(i, n) + gap;
      const a1 = angleOf(i + 1, n) - gap;
      const p0 = at(a0, RADIUS);
      const p1 = at(a1, RADIUS);
      const largeArc = a1 - a0 > Math.PI ? 1 : 0;
      const mid = (a0 + a1) / 2;
      const label = at(mid, RADIUS + nodeR * 0.3 + labelFont * 1.4);
      svg.append(s('path', { d: `M${n1(p0.x)},${n1(p0.y)} A${RADIUS},${RADIUS} 0 ${largeArc} 1 ${n1(p1.x)},${n1(p1.y)}`, class: 'ring-link', 'marker-end': 'url(#ring-arrow)' }));
      if (!large) svg.append(s('text', { x: n1(label.x), y: n1(label.y), class: 'ring-link-label', 'font-size': labelFont, 'text-anchor': 'middle', 'dominant-baseline': 'middle' }, mbps(m.linkMBps)));
    });
  }
  members.forEach((m: MemberInfo, i) => {
    const p = at(angleOf(i, n), RADIUS);
    const angle = angleOf(i, n);
    const name = at(angle, large ? RADIUS + nodeR + 4 : RADIUS - nodeR - nameFont * 0.9);
    // Outside the ring a name reads away from it: leftwards on the left half, rightwards on the right.
    const cos = Math.cos(angle);
    const anchor = !large || Math.abs(cos) < 0.2 ? 'middle' : cos > 0 ? 'start' : 'end';
    const nameY = large ? name.y + Math.sin(angle) * nameFont * 0.6 : name.y;
    const classes = ['ring-node', i === 0 ? 'is-chief' : '', m.connected ? '' : 'is-reconnecting', m.connecting ? 'is-connecting' : '', isStraggler(m, members) ? 'is-straggler' : ''].filter(Boolean).join(' ');
    svg.append(
      s(
        'g',
        { class: classes },
        s('circle', { cx: n1(p.x), cy: n1(p.y), r: n1(nodeR) }),
        s('text', { x: n1(p.x), y: n1(p.y), class: 'ring-rank', 'font-size': n1(nodeR * 0.9), 'text-anchor': 'middle', 'dominant-baseline': 'central' }, String(i)),
        s('text', { x: n1(name.x), y: n1(nameY), class: 'ring-name', 'font-size': nameFont, 'text-anchor': anchor, 'dominant-baseline': 'middle' }, nameOf(m.name)),
      ),
    );
  });
  const chief = members[0]!;
  const centre = (y: number, text: string, testId?: string) =>
    s('text', { x: CX, y, class: 'ring-center', 'text-anchor': 'middle', 'dominant-baseline': 'middle', ...(testId ? { 'data-testid': testId } : {}) }, text);
  if (!large) {
    svg.append(centre(CY, `chief: ${short(chief.name)}`));
  } else {
    svg.append(centre(CY - 28, `chief: ${short(chief.name)}`), centre(CY + 2, classProgress(status), 'ring-progress'));
    const waiting = status.waiting.length;
    if (waiting > 0) svg.append(centre(CY + 32, `${waiting} waiting to be admitted`));
  }
  container.replaceChildren(svg);
}

/** "24 of 30 in step · 6 connecting": how far a join storm has come. */
export function classProgress(status: RoomStatus): string {
  const n = status.members.length;
  const connecting = status.members.filter((m) => m.connecting).length;
  return connecting === 0 ? `all ${n} in step` : `${n - connecting} of ${n} in step · ${connecting} connecting`;
}

export interface HubActions {
  remove(): void;
  allow(): void;
}

/**
 * The hub member's line: who it is, whether it is connected, what it sees, who accused it,
 * and the teacher's Remove; or, once removed, that the class runs without a hub. Hidden when
 * the room has no hub and refuses none.
 */
export function renderHub(el: HTMLElement, status: RoomStatus, actions: HubActions): void {
  const hub = status.hub;
  const { barred, accusers, accusersNeeded } = status.hubAccess;
  el.hidden = hub === null && barred === null;
  el.dataset.state = hub ? 'present' : barred ? `removed-by-${barred.by}` : 'none';
  if (hub) {
    const accused = `Accused of bad ring data by ${accusers.join(', ')} (${accusers.length} of the ${accusersNeeded} students it takes for the server to remove it). `;
    el.replaceChildren(
      'Hub: ',
      h('strong', {}, hub.name),
      hub.connected ? ' (connected). ' : ' (reconnecting). ',
      'It sums the gradients when the hub collective runs, and sees each student\'s gradient. ',
      ...(accusers.length > 0 ? [h('span', { 'data-testid': 'hub-accusers' }, accused)] : []),
      button('Remove the hub', 'hub-remove', actions.remove),
    );
    return;
  }
  if (!barred) {
    el.replaceChildren();
    return;
  }
  el.replaceChildren(
    h('strong', {}, 'No hub: '),
    barred.by === 'teacher'
      ? 'you removed it, so the class runs without a hub: the gradients are summed around the ring. No hub joins until you let one in. '
      : `the server removed it for the rest of this run (${barred.detail}), so the class runs without a hub: the gradients are summed around the ring. `,
    button('Let a hub join again', 'hub-allow', actions.allow),
  );
}

function button(label: string, testId: string, onClick: () => void): HTMLButtonElement {
  const b = h('button', { type: 'button', class: 'small', 'data-testid': testId }, label);
  b.addEventListener('click', onClick);
  return b;
}
