/**
 * Who talks to whom in a ring of n ranks: the ring neighbours and the halving-doubling
 * partners. The server (which accusations it believes), the network (which links it
 * dials), the engine (which senders it accepts) and the worker (which neighbours it
 * shows) all ask here, so they can never disagree.
 */
import { halvingDoublingPartners } from './halving-doubling';

export { halvingDoublingPartners };

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
 * The ranks that send collective data to `rank`: its left neighbour and its
 * halving-doubling partners, and HUB_RANK when the generation has a hub. Empty in a ring
 * of one. The hub's own senders are every rank (hubSendersOf).
 */
export function sendersOf(rank: number, n: number, hasHub = false): Set<number> {
  if (n < 2) return new Set();
  const senders = new Set([leftOf(rank, n), ...halvingDoublingPartners(rank, n)]);
  if (hasHub) senders.add(HUB_RANK);
  return senders;
}

/** The ranks that send to the hub: all of them. */
export function hubSendersOf(n: number): Set<number> {
  return new Set(Array.from({ length: n }, (_, r) => r));
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

/** Where the room's hub member stands in a generation: outside the ring's ranks. */
export const HUB = 'hub' as const;
/** A ring rank, or the hub. */
export type Position = number | typeof HUB;

/**
 * The senders of `at` in a generation of `n` ring ranks, with or without a hub member. The
 * hub collective has every rank send to the hub and the hub send the sum back, so with a
 * hub its senders are every rank, and every rank's senders are its ring senders
 * (sendersOf) and the hub. Without a hub, the hub sends nothing and nobody sends to it.
 */
export function sendersWithHub(at: Position, n: number, hub: boolean): Set<Position> {
  if (at === HUB) return hub ? new Set(Array.from({ length: n }, (_, r) => r)) : new Set();
  const senders: Set<Position> = sendersOf(at, n);
  if (hub) senders.add(HUB);
  return senders;
}
