/** The ring's history: its event log, the students dropped (too slow, unreachable, failed) or evicted for bad ring data, and the weight checks. */
import type { DroppedMember, RoomEvent, RoomStatus } from '../../shared/protocol';
import { byId, h } from './dom';
import { clockTime, fixed } from './format';

const EVENT_TEXT: Record<RoomEvent['kind'], string> = {
  joined: 'joined',
  left: 'left',
  admitted: 'admitted to the ring',
  dropped: 'dropped from the ring',
  evicted: 'evicted for bad ring data',
  resynced: 'weights resynced',
  reformed: 'ring re-formed',
  'hub-joined': 'joined as the hub',
  'hub-left': 'left as the hub (the ring takes over)',
  'hub-accused': 'accused the hub of bad ring data (recorded; the hub stays unless most of the ring says so)',
  'hub-removed': 'removed as the hub; no hub joins for now (the ring takes over)',
  'hub-allowed': 'a hub may join again',
  stalled: 'the run stopped: the class made no progress',
};

/** What the dropped table says beside each reason but 'straggler' (which has its own columns). */
const DROP_DETAIL: Record<DroppedMember['reason'], (d: DroppedMember) => string> = {
  straggler: () => '',
  evicted: (d) => `${d.misbehaviour ?? ''}${d.reportedBy ? `, seen by ${d.reportedBy}` : ''}`,
  unreachable: (d) => `its links would not open${d.reportedBy ? ` (${d.reportedBy} could not reach it)` : ''}; it joins again by itself`,
  failed: (d) => `training failed on it (${d.detail}); it joins again by itself`,
};

export function renderRoomLog(s: RoomStatus): void {
  const c = s.consistency;
  byId('t-consistency').textContent =
    `${c.checks} hash comparison${c.checks === 1 ? '' : 's'}, ${c.mismatches} mismatch${c.mismatches === 1 ? '' : 'es'}` +
    (c.lastMismatchStep === null ? '' : `, last at step ${c.lastMismatchStep} (resynced from the chief)`);
  byId('t-consistency').classList.toggle('has-mismatch', c.mismatches > 0);
  byId('t-generation').textContent = String(s.generation);
  byId('t-run').textContent = s.run === 0 ? '–' : String(s.run);

  byId('no-dropped').hidden = s.dropped.length > 0;
  byId('dropped-table').hidden = s.dropped.length === 0;
  byId('dropped').replaceChildren(
    ...s.dropped.map((d) =>
      d.reason === 'straggler'
        ? h('tr', { 'data-reason': d.reason }, h('th', { scope: 'row' }, d.name), h('td', { class: 'num' }, String(d.step)), h('td', { class: 'num' }, `${fixed(d.computeMs, 0)} ms`), h('td', { class: 'num' }, `${fixed(d.deadlineMs, 0)} ms`))
        : h(
            'tr',
            { 'data-reason': d.reason, class: 'is-evicted', title: d.detail },
            h('th', { scope: 'row' }, d.name),
            h('td', { class: 'num' }, String(d.step)),
            h('td', { colspan: 2 }, h('span', { class: 'badge badge-evicted' }, d.reason), ` ${DROP_DETAIL[d.reason](d)}`),
          ),
    ),
  );

  byId('no-events').hidden = s.events.length > 0;
  byId('events').replaceChildren(
    ...s.events
      .slice()
      .reverse()
      .map((e) =>
        h(
          'li',
          { class: `event event-${e.kind}` },
          h('time', { datetime: new Date(e.at).toISOString() }, clockTime(e.at)),
          ` · step ${e.step} · `,
          e.members.length > 0 ? h('strong', {}, e.members.join(', ')) : null,
          e.members.length > 0 ? ' ' : null,
          EVENT_TEXT[e.kind],
          e.detail ? ` (${e.detail})` : '',
        ),
      ),
  );
}
