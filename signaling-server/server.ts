/**
 * Wires the http server, express and socket.io together; handlers register per concern
 * (rooms, signals, training), as socket.io's application-structure guide suggests.
 */
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { Server } from 'socket.io';
import { CLIENT_EVENT_NAMES, MAX_SOCKET_PACKET_BYTES } from '../shared/protocol';
import { RoomRegistry, type IoServer, type ServerContext } from './context';
import { Room } from './room';
import { createHttpApp } from './http-api';
import { createLogger, type Logger } from './logger';
import { loadPackedMnist } from './mnist-pack';
import { CheckpointStore } from './checkpoint-store';
import { registerRoomHandlers } from './handlers/rooms';
import { registerSignalHandlers } from './handlers/signals';
import { registerTrainingHandlers } from './handlers/training';

/**
 * socket.io's defaults (25 s interval, 20 s timeout) notice a closed tab only after ~45 s.
 * With these a vanished tab is gone within PING_INTERVAL_MS + PING_TIMEOUT_MS = 5 s, while
 * a tab busy with a long GPU step (which still answers pings between awaits) is not dropped.
 */
export const DEFAULT_PING_INTERVAL_MS = 2_000;
export const DEFAULT_PING_TIMEOUT_MS = 3_000;

const KNOWN_EVENTS = new Set<string>(CLIENT_EVENT_NAMES);

export interface ServerOptions {
  port: number;
  host?: string;
  dataDir: string;
  teacherToken: string;
  clientDir: string;
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  log?: Logger;
}

export interface RunningServer {
  url: string;
  port: number;
  io: IoServer;
  close(): Promise<void>;
}

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const log = options.log ?? createLogger();
  const httpServer = http.createServer();
  const io: IoServer = new Server(httpServer, {
    pingInterval: options.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS,
    pingTimeout: options.pingTimeoutMs ?? DEFAULT_PING_TIMEOUT_MS,
    maxHttpBufferSize: MAX_SOCKET_PACKET_BYTES,
    serveClient: false,
  });
  const ctx: ServerContext = { io, rooms: new RoomRegistry((name) => new Room(name)), log };

  let mnist: Promise<Uint8Array> | null = null;
  const app = createHttpApp(ctx, {
    teacherToken: options.teacherToken,
    clientDir: options.clientDir,
    startedAt: Date.now(),
    checkpoints: new CheckpointStore(options.dataDir),
    mnist: () => {
      mnist ??= loadPackedMnist(path.join(options.dataDir, 'cache')).catch((err: unknown) => {
        mnist = null;
        throw err;
      });
      return mnist;
    },
  });
  httpServer.on('request', app);

  io.on('connection', (socket) => {
    socket.data = { room: null, memberId: null, loggedErrors: new Set() };
    socket.onAny((event: unknown) => {
      if (typeof event === 'string' && KNOWN_EVENTS.has(event)) return;
      const key = `unknown:${String(event).slice(0, 40)}`;
      if (!socket.data.loggedErrors.has(key)) {
        socket.data.loggedErrors.add(key);
        log.warn(`socket ${socket.id}: unknown event ${JSON.stringify(String(event).slice(0, 40))} dropped`);
      }
      socket.emit('server:error', { code: 'ERR_BAD_REQUEST', message: 'unknown event' });
    });
    registerRoomHandlers(ctx, socket);
    registerSignalHandlers(ctx, socket);
    registerTrainingHandlers(ctx, socket);
  });

  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(options.port, options.host, () => resolve());
  });
  const port = (httpServer.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    io,
    close: async () => {
      io.disconnectSockets(true);
      await new Promise<void>((resolve) => io.close(() => resolve()));
    },
  };
}
