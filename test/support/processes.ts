/**
 * The programs tests start beside the server (redis-server, coturn, HAProxy, signaling
 * processes): a free port, waiting for a ready line, and stopping them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';

/** A loopback port free for both TCP and UDP right now (coturn listens on both). */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as net.AddressInfo).port;
        srv.close(() => resolve(p));
      });
      srv.once('error', reject);
    });
    const udpFree = await new Promise<boolean>((resolve) => {
      const sock = dgram.createSocket('udp4');
      sock.once('error', () => resolve(false));
      sock.bind(port, '127.0.0.1', () => sock.close(() => resolve(true)));
    });
    if (udpFree) return port;
  }
}

/** Everything `proc` printed so far, on stdout and stderr together. */
export function capture(proc: ChildProcess): () => string {
  let text = '';
  proc.stdout?.on('data', (d: Buffer) => (text += d.toString()));
  proc.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  return () => text;
}

/** Resolves once `proc` has printed a line matching `ready`; rejects if it fails to start, exits first or takes longer than `timeoutMs`. */
export function waitForOutput(proc: ChildProcess, output: () => string, ready: RegExp, what: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => {
      clearTimeout(timer);
      proc.stdout?.off('data', check);
      proc.stderr?.off('data', check);
      proc.off('exit', exited);
      proc.off('error', failed);
      if (err) reject(err);
      else resolve();
    };
    const timer = setTimeout(() => done(new Error(`${what} not ready within ${timeoutMs} ms:\n${output()}`)), timeoutMs);
    const check = () => {
      if (ready.test(output())) done();
    };
    const exited = (code: number | null) => done(new Error(`${what} exited with ${code}:\n${output()}`));
    const failed = (err: Error) => done(new Error(`cannot start ${what} (npm test installs it: scripts/ensure-system-packages.sh): ${err.message}`));
    proc.stdout?.on('data', check);
    proc.stderr?.on('data', check);
    proc.once('exit', exited);
    proc.once('error', failed);
  });
}

/** Stops `proc` with `signal` and waits until it is gone. */
export function stopProcess(proc: ChildProcess | null, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  return new Promise((resolve) => {
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return resolve();
    proc.once('exit', () => resolve());
    proc.kill(signal);
  });
}

/** A Node worker (`npm run worker`) started by a test, with everything it printed, line by line. */
export interface SpawnedWorker {
  name: string;
  child: ChildProcess;
  output: string[];
}

/** Starts a Node worker on the CPU backend that joins `room` with `code`; `extra` adds flags. */
export function spawnNodeWorker(url: string, room: string, code: string, name: string, extra: string[] = []): SpawnedWorker {
  const child = spawn(process.execPath, ['--import', 'tsx', 'node-worker/main.ts', '--url', url, '--room', room, '--code', code, '--name', name, '--backend', 'cpu', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  for (const stream of [child.stdout!, child.stderr!]) stream.on('data', (d: Buffer) => output.push(...d.toString().split('\n').filter(Boolean)));
  return { name, child, output };
}

/** The last lines each worker printed, for a failure's message. */
export const lastLines = (workers: readonly SpawnedWorker[], lines: number): string => workers.map((w) => w.output.slice(-lines).join('\n')).join('\n---\n');

/** Polls `probe` until it gives something truthy, and returns it; after `timeoutMs` fails naming `what`, with `context()` for the reader. */
export async function pollUntil<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number, context: () => string = () => '', intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const got = await probe();
    if (got) return got;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${context()}`);
}
