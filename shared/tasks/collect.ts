/**
 * What a room collects (PUT /api/rooms/:room/collect, `room:collect`): items of one task,
 * filed under its labels. Shared by the server, which checks a teacher's request against
 * the task, and the pages and workers, which open the matching collection on the device.
 */
import { WebringError } from '../protocol/errors';
import { sameClasses, type CollectSetting } from '../protocol';
import type { z } from 'zod';
import type { collectRequestSchema } from '../protocol/messages';
import { DEFAULT_TASK, findTask, taskOf } from './registry';
import { ownLabels, type OwnData, type Task } from './task';

export type CollectRequest = z.output<typeof collectRequestSchema>;

/** The task a setting collects for: a setting stored before tasks names none, and collected the default task's drawings. */
export function collectTaskOf(setting: Pick<CollectSetting, 'task'>): Task {
  return taskOf(setting.task ?? DEFAULT_TASK.id);
}

/** The task's own data; ERR_BAD_REQUEST naming `task` for a task the class collects nothing for. */
export function ownDataOf(task: Task): OwnData {
  if (!task.own) throw new WebringError('ERR_BAD_REQUEST', `the task ${task.id} trains on its dataset only: the class cannot collect examples of its own for it`, 'task');
  return task.own;
}

/** The labels a setting's items are filed and counted under: its classes, or its text task's one label. */
export function collectLabelsOf(setting: CollectSetting): readonly string[] {
  return ownLabels(ownDataOf(collectTaskOf(setting)), setting.classes);
}

/**
 * A teacher's request to the room's setting, null to stop collecting: classes for a task
 * whose class names them, none for a text task. A bad request is a coded error naming the
 * field (ERR_UNKNOWN_TASK, ERR_BAD_REQUEST), and the room is left as it was.
 */
export function collectSettingFor(request: CollectRequest): CollectSetting | null {
  if (request.classes === null) return null;
  const task = collectTaskOf(request);
  const own = ownDataOf(task);
  if (own.collects === 'text') {
    if (request.classes !== undefined) throw new WebringError('ERR_BAD_REQUEST', `the class collects ${own.label} for the task ${task.id}, which names no classes: leave classes out`, 'classes');
    return { task: task.id };
  }
  if (request.classes === undefined) throw new WebringError('ERR_BAD_REQUEST', `name the classes to collect for the task ${task.id}, or classes: null to stop`, 'classes');
  return { task: task.id, classes: [...request.classes] };
}

/** The labels a run's own examples are counted under (its classes, or its text task's one label); null for a run on the dataset alone. */
export function runOwnLabels(config: { task: string; data: string; classes: readonly string[] }): readonly string[] | null {
  const own = config.data === 'dataset' ? null : findTask(config.task)?.own;
  return own ? ownLabels(own, config.classes) : null;
}

/** Whether two settings collect the same items (the same task and labels): a device keeps one collection per room and setting. */
export function sameCollection(a: CollectSetting, b: CollectSetting): boolean {
  return collectTaskOf(a).id === collectTaskOf(b).id && sameClasses(a.classes ?? [], b.classes ?? []);
}

/**
 * Whether a run of `config` trains the items of `setting`: the same task, and for classes,
 * the same classes (a text task's run always has the task's own outputs).
 */
export function collectionServes(setting: CollectSetting, config: { task: string; classes: readonly string[] }): boolean {
  const task = collectTaskOf(setting);
  if (task.id !== config.task) return false;
  return task.own?.collects === 'text' || sameClasses(setting.classes ?? [], config.classes);
}
