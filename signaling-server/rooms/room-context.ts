/**
 * What the room actions that tell sockets (runs.ts, membership-broadcast.ts, hub-access.ts,
 * reconnect-sweep.ts, cluster.ts) and the HTTP API (edge/http-api.ts, data-api.ts) receive:
 * the typed io server, the rooms, their checkpoints, time and a logger. Handlers receive more
 * (handlers/context.ts). It is defined here, in the lowest layer, so that rooms/ imports
 * nothing above it; server.ts builds the one object that satisfies every layer's context.
 */
import type { Server, Socket } from 'socket.io';
import type { ClientToServerEvents, MemberDropped, ServerToClientEvents } from '../../shared/protocol';
import type { Clock } from '../../shared/util/clock';
import type { RoomStore } from './room-store';
import type { CheckpointStore } from './checkpoint-store';
import type { Timers } from './timers';

/** Where every layer logs; the console's (createLogger, logger.ts) is wired in at the top. */
export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface SocketData {
  /** The room whose join code this connection presented (edge/socket-auth.ts); it may join only that room. */
  authorizedRoom: string;
  /** The client's address: the peer's, or X-Forwarded-For's from a trusted load balancer (edge/client-address.ts). */
  address: string;
  room: string | null;
  memberId: string | null;
  /** Error codes already logged for this socket, so a misbehaving client logs once per kind. */
  loggedErrors: Set<string>;
  /** Until when this socket has been told it is rate-limited (told once per window, ms epoch). */
  limitedUntil: number;
  /** The socket's events run one after another, in arrival order (handlers await the room store). */
  queue: Promise<void>;
}

export type IoServer = Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;
export type IoSocket = Socket<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;

export interface RoomContext {
  io: IoServer;
  rooms: RoomStore;
  checkpoints: CheckpointStore;
  /** The rooms' clock (wall time: room times are dates, compared across nodes). */
  clock: Clock;
  /** This server's pending timers (admissions, automatic resumes), cleared on close. */
  timers: Timers;
  log: Logger;
  /** How long an admission may form before it applies without the ring's vote (formation.ts: ADMISSION_DEADLINE_MS); tests shorten it. */
  admissionDeadlineMs?: number;
  /** How long a member of a secure run has to publish its key for a new generation (key-deadline.ts: KEY_DEADLINE_MS); tests shorten it. */
  keyDeadlineMs?: number;
  /** The least a class may go without progress before its run counts as stalled (stall-watch.ts: STALL_FLOOR_MS); tests shorten it. */
  stallFloorMs?: number;
}

/** socket.io room that carries a classroom's broadcasts. */
export const channelOf = (room: string): string => `room:${room}`;

/** Tells a member taken out of the ring why, and takes its connection off the room's broadcasts. */
export function tellRemoved(ctx: RoomContext, room: string, socketId: string | null, notice: MemberDropped): void {
  if (!socketId) return;
  ctx.io.in(socketId).socketsLeave(channelOf(room));
  ctx.io.to(socketId).emit('member:dropped', notice);
}
