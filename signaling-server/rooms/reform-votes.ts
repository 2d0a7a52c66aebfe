/**
 * The evidence a bare ring:reform (no `unreachable`) needs before the room makes a new
 * generation (issue 57). Every generation that is not a pure admission aborts the turn in
 * flight on every member (shared/training/generation-tracker.ts) and re-dials its links, and
 * one member's request alone made one once the current generation was 2 s old: generations
 * 4 to 8 in 10.5 s in the review, which saw local-steps rounds and secure sums never finish.
 *
 * Who asks honestly: a worker whose collective failed with nobody gone (a timeout, rejected
 * or mismatched data), once it has waited REFORM_AFTER_MS in the broken generation, and
 * again every REFORM_AFTER_MS until a new generation comes or its run gives up after
 * RECOVERY_TIMEOUT_MS (60 s). A collective that fails stalls every member of it, so the
 * members of a broken ring ask within a few seconds of each other. Hence the rule:
 *  1. a request is a vote for its generation; the generation is re-formed once a second
 *     member's failure backs it: a bare request or an unreachable report (formation.ts) of
 *     the same generation from a member that is another client (seats.ts: clientOf, so a
 *     student's several tabs on one device are one client) or a ring neighbour of the asker
 *     (a broken link is seen from both ends; this is what lets a class behind one school
 *     NAT address, where every member is one client, re-form). A ring of one re-forms on
 *     its own word: nobody else could back it, and it disrupts nobody but itself;
 *  2. each member's votes are capped per run (MAX_REFORMS_PER_MEMBER_PER_RUN); past the cap
 *     its requests are ignored (ERR_TOO_MANY_REFORMS), and after
 *     REFORM_REQUESTS_PAST_CAP_BEFORE_EVICTION more it is evicted ('reforms'), which the
 *     teacher sees in the room's events and dropped members.
 * What it does not stop: two colluding seats that are different clients (or ring
 * neighbours) still re-form, at most once per REFORM_MIN_GENERATION_AGE_MS and
 * MAX_REFORMS_PER_MEMBER_PER_RUN times per pair and run before both are evicted; an evicted
 * seat may join again with a fresh member id and a fresh allowance (like any evicted member).
 *
 * The votes and counts live in the run's formation record (formation.ts), so every
 * signaling node sharing the room over Redis sees the same ones, and a new run starts with
 * none. room.json does not keep them: after a restart of a single server the counts start
 * again, which costs an attacker's victims at most one more allowance.
 */
import { WebringError } from '../../shared/protocol/errors';
import { REFORM_AFTER_MS, type EvictionCause, type MemberDropped } from '../../shared/protocol';
import type { Member } from './membership';
import { checkNamedNeighbours, type ReformVoteRecord, type UnreachableReport } from './formation';
import { clientOf } from './seats';
import { recordEvicted } from './removals';
import { NO_CHANGE, type MembershipChange, type RoomCore } from './room-core';

/**
 * A generation is re-formed on a member's request only once it is this old. Honest workers
 * ask only after trying the generation and then waiting REFORM_AFTER_MS (3 s) in it
 * (shared/protocol/liveness.ts; the worker's side is generation-tracker.ts), which the
 * server sees later still; the second of slack is for signaling nodes whose clocks differ.
 * Without it, a member re-formed the ring 548 times in 1.8 s, a write and a log line each.
 */
export const REFORM_MIN_GENERATION_AGE_MS = REFORM_AFTER_MS - 1_000;

/**
 * Bare re-form requests that count, per member and run. An honest worker asks once per
 * REFORM_AFTER_MS (3 s) while its ring is broken and gives up after RECOVERY_TIMEOUT_MS
 * (60 s): at most 20 requests for one failure nobody else backs, one or two for a failure
 * the ring shares. Twice the first leaves room for a long lone wait and a lesson's worth of
 * ordinary recoveries; an attacker's seats get at most this many re-forms per run.
 */
export const MAX_REFORMS_PER_MEMBER_PER_RUN = 40;

/**
 * Requests past the cap, all ignored, after which the member is evicted. An honest worker
 * at its cap stops asking as soon as the others re-form its ring (or its own run gives up):
 * five more requests are 15 s of its honest asking, which it gets to spend without harm.
 */
export const REFORM_REQUESTS_PAST_CAP_BEFORE_EVICTION = 5;

const TOO_MANY_REFORMS: EvictionCause = 'reforms';

/** What a bare request led to. */
export interface ReformOutcome {
  change: MembershipChange;
  /** Members whose requests made the re-form, by name (empty unless it re-formed). */
  voters: string[];
  /** The asker, evicted for asking past its cap, with what it is told; null otherwise. */
  evicted: { id: string; socketId: string | null; notice: Extract<MemberDropped, { reason: 'evicted' }> } | null;
  /** An ignored request's answer, sent once the change is stored; null otherwise. */
  refused: WebringError | null;
}

/** What a ring:reform led to, and whether an unreachable report is due for shedding. */
export type Reform = ReformOutcome & { shedDue: boolean };
const NO_REFORM: Reform = { change: NO_CHANGE, voters: [], evicted: null, refused: null, shedDue: false };

/**
 * A ring member asks for `generation` to be re-formed. Requests for a generation already
 * replaced change nothing (every member of a broken ring asks). With `unreachable` (the ring
 * neighbours its links to stayed shut) the request is a report instead: recorded for the
 * generation (formation.ts), and `shedDue` is true for its first one, so that the caller
 * sheds once the other ends had time to report. A bare request is refused with ERR_BAD_STATE
 * outside a run (no collective to fail) and with ERR_RATE_LIMITED, changing nothing, while the
 * generation is younger than REFORM_MIN_GENERATION_AGE_MS; otherwise it is a vote (voteReform).
 */
