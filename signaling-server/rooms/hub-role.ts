/**
 * The hub's role (issue 25): the hub is the teacher's, so no student removes it or takes its
 * place. One ring member's accusation of the hub removes nobody (accusations.ts records it);
 * only when the distinct ring members who accused the current hub in this run are a majority
 * of the ring does the server remove it. A removal bars hub joins (ERR_HUB_REMOVED): the
 * teacher's until the teacher allows a hub again, the server's until the run it was made in
 * ends. The bar stays in the membership's plain data (MembershipState.hubBar) for the codec;
 * this class decides over it, and the room applies the decisions (removing the hub, logging,
 * a new generation).
 */
import { WebringError } from '../../shared/protocol/errors';
import type { HubBar } from '../../shared/protocol';
import { hubAccusersNeeded, type Accusations } from './accusations';
import type { Member } from './membership';

/** Where the bar is kept, expired or not: Membership.hubBar. */
export interface HubBarSlot {
  hubBar: HubBar | null;
}

/** The run a server bar is judged against: RunState. */
export interface CurrentRun {
  readonly isTraining: boolean;
  readonly run: number;
}

/** What the ring has said of the current hub in this run. */
export interface HubAccusations {
  /** The names of the ring members who accused it, each once (none while there is no hub). */
  accusers: string[];
  /** How many it takes to remove it: a majority of the ring (hubAccusersNeeded). */
  needed: number;
  /** They are that many: the server removes the hub. */
  majority: boolean;
}

export class HubRole {
  constructor(
    private readonly slot: HubBarSlot,
    private readonly run: CurrentRun,
    private readonly accusations: Accusations,
  ) {}

  /**
   * Why hub joins are refused now, or null. The teacher's removal holds until the teacher
   * allows a hub again (allow); the server's, until the run it was made in ends.
   */
  barred(): HubBar | null {
    const bar = this.slot.hubBar;
    if (!bar) return null;
    if (bar.by === 'teacher') return bar;
    return this.run.isTraining && bar.run === this.run.run ? bar : null;
  }

  /** Throws ERR_HUB_REMOVED while hub joins to room `room` are barred. */
  refuseWhileBarred(room: string): void {
    const bar = this.barred();
    if (!bar) return;
    const until = bar.by === 'teacher' ? 'until the teacher lets a hub in again' : 'until this run ends';
    throw new WebringError('ERR_HUB_REMOVED', `the ${bar.by} removed room ${room}'s hub (${bar.detail}); no hub joins ${until}`);
  }

  /** A hub joined: a server bar that ended with its run, and what was said of an earlier hub, are history. */
  hubJoined(): void {
    this.slot.hubBar = null;
    this.accusations.newHub();
  }

  /** The server removed the hub at `at` on evidence it checked: hub joins are refused until this run ends. */
  barByServer(at: number, detail: string): void {
    this.slot.hubBar = { by: 'server', run: this.run.run, at, detail };
  }

  /** The teacher removed the hub at `at`: hub joins are refused until the teacher allows one again. */
  barByTeacher(at: number): void {
    this.slot.hubBar = { by: 'teacher', run: this.run.run, at, detail: 'removed by the teacher' };
  }

  /** The teacher lets a hub join again; whether hub joins were refused. */
  allow(): boolean {
    const barred = this.barred() !== null;
    this.slot.hubBar = null;
    return barred;
  }

  /** Who of `ring` accused `hub` (the room's hub, or null) in this run, and whether they are a majority. */
  accusationsOf(ring: readonly Member[], hub: Member | null): HubAccusations {
    const ids = hub ? this.accusations.hubAccusersAmong(ring.map((m) => m.id)) : [];
    const needed = hubAccusersNeeded(ring.length);
    return { accusers: ids.map((id) => ring.find((m) => m.id === id)!.name), needed, majority: ids.length >= needed };
  }
}
