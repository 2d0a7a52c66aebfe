/**
 * Room state that must outlive a server restart (membership with indexes and token
 * digests, generation, run, config), kept in DATA_DIR/rooms/<room>/room.json in the codec's
 * RoomFile form. Written atomically (temp file, fsync, rename) whenever it changes (see
 * persisting-room-store.ts); validated on load like any other input.
 */
import { storedConfigSchema } from '../../shared/tasks/start-config';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { BACKENDS, MAX_ROOM_MEMBERS, ROOM_STATES, WORKER_KINDS, collectSettingSchema, roomNameSchema } from '../../shared/protocol';
import type { Clock } from '../../shared/util/clock';
import type { Room } from './room';
import { decodeRoom, encodeRoom, fromRoomFile, toRoomFile, type RoomFile } from './room-codec';
import type { Logger } from './room-context';

const ROOM_FILE = 'room.json';

const memberSchema = z.strictObject({
  id: z.string().regex(/^[a-z0-9]{8,32}$/),
  tokenHash: z.string().regex(/^[0-9a-f]{64}$/),
  name: z.string().max(64),
  backend: z.enum(BACKENDS),
  kind: z.enum(WORKER_KINDS),
  adapter: z.string().max(200).nullable(),
  index: z.number().int().min(0),
  examplesPerSec: z.number().finite().min(0),
  step: z.number().int().min(0),
  weightsHash: z.string().regex(/^[0-9a-f]{16}$/).nullable(),
});

const persistedRoomSchema = z.strictObject({
  format: z.literal(1),
  name: roomNameSchema,
  nextIndex: z.number().int().min(0),
  generation: z.number().int().min(0),
  run: z.number().int().min(0),
  state: z.enum(ROOM_STATES),
  config: storedConfigSchema.nullable(),
  step: z.number().int().min(0),
  epoch: z.number().int().min(0),
  active: z.array(memberSchema).max(64),
  waiting: z.array(memberSchema).max(64),
  /** Absent in files from before the hub, and while the room has none. */
  hub: memberSchema.extend({ kind: z.literal('hub') }).optional(),
  /** Absent while hub joins are allowed (and in files from before hubs needed a key). */
  hubBar: z
    .strictObject({ by: z.enum(['teacher', 'server']), run: z.number().int().min(0), at: z.number().finite(), detail: z.string().max(300) })
    .optional(),
  /** Absent in files from before collecting, and while the room collects for nothing. */
  collect: collectSettingSchema.optional(),
  /** The teacher's seat cap per address, only while one is set (without it here, a restart read such a room as invalid). */
  seatsPerAddress: z.number().int().min(1).max(MAX_ROOM_MEMBERS).optional(),
  /** Only while the teacher vouches that members sharing an address are distinct devices (secure-count.ts). */
  sharedAddressVouched: z.literal(true).optional(),
});

export class RoomPersistence {
  private readonly root: string;
  private writes = new Map<string, Promise<void>>();

  /** `clock` is the time of the rooms loadAll brings back. */
  constructor(
    dataDir: string,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {
    this.root = path.resolve(dataDir, 'rooms');
  }

  /** What room.json would hold for the room now. */
  fileOf(room: Room): RoomFile {
    return toRoomFile(encodeRoom(room));
  }

  /**
   * Queues a durable write of `state` (fileOf a room); writes of one room never interleave.
   * A failed write is logged, and the promise still resolves.
   */
  save(state: RoomFile): Promise<void> {
    const previous = this.writes.get(state.name) ?? Promise.resolve();
    const next = previous.then(() => this.write(state)).catch((err: unknown) => {
      this.log.error(`room ${state.name}: could not persist state: ${(err as Error).message}`);
    });
    this.writes.set(state.name, next);
    return next;
  }

  /** Resolves once every queued write has ended. */
  async flush(): Promise<void> {
    await Promise.all(this.writes.values());
  }

  /** The rooms of DATA_DIR; their members are disconnected from now and have the reconnect grace to come back. */
  async loadAll(): Promise<Room[]> {
    let names: string[];
    try {
      names = await fs.readdir(this.root);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const rooms: Room[] = [];
    for (const name of names) {
      if (!roomNameSchema.safeParse(name).success) continue;
      const file = path.join(this.root, name, ROOM_FILE);
      let raw: string;
      try {
        raw = await fs.readFile(file, 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.log.warn(`room ${name}: cannot read ${file}: ${(err as Error).message}`);
        continue;
      }
      try {
        const parsed = persistedRoomSchema.parse(JSON.parse(raw));
        if (parsed.name !== name) throw new Error(`file names room ${parsed.name}`);
        rooms.push(decodeRoom(fromRoomFile(parsed as RoomFile, this.clock.now()), this.clock));
      } catch (err) {
        this.log.warn(`room ${name}: ignoring invalid ${file}: ${(err as Error).message}`);
      }
    }
    return rooms;
  }

  private async write(state: RoomFile): Promise<void> {
    const dir = path.join(this.root, state.name);
    await fs.mkdir(dir, { recursive: true });
    const file = path.join(dir, ROOM_FILE);
    const tmp = `${file}.tmp`;
    const handle = await fs.open(tmp, 'w');
    try {
      await handle.writeFile(JSON.stringify(state));
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(tmp, file);
  }
}
