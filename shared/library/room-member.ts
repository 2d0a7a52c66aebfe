/**
 * A member of a room, as a program sees it: MultiWorkerMirroredStrategy's cluster resolver
 * and task id, for a ring whose size changes. `joinRoomWith` connects to the signaling
 * server, joins with the room's join code and returns once admitted; from then on the
 * member trains whatever run the room starts, and tells its listeners where it stands:
 * its rank, the ring's size, whether it is the chief, and every status change.
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

export interface JoinOptions {
  /** The signaling server: its http(s) origin, e.g. what `startServer` returns as `url`. */
  url: string | URL;
  room: string;
  /** The room's join code, as the teacher page or the server's start-up output shows it. */
  code: string;
  /** What the teacher page calls this member (default: `worker`). */
  name?: string;
  /** Hears the worker's log lines (default: none). */
  log?(message: string): void;
  /**
   * The teacher token, for the member that starts its program's runs (fitDataset): it starts
   * the run once enough members have joined, and stops it for early stopping. Others wait.
   */
  teacherToken?: string;
}

const joinOptionsSchema = z.object({
  room: roomNameSchema,
  code: joinCodeSchema,
  name: memberNameSchema.optional(),
  teacherToken: z.string().min(1).optional(),
});

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
}
type Listener<K extends keyof MemberEvents> = (value: MemberEvents[K]) => void;

function membershipOf(s: WorkerStatus): Membership {
  return { rank: s.rank, size: s.worldSize, isChief: s.chief, generation: s.generation };
}
const sameMembership = (a: Membership, b: Membership) => a.rank === b.rank && a.size === b.size && a.isChief === b.isChief && a.generation === b.generation;

export class RoomMember {
  private latest: WorkerStatus | null = null;
  private membershipNow: Membership = { rank: null, size: 0, isChief: false, generation: 0 };
  private readonly listeners: { [K in keyof MemberEvents]: Set<Listener<K>> } = { membership: new Set(), status: new Set(), done: new Set(), error: new Set() };
  private worker: TrainingWorker | null = null;
  private closed = false;
  /** The program fitDataset trains (run-workload.ts): the worker reads it when a run starts. */
  readonly programSlot: ProgramSlot = { current: null };

  constructor(
    private readonly platform: WorkerPlatform,
    /** The room it joined. */
    readonly room: string,
    /** The teacher's controls, for a member given the teacher token; null otherwise. */
    readonly control: RoomControl | null,
  ) {}

  /** The weights of the last run's replica, all in variable order; null before any run. */
  async trainedWeights(): Promise<Float32Array | null> {
    return (await this.worker?.replica?.readWeights()) ?? null;
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

  /** Says goodbye (the ring re-forms at once), closes the connection and the maths. */
  async leave(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.worker?.leave();
    this.worker?.close();
    await this.platform.compute.close();
  }

  /** @internal joinRoomWith's: the worker this member wraps. */
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

  /** @internal the worker's onServerError. */
  serverError(e: ErrorBody): void {
    this.emit('error', e);
  }

  private emit<K extends keyof MemberEvents>(event: K, value: MemberEvents[K]): void {
    for (const listener of this.listeners[event] as Set<Listener<K>>) listener(value);
  }
}

/**
 * Joins `options.room` on `options.url` with `platform`'s maths and WebRTC; resolves once
 * admitted, or rejects with the server's coded refusal (ERR_BAD_JOIN_CODE, ERR_ROOM_FULL…)
 * after closing what it opened. Options are checked first: ERR_BAD_REQUEST names the field.
 */
export async function joinRoomWith(platform: WorkerPlatform, options: JoinOptions): Promise<RoomMember> {
  const checked = joinOptionsSchema.safeParse(options);
  if (!checked.success) {
    const issue = checked.error.issues[0]!;
    await platform.compute.close();
    throw new WebringError('ERR_BAD_REQUEST', `joinRoom: ${issue.path.join('.') || 'options'}: ${issue.message}`);
  }
  let origin: string;
  try {
    origin = new URL(options.url).origin;
  } catch {
    await platform.compute.close();
    throw new WebringError('ERR_BAD_REQUEST', `joinRoom: url: not a URL (${String(options.url)})`);
  }
  const log = options.log ?? (() => undefined);
  // The worker connects when it joins: the handshake carries the room and its join code.
  const socket: Socket<ServerToClientEvents, ClientToServerEvents> = io(origin, { transports: ['websocket'], autoConnect: false, ...RECONNECT_OPTIONS });
  const ice = new IceConfigHolder({ request: () => socket.timeout(ICE_REQUEST_TIMEOUT_MS).emitWithAck('ice:config'), log });
  const control = checked.data.teacherToken ? new RoomControl({ url: origin, teacherToken: checked.data.teacherToken }) : null;
  const member = new RoomMember(platform, checked.data.room, control);
  const worker = new TrainingWorker({
    socket,
    peerFactory: await platform.peerFactory(() => ice.rtcConfiguration()),
    onIceConfig: (raw) => ice.update(raw),
    compute: platform.compute,
    kind: platform.kind,
    device: platform.device,
    serverUrl: origin,
    localCheckpoints: platform.localCheckpoints,
    onStatus: (s) => member.statusChanged(s),
    onServerError: (e) => member.serverError(e),
    program: member.programSlot,
    log,
  });
  member.attach(worker);
  try {
    await worker.join(checked.data.room, checked.data.name ?? 'worker', checked.data.code);
  } catch (err) {
    await member.leave();
    throw err;
  }
  return member;
}
