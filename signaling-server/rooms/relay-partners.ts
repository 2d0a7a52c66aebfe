/**
 * Who may relay to whom (handlers/link-relay.ts): the relay carries a link only between two
 * members that the ring's own topology links, and only on a link whose other end said it
 * relays it. Without these, any member could push bytes at any classmate through the
 * server, with no link between them, until the classmate's connection choked and the
 * server dropped it as dead (issue 57).
 *
 * - **Partners.** The links a generation needs follow from its ring alone (ring neighbours,
 *   halving-doubling partners, the hub to everyone: shared/protocol/topology.ts), so the
 *   server works them out as every member does. The previous generation's partners count
 *   too: when a member joins, the class finishes its turn on the old generation's links.
 * - **Agreement.** A link goes over the relay once each side has sent the relay signal
 *   (shared/network/relay-link.ts RELAY_SIGNAL) on it; the server records each statement as
 *   it passes, before the other side hears it. A member may relay to `to` on `linkId` only
 *   once `to` said it relays that link back: the sender's own consent is its message.
 *
 * The statements live with the membership (and travel through Redis to every node), a few
 * per member, and go with the member.
 */
import { WebringError } from '../../shared/protocol/errors';
import { linkedRanks } from '../../shared/protocol';
import type { Membership, RelayStatement, RingShape } from './membership';

export type { RelayStatement };

/** The newest statements per ordered pair: a link redialled during a dial race has two ids for a moment. */
const STATEMENTS_PER_PAIR = 2;
/**
 * Statements a room keeps at most: each member has a link to its two ring neighbours, about
 * log2(N) halving-doubling partners and the hub, each said once per side. Far above a class
 * of 30's (~30 · 8), and a bound on what a member's signals can make the room store.
 */
export const MAX_RELAY_STATEMENTS = 2_048;

/** Whether `a` and `b` link in the ring `shape` (either of them may be its hub). */
function linkedIn(shape: RingShape | null | undefined, a: string, b: string): boolean {
  if (!shape) return false;
  if (shape.hub !== null && (shape.hub === a || shape.hub === b)) return shape.ring.includes(a === shape.hub ? b : a);
  const ra = shape.ring.indexOf(a);
  const rb = shape.ring.indexOf(b);
  return ra >= 0 && rb >= 0 && linkedRanks(ra, shape.ring.length).includes(rb);
}

/** Whether `a` and `b` are partners in the current generation or the one before it. */
export function arePartners(members: Membership, a: string, b: string): boolean {
  return linkedIn(members.ringShape(), a, b) || linkedIn(members.previousRingShape, a, b);
}

/** Records that `from` relays its link `linkId` to `to`; keeps the newest few per pair and drops statements of members gone. */
export function recordRelayStatement(members: Membership, statement: RelayStatement): void {
  const present = new Set(members.all.map((m) => m.id));
  const kept = members.relayStatements.filter((s) => present.has(s.from) && present.has(s.to));
  const samePair = kept.filter((s) => s.from === statement.from && s.to === statement.to && s.linkId !== statement.linkId);
  const dropped = new Set(samePair.slice(0, Math.max(0, samePair.length - (STATEMENTS_PER_PAIR - 1))));
  const next = kept.filter((s) => !dropped.has(s) && !(s.from === statement.from && s.to === statement.to && s.linkId === statement.linkId));
  next.push({ ...statement });
  members.relayStatements = next.slice(-MAX_RELAY_STATEMENTS);
}

/**
 * Throws ERR_RELAY_REFUSED unless `from` may relay to `to` on `linkId` now: the two are
 * partners, and `to` said it relays that link to `from`.
 */
export function checkRelayAllowed(members: Membership, from: string, to: string, linkId: string): void {
  if (!arePartners(members, from, to)) {
    const why = `member ${to} is not a ring partner of ${from} in this generation or the one before`;
    throw new WebringError('ERR_RELAY_REFUSED', `${why}; the relay carries only the ring's own links`, 'to');
  }
  if (!members.relayStatements.some((s) => s.from === to && s.to === from && s.linkId === linkId)) {
    const why = `member ${to} has not said it relays link ${linkId}`;
    throw new WebringError('ERR_RELAY_REFUSED', `${why}; a link goes over the relay once both ends send the relay signal`, 'linkId');
  }
}
