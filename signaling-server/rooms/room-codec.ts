/**
 * A room written down, and read back. One record (RoomRecord) is what Redis keeps for every
 * signaling node to rebuild the room from; room.json on a single server keeps a projection
 * of it (RoomFile): what must outlive a restart, without connections or per-step telemetry.
 * Both formats are read by servers already deployed, so their field names stay as they are;
 * `hub` came later, so a record or file without it reads as a room without a hub, and
 * room.json names it only while the room has one (a server from before reads the rest).
 * Decoding builds the Room through its constructor from the parts' plain state.
 */
import type { CollectSetting, MetricPoint, RoomEvent } from '../../shared/protocol';
import type { Clock } from '../../shared/util/clock';
import { Room } from './room';
import type { Member } from './membership';
import { idleRun, type RunRecord } from './run-state';
import { noAccusations } from './accusations';

/**
 * The whole room but its loss history, as plain data. The history is kept apart, appended
 * point by point, so a progress report does not rewrite the lesson's curve.
 */
export interface RoomRecord extends RunRecord {
  name: string;
  nextIndex: number;
  generation: number;
  active: Member[];
  waiting: Member[];
  /** The hub member; absent in records written before the hub existed. */
  hub?: Member | null;
  events: RoomEvent[];
  accusations: Record<string, number>;
  mutedReporters: string[];
  /** The classes its students collect for; absent in records from before collecting. */
  collect?: CollectSetting | null;
}

/** A member as room.json keeps it: no connection, no per-step telemetry. */
type FileMember = Omit<Member, 'socketId' | 'computeMs' | 'batchShare' | 'linkMBps' | 'learningRate' | 'speedVsMedian' | 'collective' | 'awaitingState' | 'node' | 'disconnectedAt' | 'probe' | 'ownExamples'>;

/** room.json: membership with indexes and token digests, generation, run and config. */
export interface RoomFile {
  format: 1;
  name: string;
  nextIndex: number;
  generation: number;
  run: number;
  state: RunRecord['state'];
  config: RunRecord['config'];
  step: number;
  epoch: number;
  active: FileMember[];
  waiting: FileMember[];
  /** The hub member, only while the room has one. */
  hub?: FileMember;
  /** The classes its students collect for, only while it collects. */
  collect?: CollectSetting;
}

/** The room as its record; shares the room's objects (clone it before changing either). */
export function encodeRoom(room: Room): RoomRecord {
  const { membership, run, accusations, events, collect = null } = room.parts;
  return { name: room.name, ...membership, ...run, events, ...accusations, collect };
}

/** The room a record describes, with `history` as its loss points; takes ownership of both. */
export function decodeRoom(record: RoomRecord, clock: Clock, history: MetricPoint[] = []): Room {
  const { name, nextIndex, generation, active, waiting, hub = null, events, accusations, mutedReporters, collect = null } = record;
  const { state, config, run, step, epoch, loss, trainAccuracy, accuracy, evaluations, lastError, reportedTotalSteps, dropped, consistency, joins = [] } = record;
  return new Room(
    name,
    clock,
    {
      membership: { nextIndex, generation, active, waiting, hub },
      run: { state, config, run, step, epoch, loss, trainAccuracy, accuracy, evaluations, lastError, reportedTotalSteps, dropped, consistency, joins },
      accusations: { accusations, mutedReporters },
      events,
      collect,
    },
    history,
  );
}

/** What room.json keeps of a record. */
export function toRoomFile(record: RoomRecord): RoomFile {
  const strip = ({ socketId: _s, node: _n, computeMs: _c, batchShare: _b, linkMBps: _l, learningRate: _r, speedVsMedian: _v, collective: _k, awaitingState: _a, disconnectedAt: _d, probe: _p, ownExamples: _o, ...m }: Member): FileMember => m;
  const { name, nextIndex, generation, run, state, config, step, epoch } = record;
  const file: RoomFile = { format: 1, name, nextIndex, generation, run, state, config, step, epoch, active: record.active.map(strip), waiting: record.waiting.map(strip) };
  if (record.hub) file.hub = strip(record.hub);
  if (record.collect) file.collect = record.collect;
  return file;
}

/**
 * The record a room.json describes, read back at `now` after a restart: every member is
 * disconnected from `now` and has the reconnect grace to come back; what room.json does not
 * keep starts empty.
 */
export function fromRoomFile(file: RoomFile, now: number): RoomRecord {
  const revive = (m: FileMember): Member => ({ ...m, socketId: null, node: null, computeMs: 0, batchShare: 0, linkMBps: 0, learningRate: 0, speedVsMedian: 0, collective: null, awaitingState: false, disconnectedAt: now });
  const { name, nextIndex, generation, run, state, config, step, epoch } = file;
  return {
    ...idleRun(),
    ...noAccusations(),
    name,
    nextIndex,
    generation,
    active: file.active.map(revive),
    waiting: file.waiting.map(revive),
    hub: file.hub ? revive(file.hub) : null,
    collect: file.collect ?? null,
    events: [],
    run,
    state,
    config,
    step,
    epoch,
  };
}
