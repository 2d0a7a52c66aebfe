/**
 * Where this worker sits in a membership generation: its rank, its ring neighbours and
 * every member it links to (halving-doubling partners, the hub). Worked out from the
 * generation alone, so the ring network can ask it of a coming generation too.
 */
import { HUB_RANK, leftOf, linkedRanks, rightOf, type Generation, type MemberInfo } from '../protocol';

export interface Neighbours {
  /** This worker's rank, or HUB_RANK when it is the generation's hub. */
  rank: number;
  self: MemberInfo;
  /** The ring neighbours; null for the hub. */
  left: MemberInfo | null;
  right: MemberInfo | null;
  /**
   * Every member this worker links to: the ring neighbours, then the halving-doubling
   * partners, then the hub; never itself. The hub links to every ring member.
   */
  peers: MemberInfo[];
  /** The generation's hub, when this worker is a ring member of a generation that has one. */
  hub: MemberInfo | null;
}

/** This worker's place in `g`, or null when it is not in it. */
export function neighboursIn(g: Generation, selfId: string): Neighbours | null {
  const hub = g.hub ?? null;
  if (hub?.id === selfId) return { rank: HUB_RANK, self: hub, left: null, right: null, peers: [...g.members], hub: null };
  const n = g.members.length;
  const rank = g.members.findIndex((m) => m.id === selfId);
  if (rank < 0) return null;
  const left = g.members[leftOf(rank, n)]!;
  const right = g.members[rightOf(rank, n)]!;
  const peers = linkedRanks(rank, n).map((r) => g.members[r]!);
  if (hub) peers.push(hub);
  return { rank, self: g.members[rank]!, left, right, peers, hub };
}
