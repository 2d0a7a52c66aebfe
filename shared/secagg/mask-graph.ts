/**
 * Who masks with whom (SecAgg+, Bell et al. 2020): each rank shares pairwise masks with k
 * partners instead of all N − 1, so mask generation costs k buffers per step however large
 * the class. The graph is a Harary graph H(k, N) over a permutation of the ranks: a circle
 * in shuffled order, each rank joined to the k/2 nearest on either side. The permutation is
 * drawn from the run, the generation and the server's random seed for it (graphSeed), the
 * same on every rank.
 *
 * k = min(N − 1, 2⌈log₂ N⌉). A classmate's gradient is exposed only to a coalition that
 * holds every one of its k partners' pairwise secrets, that is, all k partners colluding (a
 * lone neighbour, the hub or the server hold none of them). Up to N = 5 everyone masks
 * with everyone; at N = 30, k = 10: ten named classmates would have to pool their keys
 * against one student, and the graph changes with every generation. SecAgg+ shows that
 * O(log N) partners on a random graph keep that chance negligible; the log also keeps the
 * cost of masks a small fraction of a step (docs/privacy.md has the figures).
 */
import { mixSeed, permutationInto } from '../util/random';

/** The number of mask partners of each rank in a ring of `n`. */
export function maskPartnerCount(n: number): number {
  if (n <= 1) return 0;
  return Math.min(n - 1, 2 * Math.ceil(Math.log2(n)));
}

/**
 * The seed of a generation's mask graph: its run and number, and the random `maskSeed` the
 * server drew when it made the generation (Generation.maskSeed). Before issue 38 it was the
 * run and number alone, so a group of seats could compute every future generation's graph
 * and steer the class (by joins, leaves and re-forms) to one that gave it all of a
 * classmate's partners. Now a graph is known only once its generation exists; a group can
 * only draw again by forcing a new generation, which the room limits and logs.
 */
export const graphSeed = (run: number, generation: number, maskSeed = 0): number => mixSeed(mixSeed(mixSeed(run, generation), maskSeed), 0x5ecA66);

/** Rank `rank`'s mask partners in a ring of `n`, ascending; symmetric: j is i's partner iff i is j's. */
export function maskPartners(rank: number, n: number, seed: number): number[] {
  const k = maskPartnerCount(n);
  if (k >= n - 1) return Array.from({ length: n }, (_, r) => r).filter((r) => r !== rank);
  const order = permutationInto(new Uint32Array(n), seed);
  const at = order.indexOf(rank);
  const partners = new Set<number>();
  for (let d = 1; d <= k / 2; d++) {
    partners.add(order[(at + d) % n]!);
    partners.add(order[(at - d + n) % n]!);
  }
  return [...partners].sort((a, b) => a - b);
}
