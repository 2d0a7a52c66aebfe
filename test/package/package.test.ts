/**
 * webring as a library, installed the way a program installs it: `npm pack` builds the
 * tarball (prepack: scripts/build-library.ts), a project outside the repository installs it
 * with npm, and then
 *  - Node imports `webring`, `webring/node`, `webring/server` and `webring/control`, starts
 *    the embedded server and trains two members through the built compute thread, started
 *    with `webring/control`'s RoomControl (test/package/consumer/smoke.mjs);
 *  - `webring/control` loads without tfjs or WebRTC, in both builds;
 *  - vite bundles a page that imports `webring` for the browser, compute thread included;
 *  - tsc checks a consumer file against the emitted declarations, with node16 and bundler
 *    resolution.
 * The install needs the npm registry (or a cache that holds every package), as CI has.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const FIXTURE = path.join(ROOT, 'test', 'package', 'consumer');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const VITE = path.join(ROOT, 'node_modules', 'vite', 'bin', 'vite.js');
/** tfjs's own declarations do not pass a check with skipLibCheck off (tfjs-core's `Long`, tfjs-layers' configs); only theirs are let through. */
const TFJS_DECLARATIONS = /^node_modules\/@tensorflow\//;

let work: string;
let project: string;

before(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'webring-package-'));
  const { stdout } = await run(NPM, ['pack', '--json', '--pack-destination', work], { cwd: ROOT, maxBuffer: 64 << 20 });
  const [packed] = JSON.parse(stdout.slice(stdout.indexOf('['))) as Array<{ filename: string; files: Array<{ path: string }> }>;
  assert.ok(packed, 'npm pack made a tarball');
  const files = packed.files.map((f) => f.path);
  for (const needed of ['LICENSE', 'dist/lib/types/shared/library/control.d.ts', 'dist/lib/browser.js', 'dist/lib/node.js', 'dist/lib/server.js', 'dist/lib/control.js', 'dist/lib/control-browser.js', 'dist/lib/compute-thread-browser.js', 'dist/lib/compute-thread-node.js', 'dist/lib/types/client/library.d.ts']) {
    assert.ok(files.includes(needed), `the tarball holds ${needed}`);
  }
  assert.ok(!files.some((f) => f.startsWith('test/') || f.startsWith('signaling-server/')), 'the tarball ships the built library, not the sources and tests');
  project = path.join(work, 'consumer');
  await cp(FIXTURE, project, { recursive: true });
  // @types/node: the server's declarations name Node's types, as any Node program's do.
  await run(NPM, ['install', '--prefer-offline', '--no-audit', '--no-fund', path.join(work, path.basename(packed.filename)), '@types/node@20'], { cwd: project, maxBuffer: 64 << 20 });
});

after(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

test('Node imports all four entry points from the installed tarball, and two members train a run through the built compute thread', async () => {
  const { stdout } = await run(process.execPath, ['smoke.mjs'], { cwd: project, timeout: 120_000 });
  const line = stdout.split('\n').find((l) => l.startsWith('{'));
  assert.ok(line, stdout);
  const seen = JSON.parse(line) as { sameJoinRoom: boolean; sameControl: boolean; controlSaw: number; ranks: number[]; chiefs: number; steps: number[]; hashes: number; backend: string };
  assert.equal(seen.sameJoinRoom, true, "under Node, `webring` resolves to the Node entry");
  assert.equal(seen.sameControl, true, '`webring/control` and `webring` share one RoomControl class (and one WebringError)');
  assert.equal(seen.controlSaw, 2, "`webring/control`'s status lists the two members");
  assert.deepEqual(seen.ranks, [0, 1]);
  assert.equal(seen.chiefs, 1);
  assert.deepEqual(seen.steps, [3, 3]);
  assert.equal(seen.hashes, 1, 'the replicas agree');
  assert.equal(seen.backend, 'cpu');
});

test('vite bundles a page that imports webring for the browser, its compute thread as a worker of its own', async () => {
  await run(process.execPath, [VITE, 'build', 'web', '--outDir', '../web-dist', '--emptyOutDir', '--logLevel', 'warn'], { cwd: project, maxBuffer: 64 << 20 });
  const assets = await readdir(path.join(project, 'web-dist', 'assets'));
  assert.ok(assets.some((a) => /^compute-thread-browser-.*\.js$/.test(a)), `the compute thread was bundled: ${assets.join(', ')}`);
  const page = assets.find((a) => /^index-.*\.js$/.test(a));
  assert.ok(page, assets.join(', '));
  const code = await readFile(path.join(project, 'web-dist', 'assets', page), 'utf8');
  assert.ok(!/from\s*["']node:/.test(code), 'the browser bundle imports no Node built-in');
});

/** The packages a built file loads, following its relative imports (the shared chunks) to the end. */
async function packagesLoadedBy(file: string): Promise<Set<string>> {
  const packages = new Set<string>();
  const seen = new Set<string>();
  const visit = async (at: string) => {
    if (seen.has(at)) return;
    seen.add(at);
    const code = await readFile(at, 'utf8');
    for (const [, spec] of code.matchAll(/(?:from|import)\s*["']([^"']+)["']/g)) {
      if (spec!.startsWith('.')) await visit(path.resolve(path.dirname(at), spec!));
      else packages.add(spec!.startsWith('@') ? spec!.split('/').slice(0, 2).join('/') : spec!.split('/')[0]!);
    }
  };
  await visit(file);
  return packages;
}

test('webring/control loads neither tfjs nor WebRTC, in the browser build and in the Node build: a dashboard pays for neither', async () => {
  for (const built of ['control.js', 'control-browser.js']) {
    const packages = await packagesLoadedBy(path.join(project, 'node_modules', 'webring', 'dist', 'lib', built));
    assert.ok(packages.has('zod'), `${built} validates with zod: ${[...packages].join(', ')}`);
    for (const heavy of ['@tensorflow/tfjs', '@tensorflow/tfjs-backend-webgpu', '@roamhq/wrtc', 'socket.io-client']) {
      assert.ok(!packages.has(heavy), `${built} loads ${heavy}: ${[...packages].join(', ')}`);
    }
  }
});

for (const resolution of ['node16', 'bundler']) {
  test(`a consumer file type-checks against the emitted declarations (${resolution} resolution)`, async () => {
    const result = await run(process.execPath, [TSC, '-p', path.join('typed', `tsconfig.${resolution}.json`)], { cwd: project }).then(
      (r) => r.stdout,
      (e: { stdout: string }) => e.stdout,
    );
    const ours = result.split('\n').filter((l) => /^\S.*error TS/.test(l) && !TFJS_DECLARATIONS.test(l));
    assert.deepEqual(ours, [], result);
  });
}
