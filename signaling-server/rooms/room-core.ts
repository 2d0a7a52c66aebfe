/**
 * One classroom's state (membership, run, accusations, the hub's role, the event log and
 * what its students collect for) and the steps every change to it shares: a new generation,
 * an event logged, the run's end when nobody is left to train, and the checks that a report
 * comes from a ring member of the current run and generation. Room (room.ts) is the facade
 * over it; removals.ts and run-reports.ts change it.
 */
import { WebringError } from '../../shared/protocol/errors';
import type { CollectSetting, Generation, MemberInfo, MetricPoint, RoomEvent, RoomEventKind } from '../../shared/protocol';
import type { Clock } from '../../shared/util/clock';
import { Membership, type Member, type MembershipState } from './membership';
import { RunState, type RunRecord } from './run-state';
import { Accusations, type AccusationRecord } from './accusations';
import { HubRole } from './hub-role';
import { medianStep } from './formation';
import { countClients } from './seats';

/** The ring's event log keeps this many of the newest events. */
const MAX_ROOM_EVENTS = 200;

/** A room's parts as plain data, but the loss history: what the codec stores and builds a Room from. */
export interface RoomParts {
  membership: MembershipState;
  run: RunRecord;
  accusations: AccusationRecord;
  events: RoomEvent[];
  /** The classes its students collect for; absent in records from before collecting. */
  collect?: CollectSetting | null;
}

export interface MembershipChange {
  /** The new generation to broadcast, when membership changed. */
  generation: Generation | null;
  /** Set when a running training can no longer continue (every ring member left; never for the hub). */
  trainingAborted: boolean;
}

export const NO_CHANGE: MembershipChange = { generation: null, trainingAborted: false };

export class RoomCore {
  readonly members: Membership;
  readonly runState: RunState;
  readonly accusations: Accusations;
  readonly hubRole: HubRole;
  readonly events: RoomEvent[];
  /** The classes the students collect examples for, or null. */
  collectSetting: CollectSetting | null;

  /** An empty room, or (from the codec) one rebuilt from its parts, which it then owns. */
  constructor(
    readonly name: string,
    readonly clock: Clock,
    parts?: RoomParts,
    history: MetricPoint[] = [],
  ) {
    this.members = new Membership(name, parts?.membership);
    this.runState = new RunState(name, parts?.run, history);
    this.accusations = new Accusations(parts?.accusations);
    this.hubRole = new HubRole(this.members, this.runState, this.accusations);
    this.events = parts?.events ?? [];
    this.collectSetting = parts?.collect ?? null;
  }

  get currentGeneration(): number {
    return this.members.generation;
  }

  /** A run is in progress (training, or paused by the teacher). */
  get isTraining(): boolean {
    return this.runState.isTraining;
  }

  /** The generation as it is now: the ring in rank order, and the hub. */
  snapshot(): Generation {
    const ring = this.members.ring;
    return { room: this.name, generation: this.currentGeneration, members: ring.map((m, rank) => this.members.info(m, rank)), hub: this.hubInfo(), clients: this.clients, maskSeed: this.members.maskSeed };
  }

  /** How many distinct clients the ring's members are (seats.ts: countClients; the teacher may vouch for shared addresses). */
  get clients(): number {
    return countClients(this.members.ring, this.members.sharedAddressVouched);
  }

  hubInfo(): MemberInfo | null {
    const hub = this.members.hub;
    return hub ? this.members.info(hub, null) : null;
  }

  /** A ring member is gone: a new generation, and the run's end when nobody is left in the ring. */
  afterRemoval(): MembershipChange {
    if (this.isTraining && this.members.ring.length === 0) {
      // Nobody holds the live state any more: the run ends, and whoever waits resumes from
      // the latest checkpoint (BackupAndRestore).
      this.runState.end('idle', { code: 'ERR_MEMBER_LEFT', message: 'every ring member left; the run goes on from the latest checkpoint' });
      this.members.admitWaiting(null);
      return { generation: this.bumpGeneration(), trainingAborted: true };
    }
    return { generation: this.bumpGeneration(), trainingAborted: false };
  }

  /** The hub is gone (it left, did not come back, or was removed): a new generation without it; a run goes on. */
  removeHub(id: string, detail: string, kind: 'hub-left' | 'hub-removed' = 'hub-left'): MembershipChange {
    const hub = this.members.removeHub(id)!;
    this.log(kind, [hub.name], detail);
    return { generation: this.bumpGeneration(), trainingAborted: false };
  }

  /**
   * The reporting member, when the report belongs to the running run or to the run that just
   * ended (replicas send their last reports a moment after the first one finished the run).
   * Ring members only, but the hub where `hub` allows it (an accusation): it trains nothing,
   * so its reports of progress, evaluations, drops or the end are refused like a waiting
   * member's, with ERR_NOT_IN_ROOM, and change nothing.
   */
  requireMemberOfRun(memberId: string, run: number, allow: { hub: boolean } = { hub: false }): Member {
    const hub = allow.hub && this.members.isHub(memberId) ? this.members.hub : null;
    const m = hub ?? this.members.findInRing(memberId);
    if (!m) {
      const why = this.members.isHub(memberId) ? 'the hub trains nothing; ' : '';
      throw new WebringError('ERR_NOT_IN_ROOM', `${why}only ring members report training progress`);
    }
    if (run !== this.runState.run) throw new WebringError('ERR_STALE_RUN', `report for run ${run}; the room's run is ${this.runState.run}`);
    return m;
  }

  requireCurrentGeneration(what: string, generation: number): void {
    if (generation !== this.currentGeneration) {
      throw new WebringError('ERR_STALE_GENERATION', `${what} for generation ${generation}; the room is at ${this.currentGeneration}`);
    }
  }

  /** Appends to the room's event log, which keeps the newest MAX_ROOM_EVENTS. */
  log(kind: RoomEventKind, members: string[], detail: string): void {
    this.events.push({ at: this.clock.now(), kind, generation: this.currentGeneration, step: this.runState.step, members, detail });
    if (this.events.length > MAX_ROOM_EVENTS) this.events.splice(0, this.events.length - MAX_ROOM_EVENTS);
  }

  /** The step most ring members that train (joiners still without the state aside) reported themselves (formation.ts: medianStep). */
  get trainedStep(): number {
    return medianStep(this.members.ring.filter((m) => !m.awaitingState));
  }

  bumpGeneration(): Generation {
    this.members.bumpGeneration(this.clock.now());
    return this.snapshot();
  }
}
