/**
 * Builds the browser client with vite when dist/client is missing or older than any
 * source it depends on, so `npm start` works on a fresh clone without a separate step.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CLIENT_DIST = path.join(PROJECT_ROOT, 'dist', 'client');
const SOURCES = ['client', 'shared', 'vite.config.ts', 'package-lock.json'];

async function newestMtime(p: string): Promise<number> {
  const st = await fs.stat(p);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const entry of await fs.readdir(p)) newest = Math.max(newest, await newestMtime(path.join(p, entry)));
  return newest;
}

export async function clientIsStale(): Promise<boolean> {
  let built: number;
  try {
    built = (await fs.stat(path.join(CLIENT_DIST, 'index.html'))).mtimeMs;
  } catch {
    return true; // not built yet
  }
  for (const src of SOURCES) {
    const p = path.join(PROJECT_ROOT, src);
    try {
      if ((await newestMtime(p)) > built) return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  return false;
}

export async function buildClientIfNeeded(log: (m: string) => void): Promise<void> {
  if (!(await clientIsStale())) return;
  log('building the browser client (vite)...');
  const { build } = await import('vite');
  await build({ configFile: path.join(PROJECT_ROOT, 'vite.config.ts'), logLevel: 'warn' });
}
