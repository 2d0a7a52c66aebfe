/**
 * The removals a room makes against a member's will: the chief's drop of a straggler, an
 * eviction on a ring member's accusation (of another member, of the hub, or of the accuser
 * itself on its second accusation), and the teacher's removal of the hub.
 */
import { WebringError } from '../../shared/protocol/errors';
import { HUB_RANK, type DropRequest, type EvictRequest, type EvictionCause, type MemberDropped, type Misbehaviour } from '../../shared/protocol';
import type { Member } from './membership';
import { checkDrop } from './drop-check';
import { NO_CHANGE, type MembershipChange, type RoomCore } from './room-core';

/** An accepted ring:evict: who goes, and what each is told. */
export interface Eviction {
  change: MembershipChange;
  evicted: Array<{ id: string; socketId: string | null; notice: Extract<MemberDropped, { reason: 'evicted' }> }>;
  /**
   * A refused accusation: the reporter is muted for the run (a change to keep), and the
   * caller answers with this error once the change is stored.
   */
  refused: WebringError | null;
}

/** The teacher's removal of the hub: the change, and the hub that went with what it is told (null when there was none). */
export interface HubRemoval {
  change: MembershipChange;
  removed: { id: string; socketId: string | null; notice: Extract<MemberDropped, { reason: 'removed' }> } | null;
}

/**
 * The chief drops a straggler; it may join again. Refused from anyone but the chief, and
 * where the members' own reports contradict it (drop-check.ts).
 */
export function dropStraggler(core: RoomCore, reporterId: string, request: DropRequest): MembershipChange {
  const reporter = core.requireMemberOfRun(reporterId, request.run);
  if (core.members.chief !== reporter) throw new WebringError('ERR_NOT_CHIEF', 'only the chief drops stragglers');
  core.requireCurrentGeneration('drop', request.generation);
  const accused = core.members.findInRing(request.member);
  if (!accused) throw new WebringError('ERR_NOT_IN_ROOM', `member ${request.member} is not in the ring`);
  checkDrop(reporter, accused, core.members.ring, core.runState.record.dropped, request, { roomStep: core.runState.step, stepsPerTurn: core.runState.stepsPerTurn, now: core.clock.now() });
  const gone = core.members.removeFromRing(request.member)!;
  const m = gone.member;
  core.runState.recordDropped({
    id: m.id,
    name: m.name,
    index: m.index,
    reason: 'straggler',
    step: request.step,
    computeMs: request.computeMs,
    deadlineMs: request.deadlineMs,
    misbehaviour: null,
    reportedBy: null,
    detail: '',
    at: core.clock.now(),
  });
  core.log('dropped', [m.name], `straggler: ${Math.round(request.computeMs)} ms per step against a ${Math.round(request.deadlineMs)} ms deadline`);
  return core.afterRemoval();
}

/**
 * A ring member names a sender whose message its ring rejected; accusations.ts has the
 * rule. A report of an older generation is refused with ERR_STALE_GENERATION and held
 * against nobody: the ring has already moved on, maybe by evicting the same sender on
 * another's word. Evicted members may join again as fresh members (a new id and token),
 * like stragglers.
 */
export function evict(core: RoomCore, reporterId: string, request: EvictRequest): Eviction {
  const reporter = core.requireMemberOfRun(reporterId, request.run, { hub: true });
  core.requireCurrentGeneration('eviction', request.generation);
  const verdict = core.accusations.judge(reporterId, positionOf(core, reporterId)!, positionOf(core, request.member), core.members.ring.length, core.members.hub !== null);
  if (verdict === 'muted') {
    throw new WebringError('ERR_BAD_ACCUSATION', `${reporter.name} named a member that does not send to it earlier in this run; its accusations are refused`);
  }
  if (verdict === 'not-a-sender') {
    const refused = new WebringError('ERR_BAD_ACCUSATION', `member ${request.member} does not send ring data to ${reporter.name} in generation ${core.currentGeneration}`);
    return { change: NO_CHANGE, evicted: [], refused };
  }
  if (verdict === 'hub-accused') return accuseHub(core, reporter, request);
  const accused = core.members.find(request.member)!;
  const second = verdict === 'evict-reporter';
  const gone = second ? reporter : accused;
  const misbehaviour = second ? 'accusations' : request.reason;
  const detail = second
    ? `its second accusation in this run (of ${accused.name}: ${request.reason}); the server cannot tell which of the two lies`
    : `${accused.name} sent ${request.reason} ring data to ${reporter.name} at step ${request.step}`;
  if (core.members.isHub(gone.id)) return evictHub(core, gone, request.step, misbehaviour, null, detail);
  recordEvicted(core, gone, request.step, misbehaviour, second ? null : reporter.name, detail);
  core.members.removeFromRing(gone.id);
  core.log('evicted', [gone.name], detail);
  const change = core.afterRemoval();
  const notice: Extract<MemberDropped, { reason: 'evicted' }> = { reason: 'evicted', step: request.step, misbehaviour, detail };
  return { change, evicted: [{ id: gone.id, socketId: gone.socketId, notice }], refused: null };
}

