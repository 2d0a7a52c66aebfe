/**
 * A member of a room, as a program sees it: MultiWorkerMirroredStrategy's cluster resolver
 * and task id, for a ring whose size changes. `joinRoomWith` connects to the signaling
 * server, joins with the room's join code and returns once admitted; from then on the
 * member trains whatever run the room starts, and tells its listeners where it stands:
 * its rank, the ring's size, whether it is the chief, and every status change.
 *
 * `openMemberWith` is the same in two halves, as the classroom's student page uses it: the
 * maths and the connection first, then `join` when the student presses Join, and again
 * after a wrong join code or a drop, without loading the maths twice.
 */
import { io, type Socket } from 'socket.io-client';
import { z } from 'zod';
import { TrainingWorker } from '../training/worker';
import { RECONNECT_OPTIONS } from '../training/signaling-session';
import type { WorkerStatus } from '../training/worker-status';
import { IceConfigHolder, ICE_REQUEST_TIMEOUT_MS } from '../network/ice-config';
import { WebringError, type ErrorBody } from '../protocol/errors';
import { memberNameSchema, roomNameSchema, type ClientToServerEvents, type ServerToClientEvents } from '../protocol';
import { joinCodeSchema } from '../protocol/join-code';
import type { WorkerPlatform } from './platform';
import { RoomControl } from './room-control';
import type { ProgramSlot } from '../training/run-workload';
import type { FaultInjector } from '../training/faults';
import type { OwnExamples } from '../data/own-examples';
import type { OwnRun } from '../data/run-data';
import type { BackendInfo } from '../compute/compute';
import type { LocalCheckpointStore } from '../checkpoints/checkpoint-writer';
import type { CollectSetting, MemberInfo } from '../protocol';

/** What a member is, before it joins any room: where the server is, and what it brings. */
export interface MemberSetup {
  /** The signaling server: its http(s) origin, e.g. what `startServer` returns as `url`. */
  url: string | URL;
  /** Hears the worker's log lines (default: none). */
  log?(message: string): void;
  /**
   * The teacher token, for the member that starts its program's runs (fitDataset): it starts
   * the run once enough members have joined, and stops it for early stopping. Others wait.
   */
  teacherToken?: string;
  /**
   * For the classroom's lessons on the class's own examples (docs/own-data.md): this
   * member's examples of a run's task and classes, or null where it holds none. They never
   * leave the device; the server learns their counts per class (reportOwnExamples).
   */
  ownExamples?: (run: OwnRun) => OwnExamples | null;
  /**
   * False: this member opens no WebRTC link, and every link of it goes through the
   * signaling server (shared/network/relay-link.ts), over the connection it already has.
   * For a network that lets no peer connection through, or a Node machine without
   * @roamhq/wrtc. By default each link tries WebRTC first and falls back to the server.
   */
  webrtc?: boolean;
  /** @internal Faults a test plays on purpose (shared/training/faults.ts); production passes none. */
  faults?: FaultInjector;
}

/** Where to join: a room, its join code, and the name the teacher page shows. */
export interface RoomEntry {
  room: string;
  /** The room's join code, as the teacher page or the server's start-up output shows it. */
  code: string;
  /** What the teacher page calls this member (default: `worker`). */
  name?: string;
}

export interface JoinOptions extends MemberSetup, RoomEntry {}

/** What a join was told: the room, this member's id and its index (its place in the room, not its rank in the ring). */
export interface Admission {
  room: string;
  memberId: string;
  index: number;
}

const entrySchema = z.object({ room: roomNameSchema, code: joinCodeSchema, name: memberNameSchema.optional() });
const setupSchema = z.object({ teacherToken: z.string().min(1).optional() });

/** Where a member stands in the ring: MultiWorkerMirroredStrategy's task id and cluster size. */
export interface Membership {
  /** Its place in the current ring, 0 for the chief; null while it waits to be admitted. */
  rank: number | null;
  /** Members in the current ring. */
  size: number;
  /** The chief (rank 0) alone writes checkpoints. */
  isChief: boolean;
  /** The ring's generation: it rises whenever a member joins or leaves. */
  generation: number;
}

export interface MemberEvents {
  /** The rank, the size, the chief or the generation changed. */
  membership: Membership;
  /** Anything the member shows changed: the step, the loss, the state. */
  status: WorkerStatus;
  /** A run this member trained ended ('done'). */
  done: WorkerStatus;
  /** The member failed (state 'error'), or the server refused one of its events. */
  error: ErrorBody;
  /** The room's hub in each ring generation this member hears, or null: whether a hub sums the gradients (it sees each member's, unmasked unless the run is secure). */
  hub: MemberInfo | null;
  /** What the room collects examples for (the join reply, then each change), or null: the classroom's own-data lessons. */
  collect: CollectSetting | null;
}
type Listener<K extends keyof MemberEvents> = (value: MemberEvents[K]) => void;

