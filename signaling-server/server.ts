/**
 * Wires the pieces together, as socket.io's application-structure guide suggests:
 *  - one http server (and an https one with a certificate) carries the express app from
 *    edge/http-api.ts and one socket.io server;
 *  - the rooms live in a RoomStore: in this process (MemoryRoomStore) wrapped by
 *    PersistingRoomStore, which writes room.json on every change that matters and whose
 *    rooms come back on a restart; or, with REDIS_URL, in Redis (rooms/cluster.ts), shared
 *    with other signaling nodes through the Redis adapter;
 *  - every connection passes edge/socket-auth.ts (join code) before any event, and every
 *    event the rate limits (edge/rate-limits.ts) and the known-event check below before its
 *    handler; handlers register per concern (handlers/rooms, signals, training, ice) and all
 *    receive one ServerContext (handlers/context.ts), which is also the rooms' and the HTTP
 *    API's context (rooms/room-context.ts);
 *  - time: rooms run on wallClock, the server's own timers (ctx.timers) on systemClock, and
 *    close() clears them, closes the sockets and the servers, then the room store.
 * Members who vanish without a goodbye are dropped by one sweep (rooms/reconnect-sweep.ts).
 */
import { DEFAULT_TASK } from '../shared/tasks/registry';
import http from 'node:http';
import https from 'node:https';
import { X509Certificate } from 'node:crypto';
import type { AddressInfo, Server as NetServer } from 'node:net';
import { Server } from 'socket.io';
import { CERTIFICATE_FINGERPRINT_BYTES, CLIENT_EVENT_NAMES, MAX_SOCKET_PACKET_BYTES, type RoomJoinInfo, type ServerInfo } from '../shared/protocol';
import type { IoServer, IoSocket, Logger } from './rooms/room-context';
import type { ServerContext } from './handlers/context';
import { systemClock } from '../shared/util/clock';
import { MemoryRoomStore } from './rooms/room-store';
import { PersistingRoomStore } from './rooms/persisting-room-store';
import { wallClock } from './rooms/wall-clock';
import { Timers } from './rooms/timers';
import { dropOverdueMembers } from './rooms/reconnect-sweep';
import { watchForStall } from './rooms/stall-timer';
import { connectCluster } from './rooms/cluster';
import { createHttpApp } from './edge/http-api';
import { createLogger } from './logger';
import { DatasetLibrary } from './data/datasets';
import { ServedBytes } from './edge/data-api';
import { DataRefusals } from './edge/data-refusals';
import { CheckpointStore } from './rooms/checkpoint-store';
import { RoomPersistence } from './rooms/room-persistence';
import { registerRoomHandlers } from './handlers/rooms';
import { registerSignalHandlers } from './handlers/signals';
import { registerLinkRelayHandlers } from './handlers/link-relay';
import { RelayLedger } from './rooms/relay-ledger';
import { RelayBackpressure } from './edge/relay-backpressure';
import { NetworkChecks } from './rooms/network-checks';
import { registerTrainingHandlers } from './handlers/training';
import { registerSecureKeyHandlers } from './handlers/secure-keys';
import { registerIceHandlers } from './handlers/ice';
import { NO_TURN, type IceOptions } from './edge/turn';
import { joinCodeFor } from './edge/join-codes';
import { authenticateSocket } from './edge/socket-auth';
import { tokenHash } from './edge/tokens';
import { ConnectionCaps } from './edge/connection-caps';
import { clientAddress, compileTrustProxy } from './edge/client-address';
import { lanAddresses } from './edge/tls';
import { DEFAULT_RATE_LIMITS, RateLimits, relayedBytesOf, type RateLimitOptions } from './edge/rate-limits';

/**
 * socket.io's defaults (25 s interval, 20 s timeout) notice a vanished tab only after ~45 s.
 * With these a tab whose network was cut, or a phone whose screen locked, is gone within
 * PING_INTERVAL_MS + PING_TIMEOUT_MS = 5 s, while a Wi-Fi hiccup of two seconds is not:
 * a ping caught in it reaches the device only when TCP retransmits it, up to ~1.6 s after
 * the link is back, and its answer must still be in time. With a 1.8 s timeout (2.8 s in
 * all), a device frozen for 2 s was dropped in 2 of 6 tries on this machine, and a link
 * that went down for 2 s would always be. Busy workers compute in a thread of their own,
 * so a long step never delays a pong. A closed tab or a killed process is gone at once:
 * its socket closes, or it says goodbye on pagehide.
 */
