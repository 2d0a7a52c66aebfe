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
import { RoomPersistence } from './room-persistence';
import { broadcastChange } from './handlers/rooms';
import { registerRoomHandlers } from './handlers/rooms';
import { registerSignalHandlers } from './handlers/signals';
import { registerTrainingHandlers } from './handlers/training';
import { scheduleAdmission } from './runs';

/**
 * socket.io's defaults (25 s interval, 20 s timeout) notice a vanished tab only after ~45 s.
 * With these a tab whose network was cut is gone within PING_INTERVAL_MS + PING_TIMEOUT_MS
 * = 2.8 s (the elastic ring promises a new generation within 3 s), while a tab busy with a
 * GPU step (which answers pings between awaits) is not dropped. A closed tab is gone at
 * once: its socket closes, or it says goodbye on pagehide.
 */
export const DEFAULT_PING_INTERVAL_MS = 1_000;
export const DEFAULT_PING_TIMEOUT_MS = 1_800;
/**
 * After a restart, members of persisted rooms have this long to reconnect before they are
 * dropped; socket.io's client retries within about 1-5 s.
 */
export const DEFAULT_RECONNECT_GRACE_MS = 20_000;

const KNOWN_EVENTS = new Set<string>(CLIENT_EVENT_NAMES);

export interface ServerOptions {
  port: number;
  host?: string;
  dataDir: string;
  teacherToken: string;
  clientDir: string;
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  reconnectGraceMs?: number;
  log?: Logger;
}

export interface RunningServer {
  url: string;
  port: number;
  io: IoServer;
  close(): Promise<void>;
}

/**
 * Brings back the rooms of a previous process (after a crash or kill -9): their members keep
 * ids, indexes and generation, and have `graceMs` to reconnect; whoever has not by then is
 * dropped like a closed tab. Half-written checkpoints of the crash are cleaned up.
 */
async function restoreRooms(ctx: ServerContext, graceMs: number): Promise<void> {
  for (const room of await ctx.persistence.loadAll()) {
    ctx.rooms.add(room);
    const removed = await ctx.checkpoints.removeStaleTemps(room.name, Number.POSITIVE_INFINITY);
    ctx.log.info(`room ${room.name}: restored (generation ${room.currentGeneration}, ${room.size} member(s) to reconnect${removed ? `, ${removed} unfinished checkpoint(s) removed` : ''})`);
    setTimeout(() => {
      for (const id of room.disconnectedMembers()) {
        ctx.log.info(`room ${room.name}: member ${id} did not reconnect`);
        broadcastChange(ctx, room, room.leave(id));
      }
      // Students who were waiting for admission when the server went down are let in now.
      if (room.isTraining) scheduleAdmission(ctx, room);
      ctx.rooms.releaseIfIdle(room.name);
    }, graceMs).unref();
  }
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
  const ctx: ServerContext = {
    io,
    rooms: new RoomRegistry((name) => new Room(name)),
    checkpoints: new CheckpointStore(options.dataDir),
    persistence: new RoomPersistence(options.dataDir, log),
    log,
  };
  await restoreRooms(ctx, options.reconnectGraceMs ?? DEFAULT_RECONNECT_GRACE_MS);

  let mnist: Promise<Uint8Array> | null = null;
  const app = createHttpApp(ctx, {
    teacherToken: options.teacherToken,
    clientDir: options.clientDir,
    startedAt: Date.now(),
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
