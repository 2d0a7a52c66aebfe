/**
 * A Node worker's own names (`--data DIR --data-task names`): every `.txt` file in the
 * folder, in name order, one name a line, read as a student's typed names are (own-names.ts:
 * trimmed, lower-cased, letters a–z and "-"). A line that is no name is named in the
 * result's errors and the rest still load, as is a file that cannot be read or is larger
 * than MAX_NAMES_FILE_BYTES. The store's key is a hash of the names read: the same folder is
 * the same device to a resumed run, a changed one a new device (own-examples.ts).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { MemoryOwnExamples } from '../../data/own-examples';
import { toWebringError } from '../../protocol/errors';
import { mixSeed } from '../../util/random';
import type { OwnFolder } from '../mnist/own-folder';
import { OWN_NAMES } from './own-names';

/** The largest names file read: 1 MiB is about 150,000 names, far more than a class types. */
export const MAX_NAMES_FILE_BYTES = 1024 * 1024;

export function readOwnNames(dir: string): OwnFolder {
  const errors: string[] = [];
  const names: Float32Array[] = [];
  const files = readdirSync(dir).sort();
  for (const file of files) {
    const where = path.join(dir, file);
    if (!file.toLowerCase().endsWith('.txt')) {
      errors.push(`${where}: not a .txt file of names; skipped`);
      continue;
    }
    try {
      const stat = statSync(where);
      if (!stat.isFile()) throw new Error('not a file');
      if (stat.size > MAX_NAMES_FILE_BYTES) throw new Error(`${stat.size} bytes, more than the ${MAX_NAMES_FILE_BYTES} read`);
      readFileSync(where, 'utf8').split(/\r?\n/).forEach((line, i) => {
        if (line.trim() === '') return;
        try {
          names.push(OWN_NAMES.encode(line));
        } catch (err) {
          errors.push(`${where}:${i + 1}: ${toWebringError(err).message}; skipped`);
        }
      });
    } catch (err) {
      errors.push(`${where}: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); skipped`);
    }
  }
  let key = 0x9e3779b9;
  for (const name of names) {
    for (const symbol of name) key = mixSeed(key, symbol);
    key = mixSeed(key, 0);
  }
  // Never 0: a rank with no store says 0.
  const store = new MemoryOwnExamples(key === 0 ? 1 : key);
  for (const name of names) store.add(OWN_NAMES.label, name);
  return { store, errors };
}
