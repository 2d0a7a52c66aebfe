/**
 * The trust rule behind ring:evict. A ring member names a sender whose message its ring
 * rejected. Only the two of them saw the message, so the server cannot tell which one tells
 * the truth; it checks what the topology lets it check and bounds the damage a liar can do:
 *  1. the accused must be one of the reporter's senders in the current generation
 *     (sendersOf: its left neighbour or a halving-doubling partner; with a hub member,
 *     also the hub, whose own senders are every ring rank). Naming anyone else is refused,
 *     and the reporter's later accusations in this run are refused too: honest code never
 *     names a member that does not send to it;
 *  2. a reporter's first accepted accusation in a run evicts the accused; a second one evicts
 *     the reporter instead. A lying member thus removes at most one honest member per run,
 *     and then itself; an honest member unlucky enough to face two broken senders in one run
 *     leaves, and the second one's next receiver names it. The same holds for the hub as a
 *     reporter: a lying hub removes at most one student per run, and then itself;
 *  3. the hub as the accused is the teacher's (only the teacher's server hands out its key),
 *     so one student's word does not remove it: the accusation is recorded, costs the
 *     reporter none of its allowance, and evicts nobody. Only when the distinct ring members
 *     who accused the current hub in this run are a majority of the ring
 *     (hubAccusersNeeded) does the server remove it: a hub that sends bad data to most of
 *     the class is broken, and a minority of liars cannot make it look so. Otherwise only
 *     the teacher removes it (DELETE /api/rooms/:room/hub).
 * Whether the report is of the current run and generation is the room's check, made first.
 */
import { HUB_RANK, sendersOf } from '../../shared/protocol';

/** The accusations of the current run, as plain data. */
export interface AccusationRecord {
  /** Accepted accusations per reporter id. */
  accusations: Record<string, number>;
  /** Reporters who named a member that does not send to them; their accusations are refused. */
  mutedReporters: string[];
  /** Ring members who accused the current hub in this run, each once. */
  hubAccusers: string[];
}

/** A run nobody has accused anyone in yet. */
export const noAccusations = (): AccusationRecord => ({ accusations: {}, mutedReporters: [], hubAccusers: [] });

/** The distinct ring members whose accusations remove the hub: a strict majority of a ring of `ringSize`. */
export const hubAccusersNeeded = (ringSize: number): number => Math.floor(ringSize / 2) + 1;

/**
 * What an accusation leads to: refused because the reporter is muted, refused because the
 * accused is not its sender (and the reporter is muted from now on), or an eviction of the
 * accused or of the reporter.
 */
export type Verdict = 'muted' | 'not-a-sender' | 'evict-accused' | 'evict-reporter' | 'hub-accused';

export class Accusations {
  constructor(private readonly a: AccusationRecord = noAccusations()) {}

  /** The record the codec stores; owned here, not a copy. */
  get record(): Readonly<AccusationRecord> {
    return this.a;
  }

  /** A new run: every reporter starts with a clean slate. */
  reset(): void {
    this.a.accusations = {};
    this.a.mutedReporters = [];
    this.a.hubAccusers = [];
  }

  /** Another hub: what was said of the last one is not held against it. */
  newHub(): void {
    this.a.hubAccusers = [];
  }

  /** Who of `ring` (member ids) has accused the current hub in this run. */
  hubAccusersAmong(ring: readonly string[]): string[] {
    return this.a.hubAccusers.filter((id) => ring.includes(id));
  }

  /**
   * Judges an accusation by the reporter at `reporter` (a ring rank, or the hub) of the
   * member at `accused` (null when it is neither in the ring nor the hub) in a generation of
   * `ringSize` ranks, with or without a hub, and records it.
   */
  judge(reporterId: string, reporter: number, accused: number | null, ringSize: number, hub: boolean): Verdict {
    if (this.a.mutedReporters.includes(reporterId)) return 'muted';
    if (accused === null || !sendersOf(reporter, ringSize, hub).has(accused)) {
      this.a.mutedReporters.push(reporterId);
      return 'not-a-sender';
    }
    if (accused === HUB_RANK) {
      if (!this.a.hubAccusers.includes(reporterId)) this.a.hubAccusers.push(reporterId);
      return 'hub-accused';
    }
    const count = (this.a.accusations[reporterId] ?? 0) + 1;
    this.a.accusations[reporterId] = count;
    return count > 1 ? 'evict-reporter' : 'evict-accused';
  }
}
