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
import type { CollectiveEngine } from '../../shared/collectives/collective';

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
