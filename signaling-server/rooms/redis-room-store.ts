/**
 * Rooms in Redis, shared by every signaling node (REDIS_URL). Each room is a hash holding
 * its record (RoomRecord as JSON, room-codec.ts) and a version; a change reads the record, applies the
 * Room method, and writes back with a Lua compare-and-set on the version, retrying when
 * another node wrote in between (optimistic concurrency: membership, indexes and
 * generations change atomically). The loss history is a list per run, appended by the same
 * script, so a progress report does not rewrite the lesson's curve.
 *
 * Keys (prefix `webring:`): room:<name> {v, record}; room:<name>:history:<run> [points];
 * rooms {names}.
 */
import type { Redis } from 'ioredis';
import { WebringError } from '../../shared/protocol/errors';
import type { MetricPoint, RoomMetrics } from '../../shared/protocol';
import type { Clock } from '../../shared/util/clock';
import { Room } from './room';
import { MAX_HISTORY_POINTS } from './run-state';
import { decodeRoom, encodeRoom, type RoomRecord } from './room-codec';
import type { RoomStore } from './room-store';

export const REDIS_KEY_PREFIX = 'webring:';
/** Conflicting writes from other nodes are retried this often before the event fails. */
const MAX_CAS_ATTEMPTS = 100;
/** Up to this long (ms) between retries, randomised so two nodes do not collide again. */
const CAS_RETRY_JITTER_MS = 4;

/**
 * KEYS: room hash, this run's history, the rooms set, the previous run's history.
 * ARGV: expected version ('' for none), record JSON ('' deletes the room), new version,
 * room name, history cap, then the new history points.
 */
const COMPARE_AND_SET = `
local current = redis.call('HGET', KEYS[1], 'v') or ''
if current ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
  redis.call('SREM', KEYS[3], ARGV[4])
  return 1
end
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'record', ARGV[2])
redis.call('SADD', KEYS[3], ARGV[4])
if KEYS[4] ~= KEYS[2] then redis.call('DEL', KEYS[4]) end
if #ARGV > 5 then
  for i = 6, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
  redis.call('LTRIM', KEYS[2], -tonumber(ARGV[5]), -1)
end
return 1
`;

/** KEYS: room hash. ARGV: the version the caller holds. Returns {v} when unchanged, {v, record} otherwise, {} when absent. */
const READ_IF_CHANGED = `
local v = redis.call('HGET', KEYS[1], 'v')
if not v then return {} end
if v == ARGV[1] then return {v} end
return {v, redis.call('HGET', KEYS[1], 'record')}
`;

/**
 * What this node last read or wrote. `room` is built over `record` itself, without a copy:
 * readers never change a room they read, and a change always starts from a copy of
 * `record` (applyWithRetries).
 */
interface Cached {
  version: string;
  record: RoomRecord;
  room: Room;
}

type RedisWithScripts = Redis & {
  webringCas(...args: Array<string | number>): Promise<number>;
  webringRead(key: string, version: string): Promise<string[]>;
};

/** One waiting change: applied with whatever else waits for the same room, in one write. */
interface PendingChange {
  change: (room: Room) => unknown;
  create: boolean;
  resolve(value: { room: Room; result: unknown } | null): void;
  reject(err: unknown): void;
}

export class RedisRoomStore implements RoomStore {
  private readonly redis: RedisWithScripts;
  private readonly cache = new Map<string, Cached>();
  /**
   * Changes to one room from this node wait here while a write of that room is in flight,
   * and then go together in one read-modify-write: the 32 progress reports of a step cost
   * one compare-and-set, not 32 (a room change throws before it changes anything, so one
   * failing change leaves the others' effects intact).
   */
  private readonly pending = new Map<string, PendingChange[]>();
  private readonly writing = new Set<string>();

  /** `clock` is the time of every room this node rebuilds; nodes' clocks must agree (wall time). */
  constructor(
    redis: Redis,
    private readonly clock: Clock,
    private readonly prefix = REDIS_KEY_PREFIX,
  ) {
    redis.defineCommand('webringCas', { numberOfKeys: 4, lua: COMPARE_AND_SET });
    redis.defineCommand('webringRead', { numberOfKeys: 1, lua: READ_IF_CHANGED });
    this.redis = redis as RedisWithScripts;
  }

