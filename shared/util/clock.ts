/**
 * The folder shared/util/ holds small helpers with no project imports: time, seeded
 * randomness, yielding to the event loop.
 *
 * Time as a parameter. Everything that waits or measures (the collective engine, the
 * network, the worker, the trainer, the room) takes a Clock, so unit tests can run on
 * a manual clock instead of sleeping on real time.
 */
export interface Clock {
  /** Milliseconds on a monotonic scale; only differences are meaningful. */
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/**
 * Milliseconds since the epoch, to the microsecond: unlike performance.now(), whose origin
 * is each thread's own start, comparable between the threads of one machine (the compute
 * thread's crossing is measured with it).
 */
export const threadsNow = (): number => performance.timeOrigin + performance.now();

/** Resolves after `ms` on `clock`. */
export const sleep = (clock: Clock, ms: number): Promise<void> => new Promise((resolve) => clock.setTimeout(resolve, ms));

/**
 * A clock that moves only when told: `advance(ms)` runs every timer that falls due, in
 * order. For unit tests of timeouts and deadlines.
 */
export class ManualClock implements Clock {
  private time = 0;
  private nextId = 1;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.timers.set(id, { at: this.time + Math.max(0, ms), fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Moves time forward by `ms`, running each due timer at its own time. */
  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      let due: [number, { at: number; fn: () => void }] | null = null;
      for (const entry of this.timers) if (entry[1].at <= end && (!due || entry[1].at < due[1].at)) due = entry;
      if (!due) break;
      this.timers.delete(due[0]);
      this.time = due[1].at;
      due[1].fn();
    }
    this.time = end;
  }

  /** Timers still waiting. */
  get pending(): number {
    return this.timers.size;
  }
}
