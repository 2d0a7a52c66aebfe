/**
 * The checkpoint list: when and by whom each was saved, its two model files to download
 * (tf.loadLayersModel needs model.json and model.weights.bin side by side), and "Restore
 * this one", which starts a run from it with the form's config.
 */
import type { CheckpointInfo } from '../../shared/checkpoints/checkpoint';
import type { MemberInfo } from '../../shared/protocol';
import { h } from './dom';
import { bytes, clockTime } from './format';

export interface CheckpointView {
  list: readonly CheckpointInfo[];
  /** Members known now, to name the writer; an id that left shows shortened. */
  members: readonly MemberInfo[];
  fileUrl: (id: string, file: string) => string;
  /** Restoring starts a run, so it is offered only while no run is in progress. */
  canRestore: boolean;
  busy: boolean;
}

export function renderCheckpoints(body: HTMLElement, empty: HTMLElement, view: CheckpointView): void {
  empty.hidden = view.list.length > 0;
  body.closest<HTMLElement>('.table-scroll')?.toggleAttribute('hidden', view.list.length === 0);
  const names = new Map(view.members.map((m) => [m.id, m.name]));
  body.replaceChildren(
    ...view.list.map((c, i) => {
      const download = (file: string, label: string) =>
        h('a', { href: view.fileUrl(c.id, file), download: file, 'aria-label': `Download ${file} of step ${c.step}` }, label);
      return h(
        'tr',
        { 'data-checkpoint-id': c.id },
        h('td', { class: 'num' }, String(c.step), i === 0 ? h('span', { class: 'badge badge-newest' }, 'newest') : null),
        h('td', { class: 'num' }, String(c.epoch + 1)),
        h('td', { title: c.createdAt }, clockTime(c.createdAt)),
        h('td', { class: 'num' }, bytes(c.bytes)),
        h('td', { title: c.writer }, names.get(c.writer) ?? c.writer.slice(0, 8)),
        h('td', { class: 'downloads' }, download('model.json', 'model.json'), ' + ', download('model.weights.bin', 'weights.bin')),
        h(
          'td',
          {},
          h(
            'button',
            {
              type: 'button',
              class: 'secondary small',
              'data-restore': c.id,
              'aria-label': `Restore the checkpoint of step ${c.step}`,
              disabled: !view.canRestore || view.busy,
              title: view.canRestore ? 'Start a run from this checkpoint with the config above' : 'Stop the run first',
            },
            'Restore this one',
          ),
        ),
      );
    }),
  );
}
