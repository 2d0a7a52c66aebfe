/**
 * Secure aggregation over an in-memory mesh for unit tests: one KeyDirectory per rank, and
 * a relay that hands every published key to every directory, as the signaling server's
 * `secagg:key` does. The real relay is exercised by test/class/secure-keys.test.ts and the
 * E2E test.
 */
import { createMemoryMesh, type MemoryMesh } from './memory-ring';
import { KeyDirectory } from '../../shared/secagg/key-directory';
import { SecureAggregation, type SecureCollective } from '../../shared/secagg/secure-collective';
import { systemClock } from '../../shared/util/clock';
import { COLLECTIVE_TAG, type Collective, type CollectiveEngine, type CollectiveOptions, type CollectiveTag } from '../../shared/collectives/collective';
import { wordsOf } from '../../shared/collectives/words';
import { decodeSum } from '../../shared/secagg/fixed-point';

export const memberIds = (n: number): string[] => Array.from({ length: n }, (_, r) => `member${String(r).padStart(4, '0')}`);

export interface SecureMesh extends MemoryMesh {
  secure: SecureCollective[];
  aggregations: SecureAggregation[];
  directories: KeyDirectory[];
}

/** Directories that hear each other's keys, for members `ids`; `silent` members never publish. */
export function relayedDirectories(ids: readonly string[], silent: ReadonlySet<string> = new Set(), keyWaitMs?: number): KeyDirectory[] {
  const directories: KeyDirectory[] = [];
  ids.forEach((id) => {
    directories.push(
      new KeyDirectory(
        (ring, publicKey) => {
          if (silent.has(id)) return;
          for (const d of directories) d.heard(ring, id, publicKey);
        },
        systemClock,
        () => undefined,
        keyWaitMs,
      ),
    );
  });
  return directories;
}

/** The secure collectives of `generation` over `engines`, for members `ids` (rank order). */
export function secureOver(engines: readonly CollectiveEngine[], ids: readonly string[], directories: readonly KeyDirectory[], generation: number, run = 1): { secure: SecureCollective[]; aggregations: SecureAggregation[] } {
  const aggregations = directories.map((d) => new SecureAggregation(d, systemClock));
  const secure = engines.map((e, r) => aggregations[r]!.over(e, run, generation, ids));
  return { secure, aggregations };
}

export function createSecureMesh(n: number, options: { hub?: boolean; generation?: number; timeoutMs?: number } = {}): SecureMesh {
  const mesh = createMemoryMesh(n, { hub: options.hub ?? false, generation: options.generation ?? 1, timeoutMs: options.timeoutMs });
  const ids = memberIds(n);
  const directories = relayedDirectories(ids);
  return { ...mesh, directories, ...secureOver(mesh.rings, ids, directories, options.generation ?? 1) };
}

type AllReduce = (buf: Float32Array, step: number, tag: CollectiveTag, options?: CollectiveOptions) => Promise<void>;

/** `target` with its gradient all-reduce replaced by `allReduce` (which may call the original). */
export function withAllReduce<T extends Collective>(target: T, allReduce: (original: AllReduce, ...args: Parameters<AllReduce>) => Promise<void>): T {
  const original: AllReduce = target.allReduce.bind(target);
  return new Proxy(target, {
    get(t, prop) {
      if (prop === 'allReduce') {
        return (buf: Float32Array, step: number, tag: CollectiveTag, options?: CollectiveOptions) =>
          tag === COLLECTIVE_TAG.gradients ? allReduce(original, buf, step, tag, options) : original(buf, step, tag, options);
      }
      const value = Reflect.get(t, prop, t) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(t) : value;
    },
  });
}

/** Under the masks: what a rank that spoils the check word sees of each sum (decoded), spoiling while `spoil()` says so. */
export function spoiler(engine: CollectiveEngine, sums: Float32Array[], spoil: () => boolean): CollectiveEngine {
  return withAllReduce(engine, async (original, buf, step, tag, options) => {
    const words = wordsOf(buf);
    const check = buf.length - (options?.exactTail ?? 0) - 1;
    if (spoil()) words[check] = (words[check]! + 1) >>> 0;
    await original(buf, step, tag, options);
    const sum = new Float32Array(check);
    decodeSum(words, sum, check);
    sums.push(sum);
  });
}
