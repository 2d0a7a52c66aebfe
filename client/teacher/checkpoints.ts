/**
 * The checkpoint list: when and by whom each was saved, whether another student's replica
 * vouched for it, its two model files to download (tf.loadLayersModel needs model.json and
 * model.weights.bin, one above the other), "Restore", which starts a run from it with the
 * form's config, and Delete (a checkpoint the teacher does not trust).
 */
import type { CheckpointInfo, CheckpointTrustState } from '../../shared/checkpoints/checkpoint';
import type { MemberInfo } from '../../shared/protocol';
import { h } from './dom';
import { bytes, clockTime } from './format';
import { PROGRAM_WORKLOAD } from '../../shared/protocol/start-config';

/** Why a program's checkpoint has no Restore here. */
const PROGRAM_RESTORE_TITLE = "A program's own model (fitDataset): the program resumes it, with resumeFrom; this form's tasks cannot";

export interface CheckpointView {
  list: readonly CheckpointInfo[];
  /** Members known now, to name a writer whose checkpoint predates stored names; an id that left shows shortened. */
  members: readonly MemberInfo[];
  fileUrl: (id: string, file: string) => string;
  /** Restoring starts a run, so it is offered only while no run is in progress. */
  canRestore: boolean;
  busy: boolean;
}

const TRUST_LABEL: Record<CheckpointTrustState, string> = { vouched: 'vouched', unvouched: 'not vouched yet', contradicted: 'differs' };
const TRUST_TITLE: Record<CheckpointTrustState, string> = {
  vouched: 'Another replica reported the same weights at this step (or the chief trained alone)',
  unvouched: 'No other replica has reported its weights at this step yet',
  contradicted: 'Other replicas reported different weights at this step: it is never resumed from while a vouched one exists',
};

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
        // The first is what a Start resumes from: the newest vouched one (checkpoints.md).
        h('td', { class: 'num' }, String(c.step), i === 0 ? h('span', { class: 'badge badge-newest' }, 'latest') : null),
        h('td', { class: 'num' }, String(c.epoch + 1)),
        h('td', { title: c.createdAt }, clockTime(c.createdAt)),
        h('td', { class: 'num' }, bytes(c.bytes)),
        // The member id stays in the tooltip: the table must fit its card with the actions visible.
        h('td', { title: `member ${c.writer}` }, c.writerName || names.get(c.writer) || c.writer.slice(0, 8)),
        h('td', { title: TRUST_TITLE[c.trust.state] }, TRUST_LABEL[c.trust.state], c.trust.by && c.trust.by !== c.writer ? ` by ${names.get(c.trust.by) ?? c.trust.by.slice(0, 8)}` : ''),
        h('td', { class: 'downloads' }, download('model.json', 'model.json'), download('model.weights.bin', 'weights.bin')),
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
              // A program's checkpoint holds the program's own model: its program resumes it (fitDataset), not this form.
              disabled: !view.canRestore || view.busy || c.task === PROGRAM_WORKLOAD,
              title: c.task === PROGRAM_WORKLOAD ? PROGRAM_RESTORE_TITLE : view.canRestore ? 'Start a run from this checkpoint with the config above' : 'Stop the run first',
            },
            'Restore',
          ),
          ' ',
          h(
            'button',
            {
              type: 'button',
              class: 'small danger',
              'data-delete': c.id,
              'aria-label': `Delete the checkpoint of step ${c.step}`,
              disabled: view.busy,
            },
            'Delete',
          ),
        ),
      );
    }),
  );
}
