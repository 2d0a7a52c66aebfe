/**
 * Several signaling nodes over one Redis (REDIS_URL): rooms live in Redis (RedisRoomStore),
 * broadcasts reach sockets on every node through @socket.io/redis-adapter, and each node
 * announces itself with a key that expires unless renewed. A node that dies (crash, kill -9)
 * stops renewing: every surviving node then counts its members as disconnected, gives them
 * the reconnect grace to come back through another node (same id, index and rank: the ring
 * keeps training), and drops whoever does not, like a closed tab.
 */
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createAdapter } from '@socket.io/redis-adapter';
import type { Clock } from '../../shared/util/clock';
import type { Logger, RoomContext } from './room-context';
import { RedisRoomStore, REDIS_KEY_PREFIX } from './redis-room-store';
import { dropOverdueMembers } from './reconnect-sweep';

/** A node's key lives this long (ms) without renewal: how long a dead node's members look connected. */
const NODE_TTL_MS = 3_000;
/** Renewal period (ms): three chances within the TTL. */
const NODE_HEARTBEAT_MS = 1_000;
/** How often (ms) each node looks for members of dead nodes and members past their grace. */
const NODE_SWEEP_MS = 1_000;
/** Redis must answer the first command within this long (ms) at start-up, or the server does not start. */
const REDIS_CONNECT_TIMEOUT_MS = 5_000;

export class ClusterError extends Error {
  readonly code = 'ERR_REDIS';
}

export interface Cluster {
  /** This node's id: host, port and a random suffix, so a restarted node is a new node. */
  node: string;
  store: RedisRoomStore;
  adapter: ReturnType<typeof createAdapter>;
  /** Starts announcing this node and sweeping (once the server listens and knows its port). */
  start(ctx: RoomContext, reconnectGraceMs: number): void;
  close(): Promise<void>;
}

/** The URL as it may be logged: a password in it is replaced by ***. */
function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/**
 * Connects to Redis at `url` (throws ClusterError when it does not answer in time) and
 * builds this node's room store over it, on `clock` (wall time: nodes compare its times).
 */
export async function connectCluster(url: string, label: string, log: Logger, clock: Clock): Promise<Cluster> {
  const options = { lazyConnect: true, connectTimeout: REDIS_CONNECT_TIMEOUT_MS, maxRetriesPerRequest: 3 };
  const redis = new Redis(url, options);
  const subscriber = new Redis(url, options);
  // ioredis reconnects by itself; while Redis is away, say so once per outage, not per retry.
  let down = false;
  for (const connection of [redis, subscriber]) {
    connection.on('error', (err: Error) => {
      if (down) return;
      down = true;
      log.error(`Redis at ${withoutPassword(url)} is unreachable (${err.message}); rooms cannot change until it is back`);
    });
    connection.on('ready', () => {
      if (!down) return;
      down = false;
      log.warn(`Redis at ${withoutPassword(url)} is back`);
    });
  }
  try {
    await Promise.all([redis.connect(), subscriber.connect()]);
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    subscriber.disconnect();
    throw new ClusterError(`cannot reach Redis at REDIS_URL=${withoutPassword(url)}: ${(err as Error).message}`);
  }
  const node = `${os.hostname()}:${label}/${randomBytes(3).toString('hex')}`;
  const nodeKey = (id: string) => `${REDIS_KEY_PREFIX}node:${id}`;
  const nodesKey = `${REDIS_KEY_PREFIX}nodes`;
  const store = new RedisRoomStore(redis, clock);
  const timers: Array<ReturnType<typeof setInterval>> = [];

  const announce = async () => {
    await redis.multi().set(nodeKey(node), String(Date.now()), 'PX', NODE_TTL_MS).sadd(nodesKey, node).exec();
  };

  /** Nodes whose key has not expired; forgets the others. */
  const aliveNodes = async (): Promise<Set<string>> => {
    const ids = await redis.smembers(nodesKey);
    if (ids.length === 0) return new Set();
    const stamps = await redis.mget(...ids.map(nodeKey));
    const dead = ids.filter((_, i) => stamps[i] === null);
    if (dead.length > 0) await redis.srem(nodesKey, ...dead);
    return new Set(ids.filter((_, i) => stamps[i] !== null));
  };

  let sweeping = false;
  const sweep = async (ctx: RoomContext, graceMs: number) => {
    if (sweeping) return; // the last one is still going (a slow Redis): skip a beat, do not pile up
    sweeping = true;
    try {
      await sweepRooms(ctx, graceMs);
    } finally {
      sweeping = false;
    }
  };
  const sweepRooms = async (ctx: RoomContext, graceMs: number) => {
    const alive = await aliveNodes();
    alive.add(node);
    for (const name of await store.names()) {
      const room = await store.read(name);
      if (!room) continue;
      if ([...room.nodes].some((n) => !alive.has(n))) {
        const marked = await store.update(name, (r) => r.markNodesGone((n) => alive.has(n)));
        if (marked?.result) ctx.log.warn(`room ${name}: a signaling node is gone; its members have ${graceMs} ms to reconnect through another`);
      }
      await dropOverdueMembers(ctx, name, graceMs);
    }
  };

  return {
    node,
    store,
    adapter: createAdapter(redis, subscriber, { key: `${REDIS_KEY_PREFIX}socket.io` }),
    start(ctx, graceMs) {
      const log = (what: string) => (err: unknown) => ctx.log.error(`node ${node}: ${what} failed: ${(err as Error).message}`);
      void announce().catch(log('announcing'));
      timers.push(setInterval(() => void announce().catch(log('announcing')), NODE_HEARTBEAT_MS));
      timers.push(setInterval(() => void sweep(ctx, graceMs).catch(log('sweeping')), NODE_SWEEP_MS));
      ctx.log.info(`signaling node ${node} shares rooms through Redis`);
    },
    async close() {
      for (const t of timers) clearInterval(t);
      // Leaving at once, so the other nodes count this node's members as disconnected now.
      await redis.multi().del(nodeKey(node)).srem(nodesKey, node).exec();
      await store.close();
      redis.disconnect();
      subscriber.disconnect();
    },
  };
}
