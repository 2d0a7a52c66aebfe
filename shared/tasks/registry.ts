/**
 * Every task webring can train, in the order the teacher's form lists them; the first is
 * the default (`TASK=` at `npm start` picks another for the room's form). A new task is
 * one folder beside this file and one line below, with one line each in models.ts (its
 * tfjs models, loaded only where the maths runs) and pages.ts (its page panels, loaded only
 * in the browser) so that the server and the pages' first paint never load tfjs.
 */
import { WebringError } from '../protocol/errors';
import type { TaskCatalog } from '../protocol/start-config';
import { catalogEntryOf, featureCount, type Task, type TaskDataset } from './task';
import { mnistTask } from './mnist/task';
import { namesTask } from './names/task';

export const TASKS: readonly Task[] = [
  mnistTask,
  namesTask,
];

export const DEFAULT_TASK: Task = TASKS[0]!;

/** The task with id `id`, or undefined. */
export function findTask(id: string): Task | undefined {
  return TASKS.find((t) => t.id === id);
}

/** The task with id `id`; an unknown one is ERR_UNKNOWN_TASK naming the field `task`. */
export function taskOf(id: string): Task {
  const task = findTask(id);
  if (!task) throw new WebringError('ERR_UNKNOWN_TASK', `no task ${id.slice(0, 40)}; there are ${TASKS.map((t) => t.id).join(', ')}`, 'task');
  return task;
}

/** The dataset with id `id` of any task, and its task; undefined when none has it. */
export function findDataset(id: string): { task: Task; dataset: TaskDataset } | undefined {
  for (const task of TASKS) {
    const dataset = task.datasets.find((d) => d.id === id);
    if (dataset) return { task, dataset };
  }
  return undefined;
}

/** Every dataset's id, for error messages. */
export const DATASET_IDS: readonly string[] = TASKS.flatMap((t) => t.datasets.map((d) => d.id));

/** The tasks as the protocol's start-config check sees them. */
export const TASK_CATALOG: TaskCatalog = {
  defaultTask: DEFAULT_TASK.id,
  ids: TASKS.map((t) => t.id),
  entry: (id) => {
    const task = findTask(id);
    return task ? catalogEntryOf(task) : undefined;
  },
};

/** What the server and pages need of a dataset without its task: its splits' sizes and F, the features of one example; null for an unknown id. */
export function datasetFacts(id: string): { trainCount: number; testCount: number; features: number } | null {
  const found = findDataset(id);
  if (!found) return null;
  return { trainCount: found.dataset.trainCount, testCount: found.dataset.testCount, features: featureCount(found.task.example) };
}

/** F, the numbers in one example of task `task` (the engine's only knowledge of an example's shape). */
export function featuresOf(task: string): number {
  return featureCount(taskOf(task).example);
}
