/**
 * What each member of each room had the server relay (handlers/link-relay.ts), for the
 * teacher's page: who reaches its partners through the server now, and how much it sent.
 * In memory, on this server: each node of a cluster counts its own connections.
 */
import type { RelayStatus } from '../../shared/protocol';
import type { ErrorCode } from '../../shared/protocol/errors';

/** A member counts as relayed on the teacher's page while it relayed within this long. */
export const RELAY_SHOWN_MS = 30_000;

/** What each member of each room had relayed, and to whom, on this server (each node of a cluster counts its own). */
export class RelayLedger {
  private readonly byRoom = new Map<string, Map<string, { bytes: number; at: number; peers: Map<string, number> }>>();
  /** Per room, per member: the relay's refusals of it (not a partner, not agreed, flooding a partner), for the teacher. */
  private readonly refusedByRoom = new Map<string, Map<string, { code: ErrorCode; count: number; at: number }>>();

  /** The relay refused a message of `from` with `code` at `at`. */
  refused(room: string, from: string, code: ErrorCode, at: number): void {
    let members = this.refusedByRoom.get(room);
    if (!members) this.refusedByRoom.set(room, (members = new Map()));
    const entry = members.get(from);
    members.set(from, { code, count: (entry?.count ?? 0) + 1, at });
  }

  carried(room: string, from: string, to: string, bytes: number, at: number): void {
    let members = this.byRoom.get(room);
    if (!members) this.byRoom.set(room, (members = new Map()));
    let entry = members.get(from);
    if (!entry) members.set(from, (entry = { bytes: 0, at, peers: new Map() }));
    entry.bytes += bytes;
    entry.at = at;
    entry.peers.set(to, at);
  }

  /** The room's members that relayed within RELAY_SHOWN_MS of `now`, each with the partners it relayed to in that time; older entries are forgotten. */
  of(room: string, now: number): RelayStatus {
    const refused = this.refusedOf(room, now);
    const members = this.byRoom.get(room);
    if (!members) return { members: [], refused };
    const shown: RelayStatus['members'] = [];
    for (const [id, entry] of members) {
      for (const [peer, at] of entry.peers) if (now - at > RELAY_SHOWN_MS) entry.peers.delete(peer);
      if (entry.peers.size === 0) members.delete(id);
      else shown.push({ id, bytesSent: entry.bytes, peers: [...entry.peers.keys()].sort() });
    }
    if (members.size === 0) this.byRoom.delete(room);
    return { members: shown, refused };
  }

  /** The room's members the relay refused within RELAY_SHOWN_MS of `now`; older refusals are forgotten. */
  private refusedOf(room: string, now: number): RelayStatus['refused'] {
    const members = this.refusedByRoom.get(room);
    if (!members) return [];
    const shown: RelayStatus['refused'] = [];
    for (const [id, entry] of members) {
      if (now - entry.at > RELAY_SHOWN_MS) members.delete(id);
      else shown.push({ id, code: entry.code, count: entry.count, at: entry.at });
    }
    if (members.size === 0) this.refusedByRoom.delete(room);
    return shown;
  }
}
