/**
 * A room written down, and read back. One record (RoomRecord) is what Redis keeps for every
 * signaling node to rebuild the room from; room.json on a single server keeps a projection
 * of it (RoomFile): what must outlive a restart, without connections or per-step telemetry.
 * Both formats are read by servers already deployed, so their field names stay as they are;
 * `hub` came later, so a record or file without it reads as a room without a hub, and
 * room.json names it only while the room has one (a server from before reads the rest).
 * Decoding builds the Room through its constructor from the parts' plain state.
 */
import type { CollectSetting, HubBar, MetricPoint, RoomEvent } from '../../shared/protocol';
import type { Clock } from '../../shared/util/clock';
import { Room } from './room';
import type { Member, RelayStatement, RingShape } from './membership';
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
  /** When the generation was made (ms); absent in records written before re-forms were rate-limited. */
  generationAt?: number;
  /** The generation's mask-graph seed; absent in records from before (0). */
  maskSeed?: number;
  /** The last departed members' token hashes (membership.ts); absent in records from before. */
  leftTokens?: string[];
  /** Who may relay to whom (relay-partners.ts): the current and the previous generation's rings, the relay signals sent; absent in records from before. */
  generationRing?: RingShape;
  previousRing?: RingShape | null;
  relayed?: RelayStatement[];
  /** The teacher's cap on seats per client address; absent in older records (the defaults). */
  seatsPerAddress?: number | null;
  /** The teacher vouched that members sharing an address are distinct devices (secure-count.ts); absent in older records (not vouched). */
  sharedAddressVouched?: boolean;
  active: Member[];
  waiting: Member[];
  /** The hub member; absent in records written before the hub existed. */
  hub?: Member | null;
  /** Why hub joins are refused for now; absent in records written before hubs needed a key. */
  hubBar?: HubBar | null;
  /** Ring members who accused the hub in this run; absent in records from before. */
  hubAccusers?: string[];
  events: RoomEvent[];
  accusations: Record<string, number>;
  mutedReporters: string[];
  /** The classes its students collect for; absent in records from before collecting. */
  collect?: CollectSetting | null;
}

/** A member as room.json keeps it: no connection, no per-step telemetry, no client address (a rejoin brings it back). */
type FileMember = Omit<Member, 'socketId' | 'computeMs' | 'batchShare' | 'linkMBps' | 'learningRate' | 'speedVsMedian' | 'collective' | 'bytesSent' | 'awaitingState' | 'node' | 'disconnectedAt' | 'probe' | 'ownExamples' | 'address'>;

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
  /** Why hub joins are refused, only while they are: a teacher's removal outlives a restart. */
  hubBar?: HubBar;
  /** The classes its students collect for, only while it collects. */
  collect?: CollectSetting;
  /** The teacher's cap on seats per client address, only while one is set. */
  seatsPerAddress?: number;
  /** The teacher vouched that members sharing an address are distinct devices, only while vouched. */
  sharedAddressVouched?: true;
}

/** The room as its record; shares the room's objects (clone it before changing either). */
export function encodeRoom(room: Room): RoomRecord {
  const { membership, run, accusations, events, collect = null } = room.parts;
  return { name: room.name, ...membership, ...run, events, ...accusations, collect };
}

/** The room a record describes, with `history` as its loss points; takes ownership of both. */
export function decodeRoom(record: RoomRecord, clock: Clock, history: MetricPoint[] = []): Room {
  const { name, nextIndex, generation, generationAt, maskSeed, leftTokens, generationRing, previousRing, relayed, seatsPerAddress = null, sharedAddressVouched = false, active, waiting, hub = null, hubBar = null, events, accusations, mutedReporters, hubAccusers = [], collect = null } = record;
  const { state, config, run, step, epoch, loss, trainAccuracy, accuracy, testLoss = null, evaluations, lastError, reportedTotalSteps, dropped, consistency, joins = [], guard, formation, round, roundExamples, progressAt, longestTurnMs } = record;
  return new Room(
    name,
    clock,
    {
      membership: { nextIndex, generation, generationAt, maskSeed, leftTokens, generationRing, previousRing, relayed, seatsPerAddress, sharedAddressVouched, active, waiting, hub, hubBar },
      run: { state, config, run, step, epoch, loss, trainAccuracy, accuracy, testLoss, evaluations, lastError, reportedTotalSteps, dropped, consistency, joins, guard, formation, round, roundExamples, longestTurnMs, progressAt: progressAt ?? (state === 'training' ? clock.now() : undefined) },
      accusations: { accusations, mutedReporters, hubAccusers },
      events,
      collect,
    },
    history,
  );
}

/** What room.json keeps of a record. */
export function toRoomFile(record: RoomRecord): RoomFile {
  const strip = ({ socketId: _s, node: _n, computeMs: _c, batchShare: _b, linkMBps: _l, learningRate: _r, speedVsMedian: _v, collective: _k, bytesSent: _y, awaitingState: _a, disconnectedAt: _d, probe: _p, ownExamples: _o, address: _ip, publishedKey: _k1, reportedGeneration: _g, ...m }: Member): FileMember => m;
  const { name, nextIndex, generation, run, state, config, step, epoch } = record;
  const file: RoomFile = { format: 1, name, nextIndex, generation, run, state, config, step, epoch, active: record.active.map(strip), waiting: record.waiting.map(strip) };
  if (record.hub) file.hub = strip(record.hub);
  if (record.hubBar) file.hubBar = record.hubBar;
  if (record.collect) file.collect = record.collect;
  if (record.seatsPerAddress != null) file.seatsPerAddress = record.seatsPerAddress;
  if (record.sharedAddressVouched === true) file.sharedAddressVouched = true;
  return file;
}

/**
 * The record a room.json describes, read back at `now` after a restart: every member is
 * disconnected from `now` and has the reconnect grace to come back; what room.json does not
 * keep starts empty.
 */
export function fromRoomFile(file: RoomFile, now: number): RoomRecord {
  const revive = (m: FileMember): Member => ({ ...m, socketId: null, node: null, computeMs: 0, batchShare: 0, linkMBps: 0, learningRate: 0, speedVsMedian: 0, collective: null, bytesSent: 0, awaitingState: false, disconnectedAt: now });
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
    hubBar: file.hubBar ?? null,
    collect: file.collect ?? null,
    seatsPerAddress: file.seatsPerAddress ?? null,
    sharedAddressVouched: file.sharedAddressVouched === true,
    events: [],
    run,
    state,
    config,
    step,
    epoch,
  };
}
