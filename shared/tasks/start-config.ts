/**
 * The start config checked against the registry's tasks: the one schema the server, the
 * teacher's form, checkpoints and workers use (the protocol's startConfigSchemaFor over
 * TASK_CATALOG), and the config a teacher gets without touching the form.
 */
import { startConfigSchemaFor, type StartConfig } from '../protocol/start-config';
import { z } from 'zod';
import { TASK_CATALOG } from './registry';
import { mnistTask } from './mnist/task';

export const startConfigSchema = startConfigSchemaFor(TASK_CATALOG);

/** The default task's recipe, every field filled in: what an empty form starts. */
export const DEFAULT_START_CONFIG: StartConfig = startConfigSchema.parse({});

/** The defaults of task `task` (its model, dataset, outputs and recipe). */
export function defaultConfigOf(task: string): StartConfig {
  return startConfigSchema.parse({ task });
}

/** The `data` values a server wrote before workloads were tasks, and what they are now. */
const DATA_BEFORE_TASKS: Record<string, string> = { mnist: 'dataset', 'mnist+own': 'dataset+own' };

/**
 * A local-steps config stored before rounds had an inner optimizer of their own trained
 * them with the run's optimizer and rate (its checkpoints hold that optimizer's state):
 * read as what it meant.
 */
function withInnerOptimizerOfOld(old: Record<string, unknown>): Record<string, unknown> {
  if (old.sync !== 'local-steps' || 'localOptimizer' in old) return old;
  return { ...old, localOptimizer: old.optimizer, localLearningRate: old.learningRate };
}

/**
 * A config as stored (checkpoint metadata, room.json): one written before workloads were
 * tasks names its data 'mnist' or 'mnist+own' and no task, and means the digits. Read as
 * what it meant, so a teacher's checkpoints still resume after an upgrade.
 */
export const storedConfigSchema = z.preprocess((raw) => {
  if (raw === null || typeof raw !== 'object') return raw;
  const old = withInnerOptimizerOfOld(raw as Record<string, unknown>);
  if ('task' in old) return old;
  const data = typeof old.data === 'string' ? (DATA_BEFORE_TASKS[old.data] ?? old.data) : old.data;
  return { ...old, task: mnistTask.id, data };
}, startConfigSchema);
