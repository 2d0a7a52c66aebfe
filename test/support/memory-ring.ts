/**
 * An in-memory ring for unit tests: each rank's right link delivers, asynchronously and
 * in order, to the next rank's RingAllReduce.receive. Only tests use this fake; the real
 * data-channel path is exercised by the Playwright tests and the benchmark.
 */
import { RingAllReduce, type RingAllReduceOptions } from '../../shared/collectives/ring-allreduce';
import { HubReducer, type HubReducerOptions } from '../../shared/collectives/hub-reducer';
import { HUB_RANK } from '../../shared/protocol';
import type { RingLink } from '../../shared/collectives/collective';
import type { Clock } from '../../shared/util/clock';

export interface MemoryLinkOptions {
  /** Simulated bytes that drain per macrotask, to exercise backpressure. Infinity: no backpressure. */
  drainBytesPerTick?: number;
}

export class MemoryLink implements RingLink {
  private queued: Uint8Array[] = [];
  private queuedBytes = 0;
  private waiters: Array<() => void> = [];
  private scheduled = false;
  /** Set by tests to observe or tamper with what crosses the link. */
  deliver: (bytes: Uint8Array) => void = () => {};

  constructor(private readonly options: MemoryLinkOptions = {}) {}

  send(bytes: Uint8Array): void {
    const copy = bytes.slice();
    this.queued.push(copy);
    this.queuedBytes += copy.byteLength;
    this.schedule();
  }

  isOpen(): boolean {
    return true;
  }

  bufferedAmount(): number {
    return this.queuedBytes;
  }

  whenWritable(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    let budget = this.options.drainBytesPerTick ?? Number.POSITIVE_INFINITY;
    while (this.queued.length > 0 && budget > 0) {
      const next = this.queued.shift()!;
      this.queuedBytes -= next.byteLength;
      budget -= next.byteLength;
      this.deliver(next);
    }
    if (this.queued.length > 0) this.schedule();
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}

export interface MemoryRing {
  rings: RingAllReduce[];
  links: MemoryLink[];
}

/** Builds N RingAllReduce instances wired rank r -> rank r+1 through MemoryLinks. */
export function createMemoryRing(
  worldSize: number,
  options: MemoryLinkOptions & { generation?: number; highWaterBytes?: number; timeoutMs?: number; clock?: Clock; poison?: (rank: number) => RingAllReduceOptions['poison'] } = {},
): MemoryRing {
  const links = Array.from({ length: worldSize }, () => new MemoryLink(options));
  const rings = links.map(
    (link, rank) =>
      new RingAllReduce({
        rank,
        worldSize,
        generation: options.generation ?? 1,
        right: worldSize > 1 ? link : null,
        highWaterBytes: options.highWaterBytes,
        timeoutMs: options.timeoutMs,
        clock: options.clock,
        poison: options.poison?.(rank),
      }),
  );
  links.forEach((link, rank) => {
    const right = rings[(rank + 1) % worldSize]!;
    link.deliver = (bytes) => right.receive(bytes);
  });
  return { rings, links };
}

export interface MemoryMesh {
  rings: RingAllReduce[];
  /** links[from][to]; the diagonal is unused. */
  links: MemoryLink[][];
  /** With `hub`: the hub, each rank's link up to it and its link down to each rank. */
  hub: { reducer: HubReducer; up: MemoryLink[]; down: MemoryLink[] } | null;
}

/**
 * N RingAllReduce instances with a link between every pair, so both the ring (over
 * links[r][r+1]) and halving-doubling (over its partners' links) can run. A delivery
 * says who sent it, as RingNetwork does.
 */
export function createMemoryMesh(
  worldSize: number,
  options: MemoryLinkOptions & {
    generation?: number;
    timeoutMs?: number;
    clock?: Clock;
    linkOptions?: (from: number, to: number) => MemoryLinkOptions;
    /** Adds a hub linked to every rank; `hubLinkOptions` shapes rank r's link up (r, 'up') and down (r, 'down'). */
    hub?: boolean;
    hubLinkOptions?: (rank: number, direction: 'up' | 'down') => MemoryLinkOptions;
    onMisbehaviour?: HubReducerOptions['onMisbehaviour'];
  } = {},
): MemoryMesh {
  const links = Array.from({ length: worldSize }, (_, from) =>
    Array.from({ length: worldSize }, (_, to) => new MemoryLink(options.linkOptions?.(from, to) ?? options)),
  );
  const up = options.hub ? Array.from({ length: worldSize }, (_, r) => new MemoryLink(options.hubLinkOptions?.(r, 'up') ?? options)) : [];
  const down = options.hub ? Array.from({ length: worldSize }, (_, r) => new MemoryLink(options.hubLinkOptions?.(r, 'down') ?? options)) : [];
  const rings = links.map(
    (row, rank) =>
      new RingAllReduce({
        rank,
        worldSize,
        generation: options.generation ?? 1,
        right: worldSize > 1 ? row[(rank + 1) % worldSize]! : null,
        peer: (to) => (to === rank ? null : row[to]!),
        hub: options.hub ? up[rank]! : null,
        timeoutMs: options.timeoutMs,
        clock: options.clock,
      }),
  );
  links.forEach((row, from) =>
    row.forEach((link, to) => {
      link.deliver = (bytes) => rings[to]!.receive(bytes, from);
    }),
  );
  if (!options.hub) return { rings, links, hub: null };
  const reducer = new HubReducer({ generation: options.generation ?? 1, worldSize, link: (r) => down[r] ?? null, onMisbehaviour: options.onMisbehaviour });
  up.forEach((link, r) => {
    link.deliver = (bytes) => reducer.receive(bytes, r);
  });
  down.forEach((link, r) => {
    link.deliver = (bytes) => rings[r]!.receive(bytes, HUB_RANK);
  });
  return { rings, links, hub: { reducer, up, down } };
}
