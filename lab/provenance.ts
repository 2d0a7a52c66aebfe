/**
 * Where a figure comes from: when it was measured, on which commit, with which versions of
 * what ran it (Node, tfjs, Chromium, the kernel) and on what machine. Every section of the
 * lab's report (lab/report-store.ts) and every benchmark (test/bench/provenance.ts) writes
 * this beside its figures, so that a reader can check out the commit and run it again.
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import os from 'node:os';

export interface Provenance {
  /** When the measurement ended (ISO, UTC). */
  measuredAt: string;
  /** When it started. */
  startedAt: string;
  /** The short commit, with "+changes" when tracked files differed from it. */
  commit: string;
  versions: { node: string; tfjs: string; chromium: string; kernel: string };
  machine: { cpu: string; cores: number };
}

/**
 * What the measurements write: results, not the code that made them, so they never make a
 * commit read "+changes" (a whole lab run rewrites them section by section).
 */
const OUTPUTS = [':(exclude)bench', ':(exclude)docs/lab-results.md'];

/** The commit this tree is; where there is no git (a lent machine's bundle), why not. */
export function commitOf(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no', '--', '.', ...OUTPUTS], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim() !== '';
    return dirty ? `${head}+changes` : head;
  } catch (error) {
    return `unknown (${(error as Error).message.split('\n')[0]})`;
  }
}

/** tfjs as npm installed it (the lab's harness never loads it; its workers do). */
export function tfjsVersion(): string {
  return (createRequire(import.meta.url)('@tensorflow/tfjs-core/package.json') as { version: string }).version;
}

/** The Chromium the tests and the lab's browser rows use ("156.0.8078.114"), or why there is none. */
export function chromiumVersion(binary = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'): string {
  try {
    const line = execFileSync(binary, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 30_000 });
    return /(\d+\.\d+\.\d+\.\d+)/.exec(line)?.[1] ?? line.trim();
  } catch (error) {
    return `not installed (${binary}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message.split('\n')[0]})`;
  }
}

/** The provenance of a measurement that started at `startedAt` and ends now. */
export function provenanceSince(startedAt: Date): Provenance {
  return {
    measuredAt: new Date().toISOString(),
    startedAt: startedAt.toISOString(),
    commit: commitOf(),
    versions: { node: process.versions.node, tfjs: tfjsVersion(), chromium: chromiumVersion(), kernel: os.release() },
    machine: { cpu: os.cpus()[0]?.model.trim() ?? 'unknown CPU', cores: os.availableParallelism() },
  };
}
