/**
 * What the pages show of a task, loaded in the browser only when a page needs it (each
 * task's page/ folder is a chunk of its own): the student page's "try the model" panel,
 * asking the tab's live weights, and the teacher page's, asking the latest checkpoint.
 * A task with pages adds one line here.
 */
import { WebringError } from '../protocol/errors';
import type { TaskPages } from './try-panel';

export type { TaskPages, TryPanel, TryPanelOptions } from './try-panel';

const PAGES: Record<string, () => Promise<TaskPages>> = {
  mnist: () => import('./mnist/page/pages').then((m) => m.mnistPages),
  names: () => import('./names/page/pages').then((m) => m.namesPages),
};

/** The pages of task `task` (a chunk loaded on first use). */
export function loadPages(task: string): Promise<TaskPages> {
  const load = PAGES[task];
  if (!load) return Promise.reject(new WebringError('ERR_UNKNOWN_TASK', `no pages for the task ${task.slice(0, 40)}`, 'task'));
  return load();
}
