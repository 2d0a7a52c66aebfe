/**
 * Where a run's examples come from when the worker is given no other source: the server's
 * digits streamed from its data service (streamed-mnist.ts), or for a run on the class's
 * own data this device's own examples (own-data.ts), beside the digits where the run's
 * classes are digits. The test set: MNIST's test digits for a run of the digits, else every
 * device's held-out fifth.
 */
import { areDigitClasses } from '../protocol';
import type { DataFactory } from './data-source';
import type { OwnExamples } from './own-examples';
import { OwnDataSource } from './own-data';
import { streamFromDataService } from './streamed-mnist';

/** The data factory of a device whose own examples for a run's classes `ownExamples` gives (null: none). */
export function runData(ownExamples: (classes: readonly string[]) => OwnExamples | null): DataFactory {
  return (config, context) => {
    if (config.data === 'mnist') return streamFromDataService(config, context);
    const own = ownExamples(config.classes);
    // Beside the class's own examples the digits are cut as the epoch's line says, which
    // plans their fetches itself (own-data.ts).
    const digits = areDigitClasses(config.classes) ? streamFromDataService(config, context, { planAhead: config.data !== 'mnist+own' }) : null;
    return new OwnDataSource(config, own, digits, config.data === 'mnist+own' ? digits : null);
  };
}