export const DEFAULT_PING_INTERVAL_MS = 1_000;
export const DEFAULT_PING_TIMEOUT_MS = 4_000;
/**
 * After a restart, members of persisted rooms have this long to reconnect before they are
 * dropped; socket.io's client retries within about 1-5 s.
 */
const DEFAULT_RECONNECT_GRACE_MS = 20_000;
/**
 * The sweep after a restart runs this long after the grace: Node may fire a timer a
 * millisecond before Date.now() (the rooms' clock) says its time is up.
 */
const SWEEP_SLACK_MS = 20;

const KNOWN_EVENTS = new Set<string>(CLIENT_EVENT_NAMES);

export interface ServerOptions {
  port: number;
  host?: string;
  dataDir: string;
  teacherToken: string;
  /** Derives every room's join code (edge/join-codes.ts). */
  joinSecret: Buffer;
  clientDir: string;
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  /** Socket and HTTP rate limits (edge/rate-limits.ts); defaults for a class. */
  rateLimits?: Partial<RateLimitOptions>;
  /** The limiter itself, e.g. one whose counters live in a shared store; built from `rateLimits` when absent. */
  rateLimiter?: RateLimits;
  reconnectGraceMs?: number;
  /** How long an admission may form before it applies without the ring's vote (rooms/formation.ts); tests shorten it. */
  admissionDeadlineMs?: number;
  /** How long a member of a secure run has to publish its key for a new generation (rooms/key-deadline.ts); tests shorten it. */
  keyDeadlineMs?: number;
  /** The least a class may go without progress before the server ends its run as stalled (rooms/stall-watch.ts); tests shorten it. */
  stallFloorMs?: number;
  /** Share rooms with other signaling nodes through this Redis (rooms/cluster.ts). */
  redisUrl?: string;
  /** Load balancers whose X-Forwarded-For is believed (TRUST_PROXY; edge/client-address.ts). */
  trustProxy?: string;
  /** TURN server and ICE policy for the workers (edge/turn.ts); none by default. */
  ice?: IceOptions;
  log?: Logger;
  /** The room the printed URLs and GET /api/info name (default 'class'). */
  defaultRoom?: string;
  /** The task the teacher's form opens with (TASK=; default: the registry's first). */
  defaultTask?: string;
  /** Also serve HTTPS (same app, same socket.io) with this PEM certificate and key. */
  https?: {
    port: number;
    cert: string;
    key: string;
    /** When `port` is taken, listen on a free one instead of failing (the port was a default, not asked for). */
    anyPortIfTaken?: boolean;
  };
}

export interface RunningServer {
  url: string;
  port: number;
  /** Bound HTTPS port, or null without HTTPS. */
  httpsPort: number | null;
  io: IoServer;
  /** Ports and student URLs (LAN addresses are read afresh each call). */
  info(): ServerInfo;
  /** A room's join code and class links (what the teacher shows). */
  joinInfo(room: string): RoomJoinInfo;
  /** Bytes of relayed messages the server holds for members whose connections are behind (edge/relay-backpressure.ts). */
  relayHeldBytes(): number;
  close(): Promise<void>;
}

const WILDCARD_HOSTS = new Set([undefined, '', '0.0.0.0', '::']);
const urlHost = (host: string) => (host.includes(':') ? `[${host}]` : host);

function listen(server: NetServer, port: number, host: string | undefined): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * Brings back the rooms of a previous process (after a crash or kill -9): their members keep
 * ids, indexes and generation, and have `graceMs` to reconnect; whoever has not by then is
 * dropped like a closed tab. Half-written checkpoints of the crash are cleaned up.
 */
async function restoreRooms(ctx: ServerContext, store: MemoryRoomStore, persistence: RoomPersistence, graceMs: number): Promise<void> {
  for (const room of await persistence.loadAll()) {
    store.add(room);
    const removed = await ctx.checkpoints.removeStaleTemps(room.name, Number.POSITIVE_INFINITY);
    ctx.log.info(`room ${room.name}: restored (generation ${room.currentGeneration}, ${room.size} member(s) to reconnect${removed ? `, ${removed} unfinished checkpoint(s) removed` : ''})`);
    ctx.timers.after(graceMs + SWEEP_SLACK_MS, () => {
      dropOverdueMembers(ctx, room.name, graceMs).catch((err: unknown) => ctx.log.error(`room ${room.name}: dropping unreturned members failed: ${String(err)}`));
    });
    // Its class may never report again: its pace is counted from now (room.json keeps none).
    if (room.isTraining) watchForStall(ctx, room.name);
  }
}