  private roomKey = (name: string) => `${this.prefix}room:${name}`;
  private historyKey = (name: string, run: number) => `${this.prefix}room:${name}:history:${run}`;
  private get roomsKey() {
    return `${this.prefix}rooms`;
  }

  /** The room's current record, from this node's cache when Redis holds the same version. */
  private async fetch(name: string): Promise<Cached | null> {
    const cached = this.cache.get(name);
    const reply = await this.redis.webringRead(this.roomKey(name), cached?.version ?? '');
    if (reply.length === 0) {
      this.cache.delete(name);
      return null;
    }
    if (reply.length === 1 && cached) return cached;
    const record = JSON.parse(reply[1]!) as RoomRecord;
    const fresh: Cached = { version: reply[0]!, record, room: decodeRoom(record, this.clock) };
    this.cache.set(name, fresh);
    return fresh;
  }

  async read(name: string): Promise<Room | null> {
    return (await this.fetch(name))?.room ?? null;
  }

  /** As RoomStore.update; the room given back is the one stored, with any changes written together with this one. */
  update<T>(name: string, change: (room: Room) => T, options: { create?: boolean } = {}): Promise<{ room: Room; result: T } | null> {
    return new Promise((resolve, reject) => {
      const waiting = this.pending.get(name) ?? [];
      waiting.push({ change, create: options.create ?? false, resolve: resolve as PendingChange['resolve'], reject });
      this.pending.set(name, waiting);
      if (!this.writing.has(name)) void this.drain(name);
    });
  }

  private async drain(name: string): Promise<void> {
    this.writing.add(name);
    try {
      for (let batch = this.pending.get(name); batch; batch = this.pending.get(name)) {
        this.pending.delete(name);
        try {
          await this.applyWithRetries(name, batch);
        } catch (err) {
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      this.writing.delete(name);
    }
  }

  private async applyWithRetries(name: string, batch: PendingChange[]): Promise<void> {
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const current = await this.fetch(name);
      // A private copy: a failed compare-and-set must leave the cache as Redis has it.
      let room = current ? decodeRoom(structuredClone(current.record), this.clock) : null;
      const outcomes: Array<{ ok: true; result: unknown } | { ok: false; error: unknown } | null> = batch.map((p) => {
        if (!room) {
          if (!p.create) return null;
          room = new Room(name, this.clock);
        }
        try {
          return { ok: true, result: p.change(room) };
        } catch (error) {
          return { ok: false, error };
        }
      });
      if (!room) {
        for (const p of batch) p.resolve(null);
        return;
      }
      const stored: Room = room;
      const record = encodeRoom(stored);
      const keep = !stored.isDisposable;
      const version = String(Number(current?.version ?? '0') + 1);
      const written = await this.redis.webringCas(
        this.roomKey(name),
        this.historyKey(name, record.run),
        this.roomsKey,
        this.historyKey(name, current?.record.run ?? record.run),
        current?.version ?? '',
        keep ? JSON.stringify(record) : '',
        version,
        name,
        MAX_HISTORY_POINTS,
        ...stored.historyPoints().map((p) => JSON.stringify(p)),
      );
      if (written === 1) {
        if (keep) this.cache.set(name, { version, record, room: stored });
        else this.cache.delete(name);
        batch.forEach((p, i) => {
          const outcome = outcomes[i];
          if (!outcome) p.resolve(null);
          else if (outcome.ok) p.resolve({ room: stored, result: outcome.result });
          else p.reject(outcome.error);
        });
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.random() * CAS_RETRY_JITTER_MS));
    }
    throw new WebringError('ERR_INTERNAL', `room ${name} changed on other nodes ${MAX_CAS_ATTEMPTS} times in a row`);
  }

  async metrics(name: string): Promise<RoomMetrics> {
    const current = await this.fetch(name);
    if (!current) return new Room(name, this.clock).metrics();
    const points = await this.redis.lrange(this.historyKey(name, current.record.run), 0, -1);
    return { room: name, history: points.map((p) => JSON.parse(p) as MetricPoint), evaluations: [...current.record.evaluations] };
  }

  /** Updates delete an idle room themselves (see applyWithRetries); nothing is left to do. */
  async releaseIfIdle(): Promise<void> {}

  async names(): Promise<string[]> {
    return this.redis.smembers(this.roomsKey);
  }

  async close(): Promise<void> {
    this.cache.clear();
  }
}
