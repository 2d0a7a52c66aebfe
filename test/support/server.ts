import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { io as connect, type Socket } from 'socket.io-client';
import { startServer, type RunningServer } from '../../signaling-server/server';
import { createLogger } from '../../signaling-server/logger';
import type { RateLimitOptions } from '../../signaling-server/rate-limits';
import type { AckResult, ClientToServerEvents, JoinAccepted, ServerToClientEvents } from '../../shared/protocol';

export type TestSocket = Socket<ServerToClientEvents, ClientToServerEvents>;
export const TEST_TOKEN = 'test-teacher-token';

export async function startTestServer(
  overrides: { pingIntervalMs?: number; pingTimeoutMs?: number; rateLimits?: RateLimitOptions } = {},
): Promise<RunningServer> {
  return startServer({
    port: 0,
    host: '127.0.0.1',
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'webring-test-')),
    teacherToken: TEST_TOKEN,
    clientDir: path.join(os.tmpdir(), 'webring-no-client'),
    log: createLogger(process.env.LOG_LEVEL ?? 'silent'),
    ...overrides,
  });
}

export async function connectClient(server: RunningServer): Promise<TestSocket> {
  const socket: TestSocket = connect(server.url, { transports: ['websocket'], forceNew: true, reconnection: false });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('connect_error', reject);
  });
  return socket;
}

export function join(socket: TestSocket, room: string, name: string): Promise<AckResult<JoinAccepted>> {
  return new Promise((resolve) => socket.emit('room:join', { room, name, kind: 'node', backend: 'cpu' }, resolve));
}

export function nextEvent<E extends keyof ServerToClientEvents>(
  socket: TestSocket,
  event: E,
  predicate: (...args: Parameters<ServerToClientEvents[E]>) => boolean = () => true,
  timeoutMs = 5_000,
): Promise<Parameters<ServerToClientEvents[E]>[0]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${String(event)} within ${timeoutMs} ms`)), timeoutMs);
    const handler = (...args: Parameters<ServerToClientEvents[E]>) => {
      if (!predicate(...args)) return;
      clearTimeout(timer);
      (socket.off as (e: string, h: unknown) => void)(event, handler);
      resolve(args[0]);
    };
    (socket.on as (e: string, h: unknown) => void)(event, handler);
  });
}