/**
 * How long an idle keep-alive connection stays open. Node closes one after 5 s by default,
 * and a client that sends its next request on it at that moment gets ECONNRESET; a POST
 * (Start, Stop, a checkpoint upload) is not retried for it. A teacher page or a script that
 * polls every few seconds hits that edge; a minute keeps the edge far from any polling
 * interval, as load balancers do.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/**
 * How long close() lets the replies in flight finish before it cuts their connections. A
 * reply its client stopped reading (an unread data body) keeps its connection busy, and
 * http's close() waits for every busy connection: without the cut, a shutdown could hang
 * for as long as a stalled reader or a keep-alive lasts.
 */
export const CLOSE_GRACE_MS = 1_000;

/**
 * How long a request's headers may take to arrive, and how often Node checks (issue 57:
 * Node's 60 s and 30 s let a held request sit for up to 90 s). Headers come in one packet
 * or a few; since Node 18 the timer starts with each request's first byte, not with the
 * connection, so an idle keep-alive connection is not cut by it.
 */
export const HEADERS_TIMEOUT_MS = 10_000;
const CONNECTIONS_CHECK_INTERVAL_MS = 1_000;
/**
 * Node's limit on a whole request, the backstop behind edge/in-flight.ts, which cuts /api
 * bodies sooner (a body idle 10 s, any body but a checkpoint upload after 30 s). A checkpoint
 * upload of the largest size (5 × 32 MiB) fits it at 4.5 Mbit/s.
 */
export const REQUEST_TIMEOUT_MS = 300_000;

