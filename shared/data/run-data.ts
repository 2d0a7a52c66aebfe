/**
 * Where a run's examples come from when the worker is given no other source: the task's
 * dataset streamed from the server's data service (streamed-dataset.ts), or for a run on
 * the class's own data this device's own examples (own-data.ts), beside the dataset where
 * the run's classes are the dataset's. The test set: the dataset's held-out split for a run
 * of its classes, else every device's held-out fifth.
 */
import { sameClasses, type StartConfig } from '../protocol';
import { taskOf } from '../tasks/registry';
import type { DataFactory } from './data-source';
import type { OwnExamples } from './own-examples';
import { OwnDataSource } from './own-data';
import { streamFromDataService } from './streamed-dataset';

/** What a device's own examples are asked for: the run's task and classes. */
export type OwnRun = Pick<StartConfig, 'task' | 'classes'>;

/** The data factory of a device whose own examples for a run `ownExamples` gives (null: none). */
export function runData(ownExamples: (run: OwnRun) => OwnExamples | null): DataFactory {
  return (config, context) => {
    if (config.data === 'dataset') return streamFromDataService(config, context);
    const own = ownExamples(config);
    // Beside the class's own examples the dataset is cut as the epoch's line says, which
    // plans its fetches itself (own-data.ts).
    const shared = sameClasses(config.classes, taskOf(config.task).outputs) ? streamFromDataService(config, context, { planAhead: config.data !== 'dataset+own' }) : null;
    return new OwnDataSource(config, own, shared, config.data === 'dataset+own' ? shared : null);
  };
}
