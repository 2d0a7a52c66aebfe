/**
 * The hub member (node-worker/hub.ts) runs by default (`npm start -- --no-hub` or HUB=0
 * turns it off): a class on one shared Wi-Fi sums faster through it than around a ring (the
 * lab measured 1.72× at N = 8), and the `auto` collective still picks ring,
 * halving-doubling or hub from the measured links. It runs as a child process beside the server and joins the default room over the plain-http loopback
 * listener. Its output goes to the server's with a `[hub] ` prefix; it is restarted with a
 * doubling back-off when it exits unexpectedly, and stopped (SIGTERM, so it says goodbye,
 * then SIGKILL) when the server stops. It runs in its own process group, so a Ctrl-C in the
 * teacher's terminal reaches the server alone, which then stops the hub in that order; its
 * stdin is a pipe from the server that closes when the server dies, even by SIGKILL, so the
 * hub can tell it was left behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import type { Logger } from './rooms/room-context';

/** The first restart waits this long; each further one twice as long as the last. */
export const HUB_RESTART_DELAY_MS = 1_000;
/** Restarts in a row before the server gives up on the hub (and trains without it). */
export const HUB_MAX_RESTARTS = 5;
/** A hub that ran this long before exiting starts the back-off over. */
export const HUB_STABLE_MS = 60_000;
/** stop() waits this long after SIGTERM before it kills the hub. */
export const HUB_STOP_TIMEOUT_MS = 3_000;
/** Where the hub's entry point lies, relative to the project root. */
export const HUB_SCRIPT = 'node-worker/hub.ts';

/** Server secrets the hub has no use for: they stay out of its environment. */
const SERVER_SECRETS = ['JOIN_SECRET', 'TEACHER_TOKEN', 'TURN_SECRET'];

export class HubConfigError extends Error {
  readonly code = 'ERR_HUB_CONFIG' as const;
  constructor(message: string) {
    super(message);
    this.name = 'HubConfigError';
  }
}

/**
 * Whether to run the hub: the `--hub` or `--no-hub` flag, else HUB (0, 1, true or false;
 * unset or empty is on). Any other argument, both flags, or another HUB value, throws
 * HubConfigError.
 */