function keepIdleConnections<S extends http.Server>(server: S): S {
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  return server;
}

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const log = options.log ?? createLogger();
  const defaultRoom = options.defaultRoom ?? 'class';
  const trustProxy = compileTrustProxy(options.trustProxy);
  const httpServer = keepIdleConnections(http.createServer({ connectionsCheckingInterval: CONNECTIONS_CHECK_INTERVAL_MS }));
  const io: IoServer = new Server(httpServer, {
    pingInterval: options.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS,
    pingTimeout: options.pingTimeoutMs ?? DEFAULT_PING_TIMEOUT_MS,
    maxHttpBufferSize: MAX_SOCKET_PACKET_BYTES,
    serveClient: false,
  });
  // A second engine on the https server feeds the same namespaces, rooms and handlers.
  const httpsOptions = options.https ? { cert: options.https.cert, key: options.https.key, connectionsCheckingInterval: CONNECTIONS_CHECK_INTERVAL_MS } : null;
  const httpsServer = httpsOptions ? keepIdleConnections(https.createServer(httpsOptions)) : null;
  if (httpsServer) io.attach(httpsServer);
  // With REDIS_URL, rooms live in Redis and broadcasts cross nodes; else one process holds them.
  const cluster = options.redisUrl ? await connectCluster(options.redisUrl, String(options.port), log, wallClock) : null;
  if (cluster) io.adapter(cluster.adapter);
  const limits = options.rateLimiter ?? new RateLimits({ ...DEFAULT_RATE_LIMITS, ...options.rateLimits });
  const memory = cluster ? null : new MemoryRoomStore(wallClock);
  const persistence = cluster ? null : new RoomPersistence(options.dataDir, log, wallClock);
  const ctx: ServerContext = {
    io,
    rooms: cluster?.store ?? new PersistingRoomStore(memory!, persistence!),
    checkpoints: new CheckpointStore(options.dataDir),
    clock: wallClock,
    timers: new Timers(systemClock),
    node: cluster?.node ?? null,
    draining: false,
    ice: options.ice ?? NO_TURN,
    joinSecret: options.joinSecret,
    log,
    admissionDeadlineMs: options.admissionDeadlineMs,
    keyDeadlineMs: options.keyDeadlineMs,
    stallFloorMs: options.stallFloorMs,
    relay: new RelayLedger(),
    relayFlow: new RelayBackpressure(systemClock),
    networkChecks: new NetworkChecks(),
  };
  const graceMs = options.reconnectGraceMs ?? DEFAULT_RECONNECT_GRACE_MS;
  if (memory && persistence) await restoreRooms(ctx, memory, persistence, graceMs);

  let port = 0;
  let httpsPort: number | null = null;
  const certificateFingerprint = options.https ? shortFingerprint(new X509Certificate(options.https.cert).fingerprint256) : null;
  const info = (): ServerInfo => {
    const urls = studentUrls(`/?room=${encodeURIComponent(defaultRoom)}`);
    return { defaultRoom, defaultTask: options.defaultTask ?? DEFAULT_TASK.id, httpPort: port, httpsPort, certificateFingerprint, ...urls };
  };
  /** The student page's URLs with `query`: https on each LAN address first, then http, then this machine. */
  const studentUrls = (query: string): { studentUrls: string[]; localUrl: string } => {
    const hosts = WILDCARD_HOSTS.has(options.host)
      ? lanAddresses().filter((a) => !/^fe80:/i.test(a)) // link-local IPv6 needs a zone id, which browsers refuse in URLs
      : [options.host!];
    const local = WILDCARD_HOSTS.has(options.host) || options.host === '127.0.0.1' || options.host === '::1' ? 'localhost' : options.host!;
    return {
      studentUrls: [
        ...(httpsPort === null ? [] : hosts.map((h) => `https://${urlHost(h)}:${httpsPort}${query}`)),
        ...hosts.map((h) => `http://${urlHost(h)}:${port}${query}`),
      ],
      localUrl: `http://${urlHost(local)}:${port}${query}`,
    };
  };
  const joinInfo = (room: string): RoomJoinInfo => {
    const code = joinCodeFor(options.joinSecret, room);
    return { room, code, ...studentUrls(`/?room=${encodeURIComponent(room)}&code=${code}`) };
  };
  const app = createHttpApp(ctx, {
    info,
    joinInfo,
    trustProxy,
    joinSecret: options.joinSecret,
    teacherToken: options.teacherToken,
    clientDir: options.clientDir,
    startedAt: Date.now(),
    datasets: new DatasetLibrary(),
    served: new ServedBytes(),
    refusals: new DataRefusals(),
    relay: ctx.relay,
    networkChecks: ctx.networkChecks,
    limits,
  });
  const handle: http.RequestListener = (req, res) => void app(req, res);
  httpServer.on('request', handle);
  httpsServer?.on('request', handle);

  // Before any event: an address past its connection caps, or a connection without its
  // room's join code, is turned away.
  const caps = new ConnectionCaps();
  const holdsSeat = async (room: string, token: string) => (await ctx.rooms.read(room))?.knowsToken(tokenHash(token)) ?? false;
  // Connections whose handshake carried a member token: members coming back, whose events spend their own budget.
  const returning = new WeakSet<IoSocket>();
  io.use((socket, next) => {
    socket.data.address = clientAddress(socket.request, trustProxy);
    authenticateSocket(socket, { joinSecret: options.joinSecret, limits, log, holdsSeat, caps }).then((member) => {
      if (member) returning.add(socket);
      next();
    }, next);
  });

  io.on('connection', (socket) => {
    socket.data = { ...socket.data, room: null, memberId: null, loggedErrors: new Set(), limitedUntil: 0, queue: Promise.resolve() };
    const address = socket.data.address;
    caps.opened(address);
    socket.once('disconnect', () => caps.closed(address));
    // Unknown events are refused here, after the rate limit, not in an onAny listener:
    // socket.io calls those before any middleware, so a flood of unknown events was answered
    // one for one, past the budget (found by test/class/abuse-sockets.test.ts).
    socket.use((packet, next) => {
      // A relayed ring message counts by its bytes, against a budget of its own (rate-limits.ts).
      const relayed = packet[0] === 'link:data' ? relayedBytesOf(packet[1]) : null;
      (relayed === null ? limits.socketEvent(socket.id, socket.data.address, socket.data.memberId !== null || returning.has(socket)) : limits.relayedBytes(socket.id, relayed)).then(
        (limited) => {
          if (limited) return refuseRateLimited(socket, packet, limited.retryAfterMs, log);
          if (typeof packet[0] !== 'string' || !KNOWN_EVENTS.has(packet[0])) return refuseUnknown(socket, packet, log);
          next();
        },
        (err: unknown) => refuseUncounted(socket, packet, err, log),
      );
    });
    registerRoomHandlers(ctx, socket);
    registerSignalHandlers(ctx, socket);
    registerLinkRelayHandlers(ctx, socket);
    registerTrainingHandlers(ctx, socket);
    registerSecureKeyHandlers(ctx, socket);
    registerIceHandlers(ctx, socket);
  });

  try {
    port = await listen(httpServer, options.port, options.host);
    if (httpsServer && options.https) {
      try {
        httpsPort = await listen(httpsServer, options.https.port, options.host);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || !options.https.anyPortIfTaken) {
          httpServer.close();
          throw err;
        }
        httpsPort = await listen(httpsServer, 0, options.host);
        log.warn(`https port ${options.https.port} is taken; using ${httpsPort}`);
      }
    }
  } catch (err) {
    // Nothing is serving: the restored rooms' sweeps and the Redis connections must not keep the process alive.
    ctx.timers.close();
    await (cluster ? cluster.close() : ctx.rooms.close());
    throw err;
  }
  cluster?.start(ctx, graceMs);
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    httpsPort,
    io,
    info,
    joinInfo,
    relayHeldBytes: () => ctx.relayFlow.heldBytes,
    close: async () => {
      ctx.draining = true;
      // Only this node's connections: through the Redis adapter a plain disconnectSockets reaches every node's.
      io.local.disconnectSockets(true);
      const servers = httpsServer ? [httpServer, httpsServer] : [httpServer];
      const cut = setTimeout(() => {
        for (const s of servers) s.closeAllConnections();
      }, CLOSE_GRACE_MS);
      // io.close() closes the server attached last; the other one (and its engine) closes here.
      await new Promise<void>((resolve) => io.close(() => resolve()));
      if (httpsServer) await new Promise<void>((resolve) => httpServer.close(() => resolve()));
      clearTimeout(cut);
      ctx.timers.close();
      await (cluster ? cluster.close() : ctx.rooms.close());
    },
  };
}

