/**
 * Builds the browser client with vite when dist/client is missing, older than any source
 * it depends on, or built in another mode, so `npm start` works on a fresh clone without a
 * separate step.
 *
 * The mode is `production` unless CLIENT_BUILD_MODE says otherwise: the e2e server sets it
 * to `test`, so the test build (`vite build --mode test`, whose pages read fault flags)
 * counts as fresh there, while a plain `npm start` replaces it with a production build.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CLIENT_DIST = path.join(PROJECT_ROOT, 'dist', 'client');
const SOURCES = ['client', 'shared', 'vite.config.ts', 'package-lock.json'];
/** Must match BUILD_MODE_FILE in vite.config.ts (not imported: that would load vite at start-up). */
const BUILD_MODE_FILE = 'build-mode.json';
const DEFAULT_MODE = 'production';

/** The vite mode the client must be built in for this process. */
export function wantedClientMode(): string {
  return process.env.CLIENT_BUILD_MODE || DEFAULT_MODE;
}

/** The mode dist/client was built in, or null when unknown (an older build, or none). */
async function builtMode(): Promise<string | null> {
  try {
    const parsed = JSON.parse(await fs.readFile(path.join(CLIENT_DIST, BUILD_MODE_FILE), 'utf8')) as { mode?: unknown };
    return typeof parsed.mode === 'string' ? parsed.mode : null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || err instanceof SyntaxError) return null;
    throw err;
  }
}

async function newestMtime(p: string): Promise<number> {
  const st = await fs.stat(p);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const entry of await fs.readdir(p)) newest = Math.max(newest, await newestMtime(path.join(p, entry)));
  return newest;
}

export async function clientIsStale(mode = wantedClientMode()): Promise<boolean> {
  if ((await builtMode()) !== mode) return true;
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
  const mode = wantedClientMode();
  if (!(await clientIsStale(mode))) return;
  log(`building the browser client (vite, ${mode} mode)...`);
  const { build } = await import('vite');
  await build({ configFile: path.join(PROJECT_ROOT, 'vite.config.ts'), logLevel: 'warn', mode });
}
