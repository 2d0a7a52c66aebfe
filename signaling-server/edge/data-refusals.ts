/**
 * Who the data service turned away, so that a refusal is never silent: the teacher's page
 * names each reader refused in the room's current run and why, until it is served again.
 * With an honest class there are none (the budgets fit every schedule: data-budget.ts); a
 * name here means a student's tab read far more than its share, or a budget that missed
 * a schedule. Counted in this process, as the budgets are.
 */
import type { ErrorBody } from '../../shared/protocol/errors';
import { MAX_ROOM_MEMBERS, type DataRefusal, type MemberInfo } from '../../shared/protocol';

/** Readers a room's list holds at most: a class's seats; the oldest go first. */
const MAX_REFUSED_READERS = MAX_ROOM_MEMBERS;

interface Refused {
  at: number;
  error: ErrorBody;
  retryAfterS: number;
}

export class DataRefusals {
  private readonly byRoom = new Map<string, { run: number; readers: Map<string, Refused> }>();

  /** Budget reader `reader` ('member ID' or 'address IP') of `room` was refused in run `run`. */
  refused(room: string, run: number, reader: string, refusal: Refused): void {
    let entry = this.byRoom.get(room);
    if (!entry || entry.run !== run) this.byRoom.set(room, (entry = { run, readers: new Map() }));
    // Newest last: a reader refused again moves to the end.
    entry.readers.delete(reader);
    entry.readers.set(reader, refusal);
    if (entry.readers.size > MAX_REFUSED_READERS) entry.readers.delete(entry.readers.keys().next().value!);
  }

  /** `reader` was served: it is no longer waiting. */
  served(room: string, reader: string): void {
    this.byRoom.get(room)?.readers.delete(reader);
  }

  /** The readers of `room` refused in run `run` and not served since, named from `members` where they are members. */
  of(room: string, run: number, members: readonly MemberInfo[]): DataRefusal[] {
    const entry = this.byRoom.get(room);
    if (!entry || entry.run !== run) return [];
    return [...entry.readers].map(([reader, r]) => {
      const memberId = reader.startsWith(MEMBER_READER) ? reader.slice(MEMBER_READER.length) : null;
      const name = memberId === null ? `a join-code reader at ${reader.slice(ADDRESS_READER.length)}` : (members.find((m) => m.id === memberId)?.name ?? `member ${memberId}, gone since`);
      return { reader: name, memberId, at: r.at, error: r.error, retryAfterS: r.retryAfterS };
    });
  }
}

/** How http-api.ts's reader check names a member and a join-code reader (res.locals.roomReader). */
export const MEMBER_READER = 'member ';
export const ADDRESS_READER = 'address ';
