/**
 * The start config checked against the registry's tasks: the one schema the server, the
 * teacher's form, checkpoints and workers use (the protocol's startConfigSchemaFor over
 * TASK_CATALOG), and the config a teacher gets without touching the form.
 */
import { startConfigSchemaFor, type StartConfig } from '../protocol/start-config';
import { TASK_CATALOG } from './registry';

export const startConfigSchema = startConfigSchemaFor(TASK_CATALOG);

/** The default task's recipe, every field filled in: what an empty form starts. */
export const DEFAULT_START_CONFIG: StartConfig = startConfigSchema.parse({});

/** The defaults of task `task` (its model, dataset, outputs and recipe). */
export function defaultConfigOf(task: string): StartConfig {
  return startConfigSchema.parse({ task });
}