export function recordEvicted(core: RoomCore, gone: Member, step: number, misbehaviour: EvictionCause, reportedBy: string | null, detail: string): void {
  core.runState.recordDropped({ id: gone.id, name: gone.name, index: gone.index, reason: 'evicted', step, computeMs: 0, deadlineMs: 0, misbehaviour, reportedBy, detail, at: core.clock.now() });
}

/**
 * A ring member names the hub. The hub is the teacher's, so one student's word does not
 * remove it: the accusation is logged and shown, the reporter is answered, and nobody
 * goes, until a majority of the ring has accused this hub in this run (hub-role.ts).
 */
function accuseHub(core: RoomCore, reporter: Member, request: EvictRequest): Eviction {
  const hub = core.members.hub!;
  const ring = core.members.ring;
  const { accusers, needed, majority } = core.hubRole.accusationsOf(ring, hub);
  const said = `${reporter.name} says the hub sent ${request.reason} ring data at step ${request.step}`;
  core.log('hub-accused', [reporter.name], `${said}; ${accusers.length} of the ${needed} ring members it takes to remove the hub have accused it in this run`);
  if (!majority) return { change: NO_CHANGE, evicted: [], refused: null };
  return evictHub(core, hub, request.step, request.reason, accusers.join(', '), `${accusers.length} of ${ring.length} ring members accused the hub in this run, a majority`);
}

/**
 * The server removes the hub on evidence it checked (a majority's accusations, or the
 * hub's own second accusation): it is told, and hub joins are refused until the run ends,
 * so a broken hub does not come straight back to the same run.
 */
function evictHub(core: RoomCore, hub: Member, step: number, misbehaviour: Misbehaviour | 'accusations', reportedBy: string | null, detail: string): Eviction {
  recordEvicted(core, hub, step, misbehaviour, reportedBy, detail);
  core.hubRole.barByServer(core.clock.now(), detail);
  const change = core.removeHub(hub.id, `evicted: ${detail}`, 'hub-removed');
  const notice: Extract<MemberDropped, { reason: 'evicted' }> = { reason: 'evicted', step, misbehaviour, detail };
  return { change, evicted: [{ id: hub.id, socketId: hub.socketId, notice }], refused: null };
}

/**
 * The teacher removes the hub (DELETE /api/rooms/:room/hub): it goes, if the room has one,
 * and hub joins are refused with ERR_HUB_REMOVED until the teacher allows one again; a run
 * goes on with the ring.
 */
export function removeHubAsTeacher(core: RoomCore): HubRemoval {
  const detail = 'removed by the teacher; the class trains without a hub until the teacher lets one in again';
  core.hubRole.barByTeacher(core.clock.now());
  const hub = core.members.hub;
  if (!hub) {
    core.log('hub-removed', [], detail);
    return { change: NO_CHANGE, removed: null };
  }
  const change = core.removeHub(hub.id, detail, 'hub-removed');
  return { change, removed: { id: hub.id, socketId: hub.socketId, notice: { reason: 'removed', step: core.runState.step, detail } } };
}

/** A ring member's rank, HUB_RANK for the hub, or null for anyone else. */
function positionOf(core: RoomCore, id: string): number | null {
  if (core.members.isHub(id)) return HUB_RANK;
  const rank = core.members.rankOf(id);
  return rank >= 0 ? rank : null;
}

/** An accepted shedding (shedUnreachable): the change, and each member shed with what it is told. */
export interface Shedding {
  change: MembershipChange;
  shed: Array<{ id: string; socketId: string | null; notice: Extract<MemberDropped, { reason: 'unreachable' }> }>;
}

/**
 * Sheds the members of `generation` that the reports say cannot be reached (formation.ts):
 * each is told why and may join again. Nothing changes once the generation is gone.
 */
export function shedUnreachable(core: RoomCore, generation: number): Shedding {
  if (!core.isTraining || generation !== core.currentGeneration) return { change: NO_CHANGE, shed: [] };
  const ring = core.members.ring;
  const names = new Map(ring.map((m) => [m.id, m.name]));
  const reports = core.runState.record.formation?.reports.filter((r) => r.generation === generation) ?? [];
  const ids = core.runState.formation.shed(generation, ring);
  if (ids.length === 0) return { change: NO_CHANGE, shed: [] };
  const step = core.runState.step;
  const shed = ids.map((id) => {
    const by = reports.filter((r) => r.unreachable.includes(id)).map((r) => names.get(r.reporter) ?? r.reporter);
    const detail = `its ring links did not open: ${by.join(' and ')} could not reach it`;
    const m = core.members.removeFromRing(id)!.member;
    core.runState.recordDropped({ id, name: m.name, index: m.index, reason: 'unreachable', step, computeMs: 0, deadlineMs: 0, misbehaviour: null, reportedBy: by.join(', ') || null, detail, at: core.clock.now() });
    core.log('dropped', [m.name], `unreachable: ${detail}`);
    return { id, socketId: m.socketId, notice: { reason: 'unreachable' as const, step, detail } };
  });
  return { change: core.afterRemoval(), shed };
}
