/**
 * Every task's models, by task id: imported only where the maths runs (the compute
 * thread, the lab, pages that run a checkpoint), since it brings in tfjs. A new task adds
 * one line here beside its line in registry.ts.
 */
import { WebringError } from '../protocol/errors';
import type { TaskModels } from './task';
import { mnistModels } from './mnist/models';
import { namesModels } from './names/models';

const MODELS: Record<string, TaskModels> = {
  mnist: mnistModels,
  names: namesModels,
};

/** The models of task `task`; ERR_UNKNOWN_TASK for a task without any. */
export function modelsOf(task: string): TaskModels {
  const models = MODELS[task];
  if (!models) throw new WebringError('ERR_UNKNOWN_TASK', `no models for the task ${task.slice(0, 40)}`, 'task');
  return models;
}
