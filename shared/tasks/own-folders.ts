/**
 * How a Node worker reads its own examples from a folder (`--data DIR`), per task: Node
 * only (it reads files), so apart from the registry the pages import. A task whose class
 * can collect examples and whose Node workers can bring theirs adds one line here.
 */
import { readOwnFolder as readDrawings, type OwnFolder } from './mnist/own-folder';
import { readOwnNames } from './names/own-folder';

const READERS: Record<string, (dir: string) => OwnFolder> = {
  mnist: readDrawings,
  names: readOwnNames,
};

/** The reader of task `task`'s own examples (mnist: a folder of PNGs per class; names: .txt files of names), or null for a task whose Node workers bring none. */
export function ownFolderReader(task: string): ((dir: string) => OwnFolder) | null {
  return READERS[task] ?? null;
}
