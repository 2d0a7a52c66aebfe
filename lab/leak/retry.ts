/**
 * The retry attack of issue 38, for `npm run leak`: a student spoils the check word of a
 * secure step, so the masked sum S1 of all four reaches it (and the hub) while the step
 * fails for everyone; then it accuses a classmate, who is evicted, and records the sum S2
 * of the redo. Masked sums are exact, so before the fix S1 − S2 was the evicted member's
 * gradient, to the fixed point's precision: the linear-layer leak read its drawings back.
 * Now a failed secure turn is skipped (shared/training/sync-mode.ts), and S2 is zero.
 * The attacker runs the same attack (attack.ts) on S1 − S2, and, for the baseline, on S1
 * itself: the class's sum of a step, which every member holds after every step by design.
 * What the retry adds is what the difference identifies that the sum does not.
 */
import type { DataSource } from '../../shared/data/data-source';
import { Trainer } from '../../shared/training/trainer';
import type { StartConfig } from '../../shared/protocol';
import { createMemoryMesh } from '../../test/support/memory-ring';
import { memberIds, relayedDirectories, secureOver, spoiler } from '../../test/support/secure-ring';

/** Four students: the attacker (rank 0), two classmates, and the victim, evicted after the spoiled step (rank 3). */
export const RETRY_N = 4;
const ATTACKER = 0;
export const RETRY_VICTIM = 3;

export interface RetryRecord {
  /** S1, the failed step's sum of all four: what every member holds of every step anyway (the sum is public to the class). */
  sum: Float32Array;
  /** S1 − S2, as the attacker reads it (decoded from the masked words). */
  difference: Float32Array;
  /** Whether the redo summed anything at all. */
  redoSummed: boolean;
  /** The victim's examples in the spoiled step. */
  originals: Float32Array[];
}

/** One secure step, spoiled; the victim evicted; the redo. `shardsOf(rank, onRead)` gives each rank its data, telling the victim's examples to `onRead`. */
export async function recordRetry(config: StartConfig, shardsOf: (rank: number, record: ((example: Float32Array) => void) | null) => DataSource): Promise<RetryRecord> {
  const ids = memberIds(RETRY_N);
  const directories = relayedDirectories(ids);
  const sums: Float32Array[] = [];
  let spoiling = false;
  const first = createMemoryMesh(RETRY_N, { generation: 1 });
  const engines = first.rings.map((e, r) => (r === ATTACKER ? spoiler(e, sums, () => spoiling) : e));
  const { secure } = secureOver(engines, ids, directories, 1);
  let originals: Float32Array[] = [];
  const trainers = secure.map((c, r) => new Trainer(config, shardsOf(r, r === RETRY_VICTIM ? (x) => originals.push(x) : null), c));
  await Promise.all(trainers.map((t) => t.trainStep()));
  originals = [];
  spoiling = true;
  const failed = await Promise.allSettled(trainers.map((t) => t.trainStep()));
  spoiling = false;
  if (failed.some((f) => f.status === 'fulfilled')) throw new Error('the spoiled step did not fail');
  const s1 = sums.at(-1)!;
  const spoiled = originals;
  await trainers[RETRY_VICTIM]!.dispose();
  const survivors = trainers.filter((_, r) => r !== RETRY_VICTIM);
  const second = createMemoryMesh(RETRY_N - 1, { generation: 2 });
  const engines2 = second.rings.map((e, r) => (r === ATTACKER ? spoiler(e, sums, () => false) : e));
  const again = secureOver(engines2, ids.slice(0, RETRY_N - 1), directories.slice(0, RETRY_N - 1), 2).secure;
  survivors.forEach((t, r) => t.setCollective(again[r]!));
  await Promise.all(survivors.map((t) => t.syncState()));
  await Promise.all(survivors.map((t) => t.trainStep()));
  const s2 = sums.at(-1)!;
  await Promise.all(survivors.map((t) => t.dispose()));
  return { sum: s1, difference: s1.map((v, i) => v - s2[i]!), redoSummed: s2.some((v) => v !== 0), originals: spoiled };
}