function membershipOf(s: WorkerStatus): Membership {
  return { rank: s.rank, size: s.worldSize, isChief: s.chief, generation: s.generation };
}
const sameMembership = (a: Membership, b: Membership) => a.rank === b.rank && a.size === b.size && a.isChief === b.isChief && a.generation === b.generation;

export class RoomMember {
  private latest: WorkerStatus | null = null;
  private membershipNow: Membership = { rank: null, size: 0, isChief: false, generation: 0 };
  private readonly listeners: { [K in keyof MemberEvents]: Set<Listener<K>> } = { membership: new Set(), status: new Set(), done: new Set(), error: new Set(), hub: new Set(), collect: new Set() };
  private worker: TrainingWorker | null = null;
  private closed = false;
  private joinedRoom: string | null = null;
  /** The program fitDataset trains (run-workload.ts): the worker reads it when a run starts. */
  readonly programSlot: ProgramSlot = { current: null };
  /** @internal fitDataset's `backup`: where the chief copies its checkpoints instead of the platform's own store. */
  backup: LocalCheckpointStore | null = null;

  constructor(
    private readonly platform: WorkerPlatform,
    /** The teacher's controls, for a member given the teacher token; null otherwise. */
    readonly control: RoomControl | null,
    /** @internal where the member's log lines go (MemberSetup.log): fitDataset's too. */
    readonly log: (message: string) => void = () => undefined,
  ) {}

  /**
   * Joins `entry.room` (again, after a refusal, a leaveRoom or a drop); resolves once
   * admitted, or rejects with the server's coded refusal (ERR_BAD_JOIN_CODE, ERR_ROOM_FULL…).
   * The entry is checked first: ERR_BAD_REQUEST names the field.
   */
  async join(entry: RoomEntry): Promise<Admission> {
    const checked = entrySchema.safeParse(entry);
    if (!checked.success) throw badOption('join', checked.error);
    if (this.closed || !this.worker) throw new WebringError('ERR_BAD_STATE', 'join: this member has left; open a new one');
    const { room, memberId, index } = await this.worker.join(checked.data.room, checked.data.name ?? 'worker', checked.data.code);
    this.joinedRoom = room;
    return { room, memberId, index };
  }

  /**
   * Gets this device ready to join (the admission probe: the backend up, the default model's
   * kernels compiled, its speed measured) without a word to the server. Join does it anyway;
   * calling this first, while the student types a name, makes Join one handshake.
   */
  async prepare(): Promise<void> {
    await this.worker?.prepare();
  }

  /** The room it joined last; null before the first join. */
  get room(): string | null {
    return this.joinedRoom;
  }

  /** Where this member's maths runs: the tfjs backend, the adapter, and why WebGPU is not in use when it is not. */
  get compute(): BackendInfo {
    return this.platform.compute.info;
  }

  /** The weights of the last run's replica, all in variable order; null before any run. */
  async trainedWeights(): Promise<Float32Array | null> {
    return (await this.worker?.replica?.readWeights()) ?? null;
  }

  /** The live replica's outputs for `n` examples (`features` holds n rows, each the model's inputs in order); null before any run. */
  predict(features: Float32Array, n = 1): Promise<Float32Array | null> {
    return this.worker?.predict(features, n) ?? Promise.resolve(null);
  }

  /** The token the server gave this member: it reads the room's metrics (GET /api/rooms/:room/metrics); null before joining. */
  get memberToken(): string | null {
    return this.worker?.memberToken ?? null;
  }

  /** Tells the server how many own examples this member holds per class (never the examples): the teacher page counts the class's. */
  reportOwnExamples(counts: Record<string, number>): void {
    this.worker?.reportOwnExamples(counts);
  }

  get rank(): number | null {
    return this.membershipNow.rank;
  }
  get size(): number {
    return this.membershipNow.size;
  }
  get isChief(): boolean {
    return this.membershipNow.isChief;
  }
  get membership(): Membership {
    return { ...this.membershipNow };
  }
  /** The member's whole status (worker-status.ts), or null before the first. */
  get status(): WorkerStatus | null {
    return this.latest;
  }

  /** Listens to `event`; the returned function stops listening. */
  on<K extends keyof MemberEvents>(event: K, listener: Listener<K>): () => void {
    const set = this.listeners[event] as Set<Listener<K>>;
    set.add(listener);
    return () => set.delete(listener);
  }

  /** Resolves with the status when a run this member trains ends; rejects with the coded error if the member fails or leaves first. */
  whenDone(): Promise<WorkerStatus> {
    return new Promise((resolve, reject) => {
      const offs = [
        this.on('done', (s) => {
          offs.forEach((off) => off());
          resolve(s);
        }),
        this.on('error', (e) => {
          // A refused event (a rate limit) is the server's word, not the member's end.
          if (this.latest?.state !== 'error') return;
          offs.forEach((off) => off());
          reject(new WebringError(e.code, e.message));
        }),
      ];
    });
  }