/** Drops an event the protocol does not have: its ack, if any, and the socket hear ERR_BAD_REQUEST. */
function refuseUnknown(socket: IoSocket, packet: unknown[], log: Logger): void {
  const event = String(packet[0]).slice(0, 40);
  const body = { code: 'ERR_BAD_REQUEST' as const, message: `unknown event ${JSON.stringify(event)}` };
  const key = `unknown:${event}`;
  if (!socket.data.loggedErrors.has(key)) {
    socket.data.loggedErrors.add(key);
    log.warn(`socket ${socket.id}: unknown event ${JSON.stringify(event)} dropped`);
  }
  const ack = packet[packet.length - 1];
  if (typeof ack === 'function') (ack as (r: unknown) => void)({ ok: false, error: body });
  else socket.emit('server:error', body);
}

/**
 * Drops an event the rate limiter could not count (its store failed): the server cannot
 * tell whether the client is over budget, so it says what happened, ERR_INTERNAL, rather
 * than ERR_RATE_LIMITED, which would send an honest client into back-off for nothing. The
 * ack, if any, always hears it (a client never waits on a dropped event); the log and the
 * socket hear it once per connection.
 */
function refuseUncounted(socket: IoSocket, packet: unknown[], err: unknown, log: Logger): void {
  const body = { code: 'ERR_INTERNAL' as const, message: 'the server could not check its rate limits; try again' };
  const ack = packet[packet.length - 1];
  if (typeof ack === 'function') (ack as (r: unknown) => void)({ ok: false, error: body });
  const key = 'rate-limiter:ERR_INTERNAL';
  if (socket.data.loggedErrors.has(key)) return;
  socket.data.loggedErrors.add(key);
  log.error(`socket ${socket.id}: rate limiter failed, events dropped (further failures for this socket not logged): ${String(err)}`);
  if (typeof ack !== 'function') socket.emit('server:error', body);
}

/**
 * Drops a rate-limited event: its ack, if any, gets the coded error (so a client never
 * waits on it), and the socket hears ERR_RATE_LIMITED once per window, not once per event,
 * so a flood is not answered with a flood.
 */
function refuseRateLimited(socket: IoSocket, packet: unknown[], retryAfterMs: number, log: Logger): void {
  const body = { code: 'ERR_RATE_LIMITED' as const, message: `too many events; try again in ${Math.ceil(retryAfterMs)} ms` };
  const ack = packet[packet.length - 1];
  if (typeof ack === 'function') (ack as (r: unknown) => void)({ ok: false, error: body });
  const now = Date.now();
  if (now < socket.data.limitedUntil) return;
  socket.data.limitedUntil = now + retryAfterMs;
  log.warn(`socket ${socket.id} (${socket.data.address}) is rate-limited for ${Math.ceil(retryAfterMs)} ms`);
  socket.emit('server:error', body);
}

/** The first CERTIFICATE_FINGERPRINT_BYTES bytes of a colon-separated fingerprint ("AB:CD:…"). */
function shortFingerprint(fingerprint: string): string {
  return fingerprint.split(':').slice(0, CERTIFICATE_FINGERPRINT_BYTES).join(':');
}
