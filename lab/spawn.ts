/**
 * Starting programs inside a lab namespace, optionally under a CPU cap, and stopping them
 * all again. Each child leads its own process group, so a teardown also reaches what it
 * started (Chromium's renderers, a worker's helpers).
 */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { LabError } from './lab-error';
import type { CpuCap } from './cpu-caps';

/** Lines kept per process: enough to explain a failure, bounded for a long row. */
const MAX_KEPT_LINES = 2_000;
/**
 * With LAB_LOG_DIR set, every process's output is also appended, time-stamped, to
 * `<label>.log` there: the workers' own account of a row (hand-overs, join costs).
 */
const LOG_DIR = process.env.LAB_LOG_DIR ?? null;
// Made here, not by the user: a missing folder would otherwise crash the lab at the first log line.
if (LOG_DIR) mkdirSync(LOG_DIR, { recursive: true });

export interface SpawnInOptions {
  /** The group the child joins before it executes anything (so no unmetered start-up), or once `startup` says so. */
  cpuCap?: CpuCap;
  /**
   * Start in `group` instead, and move into `cpuCap` at the first line matching `capOn`:
   * the process's own start (Node, tsx, importing tfjs) is not what a device is measured
   * on, and at a phone's 0.05 core it takes minutes that a phone's browser does not.
   */
  startup?: { group: CpuCap; capOn: RegExp };
  /** Added to this process's environment. */
  env?: NodeJS.ProcessEnv;
  /** Default: stdin a pipe (flows read their go line from it), output collected. */
  stdio?: StdioOptions;
  /** Names the process in errors and progress lines; default: the command's base name. */
  label?: string;
  cwd?: string;
}

export interface LabProcess {
  label: string;
  child: ChildProcess;
  /** stdout and stderr, line by line, as far as printed. */
  lines: string[];
  /** Resolves with the first line matching `pattern`; rejects when the process exits first or after `timeoutMs`. */
  waitForLine(pattern: RegExp, timeoutMs: number): Promise<string>;
  /** Resolves with the exit code (or signal name) once the process has exited. */
  exited: Promise<number | string>;
  /** SIGKILLs the process group and waits for the leader to exit. */
  kill(): Promise<void>;
}

const live = new Set<LabProcess>();

/** Runs `command args` in network namespace `ns` (`ip netns exec`). */
export function spawnIn(ns: string, command: string, args: string[], options: SpawnInOptions = {}): LabProcess {
  const label = options.label ?? path.basename(command);
  const inner = ['ip', 'netns', 'exec', ns, command, ...args];
  // The shell moves itself into the cgroup, then execs: the pid stays the same, so the
  // program and everything it forks run capped from their first instruction.
  const first = options.cpuCap && options.startup ? options.startup.group : options.cpuCap;
  const argv = first ? ['sh', '-c', 'echo $$ > "$1" && shift && exec "$@"', 'sh', path.join(first.dir, 'cgroup.procs'), ...inner] : inner;
  const child = spawn(argv[0]!, argv.slice(1), {
    stdio: options.stdio ?? ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...options.env },
    cwd: options.cwd,
    detached: true,
  });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  if (options.cpuCap && options.startup) {
    const { cpuCap } = options;
    const { capOn } = options.startup;
    // The pid stays the shell's through both execs (sh, then ip netns exec): moving it moves the program and its threads.
    const capWhenReady = () => {
      if (!lines.some((l) => capOn.test(l)) || child.pid === undefined) return;
      waiters.delete(capWhenReady);
      if (child.exitCode === null && child.signalCode === null) cpuCap.addPid(child.pid);
    };
    waiters.add(capWhenReady);
  }
  for (const stream of [child.stdout, child.stderr]) {
    let rest = '';
    stream?.on('data', (d: Buffer) => {
      const parts = (rest + d.toString()).split('\n');
      rest = parts.pop() ?? '';
      lines.push(...parts);
      if (LOG_DIR && parts.length > 0) appendFileSync(path.join(LOG_DIR, `${label}.log`), parts.map((l) => `${new Date().toISOString()} ${l}\n`).join(''));
      if (lines.length > MAX_KEPT_LINES) lines.splice(0, lines.length - MAX_KEPT_LINES);
      for (const w of waiters) w();
    });
  }
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      live.delete(proc);
      resolve(code ?? signal ?? 'unknown');
      for (const w of waiters) w();
    });
    child.once('error', (err) => {
      lines.push(`cannot start: ${err.message}`);
      live.delete(proc);
      resolve('error');
      for (const w of waiters) w();
    });
  });
  const proc: LabProcess = {
    label,
    child,
    lines,
    exited,
    waitForLine(pattern, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const hit = lines.find((l) => pattern.test(l));
          if (hit !== undefined) return finish(null, hit);
          if (child.exitCode !== null || child.signalCode !== null) finish(new LabError('ERR_LAB_PROCESS', `${label} in ${ns} exited before printing ${pattern}:\n${tail(lines)}`));
        };
        const timer = setTimeout(() => finish(new LabError('ERR_LAB_PROCESS', `${label} in ${ns} printed no ${pattern} within ${timeoutMs} ms:\n${tail(lines)}`)), timeoutMs);
        const finish = (err: Error | null, line?: string) => {
          clearTimeout(timer);
          waiters.delete(check);
          if (err) reject(err);
          else resolve(line!);
        };
        waiters.add(check);
        check();
      });
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch (err) {
        // The group is already gone.
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
      await exited;
    },
  };
  live.add(proc);
  return proc;
}

/** Kills every process the lab started that is still running. */
export async function killAllLabProcesses(): Promise<void> {
  await Promise.all([...live].map((p) => p.kill()));
}

/** Synchronous variant for process exit handlers, where nothing can be awaited. */
export function killAllLabProcessesSync(): void {
  for (const p of live) {
    if (p.child.pid === undefined) continue;
    try {
      process.kill(-p.child.pid, 'SIGKILL');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
}

/** The last lines of a process's output, for an error message. */
export function tail(lines: string[], count = 20): string {
  return lines.slice(-count).join('\n');
}
