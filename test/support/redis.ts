/**
 * A real redis-server (Debian's package) for tests: its own process on a free loopback
 * port, no persistence, gone when stopped.
 */
import { spawn } from 'node:child_process';
import { capture, freePort, stopProcess, waitForOutput } from './processes';

export const REDIS_SERVER = process.env.REDIS_SERVER_PATH ?? '/usr/bin/redis-server';
const READY_TIMEOUT_MS = 10_000;

export interface TestRedis {
  url: string;
  stop(): Promise<void>;
}

export async function startRedis(): Promise<TestRedis> {
  const port = await freePort();
  const child = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
  await waitForOutput(child, capture(child), /Ready to accept connections/, REDIS_SERVER, READY_TIMEOUT_MS);
  return { url: `redis://127.0.0.1:${port}`, stop: () => stopProcess(child) };
}
