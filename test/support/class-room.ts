/**
 * One room of real Node workers against a test server, for the class tests: spawn workers
 * into it, read it as the teacher, and wait on it with the workers' last lines in the
 * failure message.
 */
import { lastLines, pollUntil, spawnNodeWorker, type SpawnedWorker } from './processes';
import { AS_TEACHER, codeFor } from './server';
import type { RoomStatus } from '../../shared/protocol';

export interface ClassRoom {
  readonly workers: SpawnedWorker[];
  spawn(name: string, extra?: string[]): SpawnedWorker;
  status(): Promise<RoomStatus>;
  waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number): Promise<T>;
  /** POSTs `body` to the room's `action` (start, stop) as the teacher; the HTTP status. */
  teacher(action: 'start' | 'stop', body?: unknown): Promise<number>;
}

/** Room `room` on the server `server()` gives (it starts in the file's before()). */
export function classRoom(server: () => { url: string }, room: string): ClassRoom {
  const workers: SpawnedWorker[] = [];
  return {
    workers,
    spawn(name, extra = []) {
      const w = spawnNodeWorker(server().url, room, codeFor(room), name, extra);
      workers.push(w);
      return w;
    },
    async status() {
      return (await (await fetch(`${server().url}/api/rooms/${room}`, AS_TEACHER)).json()) as RoomStatus;
    },
    waitFor: (what, probe, timeoutMs) => pollUntil(what, probe, timeoutMs, () => lastLines(workers, 8), 100),
    async teacher(action, body = {}) {
      const res = await fetch(`${server().url}/api/rooms/${room}/${action}`, { method: 'POST', headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return res.status;
    },
  };
}
