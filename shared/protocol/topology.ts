/**
 * Who talks to whom in a ring of n ranks: the ring neighbours and the halving-doubling
 * partners. The server (which accusations it believes), the network (which links it
 * dials), the engine (which senders it accepts) and the worker (which neighbours it
 * shows) all ask here, so they can never disagree. A rule both sides of the wire keep, so
 * it lives with the protocol and imports nothing: the halving-doubling schedule
 * (shared/collectives/halving-doubling.ts) is checked against these partners in
 * test/unit/topology.test.ts.
 */

/**
 * The hub's place in a generation's collectives, where a rank would be: it has no rank (it
 * trains nothing and is never chief), and it is every rank's sender and receiver in the
 * hub collective.
 */
export const HUB_RANK = -1;

const mod = (a: number, n: number): number => ((a % n) + n) % n;

/** The rank that sends ring messages to `rank`. */
export const leftOf = (rank: number, n: number): number => mod(rank - 1, n);

/** The rank that `rank` sends ring messages to. */
export const rightOf = (rank: number, n: number): number => mod(rank + 1, n);

/**
 * The ranks `rank` exchanges with in a halving-doubling all-reduce of `n` ranks (links
 * beyond the ring), ascending. With P the largest power of two ≤ n, a rank r < P exchanges
 * with r XOR d for every d = P/2, …, 1, and with r + P when that rank exists (its extra
 * rank, which hands it its buffer first and gets the sum back last); an extra rank r ≥ P
 * exchanges with r − P only.
 */
export function halvingDoublingPartners(rank: number, n: number): number[] {
  let core = 1;
  while (core * 2 <= n) core *= 2;
  if (rank >= core) return [rank - core];
  const partners: number[] = [];
  for (let d = core >> 1; d >= 1; d >>= 1) partners.push(rank ^ d);
  if (rank + core < n) partners.push(rank + core);
  return partners.sort((a, b) => a - b);
}

/**
 * The ranks that send collective data to `rank` in a generation of `n` ring ranks: its left
 * neighbour and its halving-doubling partners (none in a ring of one), and HUB_RANK when
 * the generation has a hub. The hub's own senders (`rank` HUB_RANK) are every rank, and
 * without a hub nobody sends to it.
 */
export function sendersOf(rank: number, n: number, hasHub = false): Set<number> {
  if (rank === HUB_RANK) return hasHub ? new Set(Array.from({ length: n }, (_, r) => r)) : new Set();
  const senders = n < 2 ? new Set<number>() : new Set([leftOf(rank, n), ...halvingDoublingPartners(rank, n)]);
  if (hasHub) senders.add(HUB_RANK);
  return senders;
}

/**
 * Every rank that `rank` keeps a link to, without duplicates and never itself: left and
 * right neighbours first, then the halving-doubling partners.
 */
export function linkedRanks(rank: number, n: number): number[] {
  if (n < 2) return [];
  const out: number[] = [];
  for (const r of [leftOf(rank, n), rightOf(rank, n), ...halvingDoublingPartners(rank, n)]) {
    if (r !== rank && !out.includes(r)) out.push(r);
  }
  return out;
}
