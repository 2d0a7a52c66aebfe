/**
 * A RoomStore that keeps room.json up to date by itself: a change through it that alters
 * what room.json holds (membership, indexes, generation, run, config) queues a durable write,
 * so no handler has to remember to save. Progress reports, which only move the step and the
 * members' telemetry several times a second, are written with the next change that matters
 * rather than each on its own: training must not become a stream of fsyncs, and a restarted
 * run resumes from its checkpoint, not from room.json's step.
 */
import type { RoomMetrics } from '../../shared/protocol';
import type { Room } from './room';
import type { RoomStore } from './room-store';
import type { RoomFile } from './room-codec';
import type { RoomPersistence } from './room-persistence';

/** room.json without what every progress report changes. */
function fingerprint(file: RoomFile): string {
  const durable = ({ step: _s, examplesPerSec: _e, weightsHash: _w, ...m }: RoomFile['active'][number]) => m;
  return JSON.stringify({ ...file, step: 0, epoch: 0, active: file.active.map(durable), waiting: file.waiting.map(durable) });
}

export class PersistingRoomStore implements RoomStore {
  /** The fingerprint of what was last queued for each room. */
  private readonly saved = new Map<string, string>();

  constructor(
    private readonly inner: RoomStore,
    private readonly persistence: RoomPersistence,
  ) {}

  read(name: string): Promise<Room | null> {
    return this.inner.read(name);
  }

  update<T>(name: string, change: (room: Room) => T, options?: { create?: boolean }): Promise<{ room: Room; result: T } | null> {
    return this.inner.update(name, change, options).then((updated) => {
      if (updated) this.persist(updated.room);
      return updated;
    });
  }

  metrics(name: string): Promise<RoomMetrics> {
    return this.inner.metrics(name);
  }

  releaseIfIdle(name: string): Promise<void> {
    return this.inner.releaseIfIdle(name);
  }

  names(): Promise<string[]> {
    return this.inner.names();
  }

  /** Waits for the writes still queued, then closes the store it wraps. */
  async close(): Promise<void> {
    await this.persistence.flush();
    await this.inner.close();
  }

  private persist(room: Room): void {
    const file = this.persistence.fileOf(room);
    const key = fingerprint(file);
    if (this.saved.get(room.name) === key) return;
    this.saved.set(room.name, key);
    void this.persistence.save(file);
  }
}