export function hubRequested(argv: readonly string[], env: NodeJS.ProcessEnv): boolean {
  let on: boolean | undefined;
  let off: boolean | undefined;
  try {
    ({ values: { hub: on, 'no-hub': off } } = parseArgs({ args: [...argv], options: { hub: { type: 'boolean' }, 'no-hub': { type: 'boolean' } }, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new HubConfigError(`${(err as Error).message} (npm start takes one flag: npm start -- --no-hub, or --hub)`);
  }
  if (on && off) throw new HubConfigError('--hub and --no-hub together: pick one');
  if (on) return true;
  if (off) return false;
  const raw = env.HUB;
  if (raw === undefined || raw === '' || raw === '1' || raw === 'true') return true;
  if (raw === '0' || raw === 'false') return false;
  throw new HubConfigError(`HUB must be 0, 1, true or false, got ${JSON.stringify(raw)}`);
}

/**
 * The URL the hub dials: this machine's plain-http listener. With HOST unset (or a wildcard)
 * that is 127.0.0.1 (::1 for "::"); with HOST set to one address, the server listens only
 * there, so the hub dials that address.
 */
export function hubServerUrl(host: string | undefined, port: number): string {
  if (host === undefined || host === '' || host === '0.0.0.0') return `http://127.0.0.1:${port}`;
  if (host === '::') return `http://[::1]:${port}`;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** The hub's command line: never the join code nor the hub key, which travel in JOIN_CODE and HUB_KEY (hubEnvironment). */
export function hubArguments(url: string, room: string, name = 'hub'): string[] {
  return ['--import', 'tsx', HUB_SCRIPT, '--url', url, '--room', room, '--name', name];
}

/**
 * The server's environment for the hub: the join code and the room's hub key (which only
 * this server hands out, and without which a hub join is refused) added, the server's own
 * secrets removed.
 */
export function hubEnvironment(env: NodeJS.ProcessEnv, joinCode: string, hubKey: string): NodeJS.ProcessEnv {
  // WEBRING_HUB_EXIT_WITH_STDIN: the hub leaves when the pipe from this server closes, even after a kill -9 of the server.
  const out: NodeJS.ProcessEnv = { ...env, JOIN_CODE: joinCode, HUB_KEY: hubKey, WEBRING_HUB_EXIT_WITH_STDIN: '1' };
  for (const name of SERVER_SECRETS) delete out[name];
  return out;
}

export interface HubProcessOptions {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  log: Logger;
  /** One line of the hub's output, already prefixed with `[hub] `. */
  output(line: string, stream: 'stdout' | 'stderr'): void;
  restartDelayMs?: number;
  maxRestarts?: number;
  stableMs?: number;
  stopTimeoutMs?: number;
}

export interface HubProcess {
  /** The running child's pid, or null between restarts and after stop. */
  readonly pid: number | null;
  /** Stops the hub and any pending restart; resolves once it has exited. */
  stop(): Promise<void>;
  /** Kills the hub at once (for process 'exit', where nothing can be awaited). */
  killNow(): void;
}

/** Starts the hub and keeps it running until stop(). */
export function superviseHub(options: HubProcessOptions): HubProcess {
  const firstDelayMs = options.restartDelayMs ?? HUB_RESTART_DELAY_MS;
  const maxRestarts = options.maxRestarts ?? HUB_MAX_RESTARTS;
  const stableMs = options.stableMs ?? HUB_STABLE_MS;
  const stopTimeoutMs = options.stopTimeoutMs ?? HUB_STOP_TIMEOUT_MS;
  const { log } = options;
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  let restartTimer: NodeJS.Timeout | null = null;
  let restarts = 0;
  let stopping = false;

  const pipe = (stream: NodeJS.ReadableStream | null, name: 'stdout' | 'stderr') => {
    if (!stream) return;
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => options.output(`[hub] ${line}`, name));
  };

  const start = () => {
    restartTimer = null;
    const startedAt = Date.now();
    const proc = spawn(options.command, options.args, { cwd: options.cwd, env: options.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    child = proc;
    pipe(proc.stdout, 'stdout');
    pipe(proc.stderr, 'stderr');
    log.info(`hub started (pid ${proc.pid ?? '?'})`);
    exited = new Promise<void>((resolve) => {
      // 'close', not 'exit': the last lines of its output are read by then.
      proc.once('close', (code, signal) => {
        child = null;
        resolve();
        if (stopping) return;
        if (Date.now() - startedAt >= stableMs) restarts = 0;
        const how = signal ? `signal ${signal}` : `exit code ${code}`;
        if (restarts >= maxRestarts) {
          log.error(`hub exited unexpectedly (${how}); gave up after ${maxRestarts} restarts, the class trains without it`);
          return;
        }
        const delayMs = firstDelayMs * 2 ** restarts;
        restarts++;
        log.warn(`hub exited unexpectedly (${how}); restart ${restarts} of ${maxRestarts} in ${delayMs} ms`);
        restartTimer = setTimeout(start, delayMs);
      });
    });
    // A command that cannot start at all ('error' without 'exit') still ends in 'close'.
    proc.once('error', (err) => log.error(`hub: ${err.message}`));
  };

  start();
  return {
    get pid() {
      return child?.pid ?? null;
    },
    async stop() {
      stopping = true;
      if (restartTimer) clearTimeout(restartTimer);
      restartTimer = null;
      const proc = child;
      if (!proc) return;
      proc.kill('SIGTERM');
      const killer = setTimeout(() => proc.kill('SIGKILL'), stopTimeoutMs);
      await exited;
      clearTimeout(killer);
    },
    killNow() {
      stopping = true;
      if (restartTimer) clearTimeout(restartTimer);
      child?.kill('SIGKILL');
    },
  };
}
