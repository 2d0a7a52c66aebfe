/**
 * `npm run build:lib` (and `npm pack`'s prepack): the library a program installs, in
 * dist/lib/ (docs/library.md).
 *  - JavaScript: esbuild bundles each entry point as ESM, with every package left as an
 *    import, so the program's own tfjs, socket.io and the rest are the ones used. Node's
 *    entry points share their code through common chunks, so `webring/node` and
 *    `webring/server` in one program hold one copy of each class (a WebringError is a
 *    WebringError in both).
 *  - The compute threads are entry points of their own, and the files that start them are
 *    pointed at the built thread instead of the source's (a tab's .ts, Node's tsx boot file).
 *  - Types: tsc emits declarations; their relative imports get the `.js` a consumer's
 *    node16 or bundler resolution needs.
 */
import { build, type Plugin } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const LIBRARY_DIR = path.join(ROOT, 'dist', 'lib');
const TYPES_DIR = path.join(LIBRARY_DIR, 'types');

/**
 * Output name → source, in two builds: what runs in a browser and what runs in Node never
 * meet in one program, while webring/node and webring/server do and share their chunks.
 * The package's exports map (package.json) names these files.
 */
const BROWSER_ENTRIES = {
  browser: 'client/library.ts',
  'control-browser': 'shared/library/control.ts',
  'compute-thread-browser': 'client/compute-thread.ts',
};
const NODE_ENTRIES = {
  node: 'node-worker/library.ts',
  server: 'signaling-server/library.ts',
  control: 'shared/library/control.ts',
  'compute-thread-node': 'node-worker/compute-thread.ts',
};
/**
 * zod compiles its parsers with `new Function` where it may, and probes whether it may as
 * each module builds its schemas: under a page's Content-Security-Policy the probe is a
 * reported violation. The browser build's every file turns that off before its own body
 * runs (a file's imports run first, so one import at an entry's top is not early enough).
 */
const BROWSER_BANNER = 'import { config as webringZodConfig } from "zod";\nwebringZodConfig({ jitless: true });';

/** Where a source file starts a compute thread from its source, and the built thread it starts instead. */
const THREAD_URLS: Record<string, [from: string, to: string]> = {
  'client/open-compute.ts': ['./compute-thread.ts', './compute-thread-browser.js'],
  'node-worker/node-compute.ts': ['./compute-thread-boot.mjs', './compute-thread-node.js'],
};

const builtThreads: Plugin = {
  name: 'built-compute-threads',
  setup(b) {
    b.onLoad({ filter: /(open-compute|node-compute)\.ts$/ }, async (args) => {
      const [from, to] = THREAD_URLS[path.relative(ROOT, args.path)]!;
      const source = await readFile(args.path, 'utf8');
      if (!source.includes(`'${from}'`)) throw new Error(`${args.path} no longer starts its thread from '${from}': update scripts/build-library.ts`);
      return { contents: source.replace(`'${from}'`, `'${to}'`), loader: 'ts' };
    });
  },
};

async function files(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await files(full)));
    else out.push(full);
  }
  return out;
}

/** `from './x'` → `from './x.js'` (or './x/index.js' for a folder) in every emitted declaration. */
async function addDeclarationExtensions(): Promise<void> {
  const specifier = /(from\s+|import\()(['"])(\.{1,2}\/[^'"]+)\2/g;
  for (const file of (await files(TYPES_DIR)).filter((f) => f.endsWith('.d.ts'))) {
    const source = await readFile(file, 'utf8');
    const parts: string[] = [];
    let last = 0;
    for (const m of source.matchAll(specifier)) {
      const target = path.resolve(path.dirname(file), m[3]!);
      const isFolder = await stat(target).then((s) => s.isDirectory(), () => false);
      parts.push(source.slice(last, m.index), `${m[1]}${m[2]}${m[3]}${isFolder ? '/index.js' : '.js'}${m[2]}`);
      last = m.index! + m[0].length;
    }
    parts.push(source.slice(last));
    await writeFile(file, parts.join(''));
  }
}

export async function buildLibrary(): Promise<void> {
  await rm(LIBRARY_DIR, { recursive: true, force: true });
  await bundle(NODE_ENTRIES, 'node', 'node');
  await bundle(BROWSER_ENTRIES, 'browser', 'browser', BROWSER_BANNER);
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(ROOT, 'tsconfig.lib.json')], { stdio: 'inherit' });
  await addDeclarationExtensions();
}

async function bundle(entryPoints: Record<string, string>, platform: 'node' | 'browser', chunkPrefix: string, banner?: string): Promise<void> {
  await build({
    absWorkingDir: ROOT,
    entryPoints,
    outdir: LIBRARY_DIR,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform,
    target: 'es2022',
    packages: 'external',
    // Chunks beside the entries: a thread's URL is relative to the chunk that starts it.
    chunkNames: `${chunkPrefix}-[hash]`,
    define: { __WEBRING_FAULT_FLAGS__: 'false' },
    plugins: [builtThreads],
    ...(banner ? { banner: { js: banner } } : {}),
    logLevel: 'warning',
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await buildLibrary();
  console.log(`library built in ${path.relative(process.cwd(), LIBRARY_DIR)}`);
}