export function requestReform(core: RoomCore, memberId: string, generation: number, reason: string, unreachable: readonly string[]): Reform {
  const m = core.members.findInRing(memberId);
  if (!m) throw new WebringError('ERR_NOT_IN_ROOM', `${core.members.isHub(memberId) ? 'the hub is no ring member; ' : ''}only ring members ask for a re-form`);
  if (generation !== core.currentGeneration) return NO_REFORM;
  const formation = core.runState.formation;
  if (unreachable.length > 0) {
    checkNamedNeighbours(core.members.ring, memberId, unreachable);
    const report: UnreachableReport = { generation, reporter: memberId, unreachable: [...unreachable] };
    return { ...NO_REFORM, shedDue: core.isTraining && formation.report(report) };
  }
  if (!core.isTraining) throw new WebringError('ERR_BAD_STATE', `room ${core.name} is not training: there is no ring to re-form`);
  const ageMs = core.members.generationAgeMs(core.clock.now());
  if (ageMs < REFORM_MIN_GENERATION_AGE_MS) {
    throw new WebringError('ERR_RATE_LIMITED', `generation ${generation} is ${Math.round(ageMs)} ms old; a ring is re-formed only once its generation is ${REFORM_MIN_GENERATION_AGE_MS} ms old`);
  }
  const reporters = core.runState.record.formation?.reports.filter((r) => r.generation === generation).map((r) => r.reporter) ?? [];
  return { ...voteReform(core, m, reason, reporters), shedDue: false };
}

/**
 * Member `asker`'s bare request to re-form the current generation, found current and old
 * enough: a vote, a re-form, an ignored request or an eviction, by the rule above.
 * `unreachableReporters`: who reported unreachable neighbours in this generation.
 */
function voteReform(core: RoomCore, asker: Member, reason: string, unreachableReporters: readonly string[]): ReformOutcome {
  const generation = core.currentGeneration;
  const ring = core.members.ring;
  const votes = core.runState.formation.reformVotes;
  forgetAllBut(votes, new Set(ring.map((m) => m.id)));
  const counted = votes.counted[asker.id] ?? 0;
  if (counted >= MAX_REFORMS_PER_MEMBER_PER_RUN) {
    const ignored = (votes.ignored[asker.id] ?? 0) + 1;
    votes.ignored[asker.id] = ignored;
    if (ignored >= REFORM_REQUESTS_PAST_CAP_BEFORE_EVICTION) return evictAsker(core, asker, counted + ignored);
    const refused = new WebringError('ERR_TOO_MANY_REFORMS', `${asker.name} asked for ${counted} re-forms in this run, the most one member may; this request is ignored, and ${REFORM_REQUESTS_PAST_CAP_BEFORE_EVICTION - ignored} more evict it`);
    return { change: NO_CHANGE, voters: [], evicted: null, refused };
  }
  votes.counted[asker.id] = counted + 1;
  if (votes.generation !== generation) {
    votes.generation = generation;
    votes.voters = [];
  }
  if (!votes.voters.includes(asker.id)) votes.voters.push(asker.id);
  const backers = [...new Set([...votes.voters, ...unreachableReporters])].filter((id) => id !== asker.id);
  const backer = backers.map((id) => ring.find((m) => m.id === id)).find((m) => m !== undefined && backs(ring, asker, m));
  if (ring.length > 1 && !backer) return { change: NO_CHANGE, voters: [], evicted: null, refused: null };
  const voters = backer ? [asker.name, backer.name] : [asker.name];
  votes.voters = [];
  const change = { generation: core.bumpGeneration(), trainingAborted: false };
  core.log('reformed', voters, reason);
  return { change, voters, evicted: null, refused: null };
}

/** Whether `other`'s failure backs `asker`'s: another client, or its ring neighbour. */
function backs(ring: readonly Member[], asker: Member, other: Member): boolean {
  if (clientOf(asker) !== clientOf(other)) return true;
  const n = ring.length;
  const a = ring.findIndex((m) => m.id === asker.id);
  const b = ring.findIndex((m) => m.id === other.id);
  return a >= 0 && b >= 0 && ((a + 1) % n === b || (b + 1) % n === a);
}

/** Keeps the counts of `ids` only: the record stays as small as the ring. */
function forgetAllBut(votes: ReformVoteRecord, ids: ReadonlySet<string>): void {
  for (const map of [votes.counted, votes.ignored]) {
    for (const id of Object.keys(map)) if (!ids.has(id)) delete map[id];
  }
  votes.voters = votes.voters.filter((id) => ids.has(id));
}

/** The asker went on past its cap: it leaves the ring, and the class re-forms without it. */
function evictAsker(core: RoomCore, asker: Member, requests: number): ReformOutcome {
  const step = core.runState.step;
  const detail = `asked for ${requests} re-forms in this run; ${MAX_REFORMS_PER_MEMBER_PER_RUN} is the most one member may, and each one stops the class's turn`;
  recordEvicted(core, asker, step, TOO_MANY_REFORMS, null, detail);
  core.members.removeFromRing(asker.id);
  core.log('evicted', [asker.name], detail);
  const notice: Extract<MemberDropped, { reason: 'evicted' }> = { reason: 'evicted', step, misbehaviour: TOO_MANY_REFORMS, detail };
  return { change: core.afterRemoval(), voters: [], evicted: { id: asker.id, socketId: asker.socketId, notice }, refused: null };
}
