/**
 * Where the chief's last step went: which all-reduce algorithm carried the gradients (and
 * the link model that chose it), and a bar splitting the step into compute, read-back,
 * all-reduce and apply, so a class sees whether the maths or the network is the bottleneck.
 */
import type { RoomStatus, StepTimingReport } from '../../shared/protocol';
import { h } from './dom';
import { fixed } from './format';

const PARTS: Array<{ key: keyof StepTimingReport; label: string }> = [
  { key: 'computeMs', label: 'compute' },
  { key: 'readbackMs', label: 'read-back' },
  { key: 'crossMs', label: 'thread crossing' },
  { key: 'commMs', label: 'all-reduce' },
  { key: 'applyMs', label: 'apply' },
];

const ALGORITHM_LABELS = { ring: 'the ring', 'halving-doubling': 'halving-doubling', hub: 'the hub' } as const;
/** Said whenever the hub sums: it is the one place that sees every student's own gradient. */
const HUB_PRIVACY_NOTE = 'The hub sees each student\'s gradient (not their examples).';

export function renderStepSplit(container: HTMLElement, status: RoomStatus): void {
  const chief = status.members[0];
  const c = chief?.collective ?? null;
  if (!c || status.members.length === 0) {
    container.replaceChildren(h('p', { class: 'hint' }, 'The split of a step appears with the first step.'));
    return;
  }
  const measured = c.alphaMs > 0 ? ` (${status.config?.allreduce === 'auto' ? 'picked from' : 'with'} α ${fixed(c.alphaMs, 2)} ms per hop, β ${fixed(c.betaMBps, 1)} MB/s)` : '';
  const total = PARTS.reduce((sum, p) => sum + c.timing[p.key], 0);
  const bar = h(
    'div',
    { class: 'split-bar', role: 'img', 'aria-label': PARTS.map((p) => `${p.label} ${fixed(c.timing[p.key], 0)} ms`).join(', ') },
    ...PARTS.map((p) => {
      const part = h('span', { class: `split-part split-${p.key}`, title: `${p.label}: ${fixed(c.timing[p.key], 1)} ms` });
      // Through the CSSOM, not a style attribute: the page's Content-Security-Policy allows no inline styles.
      part.style.flexGrow = String(total > 0 ? c.timing[p.key] / total : 0);
      return part;
    }),
  );
  const legend = h(
    'ul',
    { class: 'split-legend' },
    ...PARTS.map((p) => h('li', {}, h('span', { class: `split-swatch split-${p.key}` }), `${p.label} ${fixed(c.timing[p.key], 0)} ms`)),
  );
  container.replaceChildren(
    h('p', { 'data-testid': 'collective-summary', 'data-algorithm': c.algorithm }, `Gradients travel by ${ALGORITHM_LABELS[c.algorithm]}${measured}. The chief's last step:`),
    h('p', { 'data-testid': 'collective-reason' }, c.reason),
    ...(c.algorithm === 'hub' ? [h('p', { 'data-testid': 'hub-privacy', class: 'note' }, HUB_PRIVACY_NOTE)] : []),
    bar,
    legend,
  );
}