  /** Says goodbye to the room (the ring re-forms at once) and stays open: `join` takes it back, as a student closing the tab and opening it again. */
  leaveRoom(): void {
    this.worker?.leave();
  }

  /** Says goodbye (the ring re-forms at once), closes the connection and the maths. */
  async leave(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.worker?.leave();
    this.worker?.close();
    await this.platform.compute.close();
  }

  /** @internal openMemberWith's: the worker this member wraps. */
  attach(worker: TrainingWorker): void {
    this.worker = worker;
  }

  /** @internal the worker's onStatus. */
  statusChanged(s: WorkerStatus): void {
    const previous = this.latest;
    this.latest = s;
    const membership = membershipOf(s);
    if (!sameMembership(membership, this.membershipNow)) {
      this.membershipNow = membership;
      this.emit('membership', { ...membership });
    }
    this.emit('status', s);
    if (s.state === 'done' && previous?.state !== 'done') this.emit('done', s);
    if (s.state === 'error' && s.error && previous?.state !== 'error') this.emit('error', s.error);
  }

  /** @internal what the worker and its connection hear, for this member's listeners. */
  emit<K extends keyof MemberEvents>(event: K, value: MemberEvents[K]): void {
    for (const listener of this.listeners[event] as Set<Listener<K>>) listener(value);
  }
}

function badOption(call: string, error: z.ZodError): WebringError {
  const issue = error.issues[0]!;
  return new WebringError('ERR_BAD_REQUEST', `${call}: ${issue.path.join('.') || 'options'}: ${issue.message}`, issue.path.join('.') || undefined);
}

/**
 * A member with `platform`'s maths and WebRTC, connected to nothing yet: `member.join`
 * joins a room. Options are checked first (ERR_BAD_REQUEST names the field), and a refusal
 * closes what was opened.
 */
export async function openMemberWith(platform: WorkerPlatform, setup: MemberSetup): Promise<RoomMember> {
  const checked = setupSchema.safeParse(setup);
  let origin: string | null = null;
  try {
    origin = new URL(setup.url).origin;
  } catch {
    origin = null;
  }
  if (!checked.success || origin === null) {
    await platform.compute.close();
    if (!checked.success) throw badOption('joinRoom', checked.error);
    throw new WebringError('ERR_BAD_REQUEST', `joinRoom: url: not a URL (${String(setup.url)})`, 'url');
  }
  const log = setup.log ?? (() => undefined);
  // The worker connects when it joins: the handshake carries the room and its join code.
  const socket: Socket<ServerToClientEvents, ClientToServerEvents> = io(origin, { transports: ['websocket'], autoConnect: false, ...RECONNECT_OPTIONS });
  const ice = new IceConfigHolder({ request: () => socket.timeout(ICE_REQUEST_TIMEOUT_MS).emitWithAck('ice:config'), log });
  const control = checked.data.teacherToken ? new RoomControl({ url: origin, teacherToken: checked.data.teacherToken }) : null;
  const member = new RoomMember(platform, control, log);
  socket.on('ring:generation', (g) => member.emit('hub', g.hub ?? null));
  member.attach(
    new TrainingWorker({
      socket,
      peerFactory: setup.webrtc === false ? null : await platform.peerFactory(() => ice.rtcConfiguration()),
      onIceConfig: (raw) => ice.update(raw),
      compute: platform.compute,
      kind: platform.kind,
      device: platform.device,
      serverUrl: origin,
      localCheckpoints: () => member.backup ?? platform.localCheckpoints,
      onStatus: (s) => member.statusChanged(s),
      onServerError: (e) => member.emit('error', e),
      onCollect: (c) => member.emit('collect', c),
      program: member.programSlot,
      ...(setup.ownExamples ? { ownExamples: setup.ownExamples } : {}),
      ...(setup.faults ? { faults: setup.faults } : {}),
      log,
    }),
  );
  return member;
}

/**
 * Joins `options.room` on `options.url` with `platform`'s maths and WebRTC; resolves once
 * admitted, or rejects with the server's coded refusal (ERR_BAD_JOIN_CODE, ERR_ROOM_FULL…)
 * after closing what it opened. Options are checked first: ERR_BAD_REQUEST names the field.
 */
export async function joinRoomWith(platform: WorkerPlatform, options: JoinOptions): Promise<RoomMember> {
  const entry = entrySchema.safeParse(options);
  if (!entry.success) {
    await platform.compute.close();
    throw badOption('joinRoom', entry.error);
  }
  const member = await openMemberWith(platform, options);
  try {
    await member.join(options);
  } catch (err) {
    await member.leave();
    throw err;
  }
  return member;
}
