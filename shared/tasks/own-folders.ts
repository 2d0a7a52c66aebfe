/**
 * How a Node worker reads its own examples from a folder (`--data DIR`), per task: Node
 * only (it reads files), so apart from the registry the pages import. A task whose class
 * can collect examples and whose Node workers can bring theirs adds one line here.
 */
import type { MemoryOwnExamples } from '../data/own-examples';
import { readOwnFolder as readDrawings } from './mnist/own-folder';

/** What a folder gave: the examples, and one line per file or folder skipped, naming it and why. */
export interface OwnFolder {
  store: MemoryOwnExamples;
  errors: string[];
}

const READERS: Record<string, (dir: string) => OwnFolder> = {
  mnist: readDrawings,
};

/** The reader of task `task`'s own examples, or null for a task whose Node workers bring none. */
export function ownFolderReader(task: string): ((dir: string) => OwnFolder) | null {
  return READERS[task] ?? null;
}
