/**
 * Where rooms live. Handlers never hold a Room across an await: they read a snapshot, or
 * apply a change through `update`, which is atomic per room. In one process
 * (MemoryRoomStore) that is the live object; with REDIS_URL (RedisRoomStore) every
 * signaling node applies changes to the record in Redis with a compare-and-set, so
 * students connected to different nodes are members of one room.
 */
import type { RoomMetrics } from '../../shared/protocol';
import type { Clock } from '../../shared/util/clock';
import { Room } from './room';

export interface RoomStore {
  /** A snapshot of the room, or null when nobody made it; read it, do not change it. */
  read(name: string): Promise<Room | null>;
  /**
   * Applies `change` to the room (made empty first when `create` and it does not exist)
   * atomically: nothing else changes the room between the read and the write. `change`
   * may run more than once (after a concurrent write elsewhere), so it must only change
   * the room and compute; effects (broadcasts) go after the update, from its result. A
   * throw leaves the room as it was. Null when the room does not exist and not `create`.
   */
  update<T>(name: string, change: (room: Room) => T, options?: { create?: boolean }): Promise<{ room: Room; result: T } | null>;
  metrics(name: string): Promise<RoomMetrics>;
  /** Forgets a room once nobody is in it and it holds no run worth showing. */
  releaseIfIdle(name: string): Promise<void>;
  names(): Promise<string[]>;
  close(): Promise<void>;
}

/** One process: rooms are live objects in a Map; updates run at once, in arrival order. */
export class MemoryRoomStore implements RoomStore {
  private readonly rooms = new Map<string, Room>();

  /** `clock` is the time of every room made here. */
  constructor(private readonly clock: Clock) {}

  /** A room restored from disk, kept as it is. */
  add(room: Room): void {
    this.rooms.set(room.name, room);
  }

  async read(name: string): Promise<Room | null> {
    return this.rooms.get(name) ?? null;
  }

  update<T>(name: string, change: (room: Room) => T, options: { create?: boolean } = {}): Promise<{ room: Room; result: T } | null> {
    let room = this.rooms.get(name);
    if (!room) {
      if (!options.create) return Promise.resolve(null);
      room = new Room(name, this.clock);
    }
    // Synchronous, so changes apply in the order events arrived.
    let result: T;
    try {
      result = change(room);
    } catch (err) {
      return Promise.reject(err);
    }
    this.rooms.set(name, room);
    return Promise.resolve({ room, result });
  }

  async metrics(name: string): Promise<RoomMetrics> {
    return (this.rooms.get(name) ?? new Room(name, this.clock)).metrics();
  }

  async releaseIfIdle(name: string): Promise<void> {
    const room = this.rooms.get(name);
    if (room?.isDisposable) this.rooms.delete(name);
  }

  async names(): Promise<string[]> {
    return [...this.rooms.keys()];
  }

  async close(): Promise<void> {}
}
