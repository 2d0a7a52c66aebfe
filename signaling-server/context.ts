/** What every handler receives: the typed io server, the rooms, and a logger. */
import type { Server, Socket } from 'socket.io';
import type { ClientToServerEvents, ServerToClientEvents } from '../shared/protocol';
import type { RoomStore } from './rooms/room-store';
import type { Logger } from './logger';
import type { CheckpointStore } from './checkpoint-store';
import type { Timers } from './rooms/timers';
import type { Clock } from '../shared/util/clock';
import type { RateLimits } from './edge/rate-limits';
import type { IceOptions } from './turn';

export interface SocketData {
  /** The room whose join code this connection presented (socket-auth.ts); it may join only that room. */
  authorizedRoom: string;
  /** The client's address: the peer's, or X-Forwarded-For's from a trusted load balancer (client-address.ts). */
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

export interface ServerContext {
  io: IoServer;
  rooms: RoomStore;
  checkpoints: CheckpointStore;
  /** The rooms' clock (wall time: room times are dates, compared across nodes). */
  clock: Clock;
  /** This server's pending timers (admissions, automatic resumes), cleared on close. */
  timers: Timers;
  /** This signaling node's id when several share rooms over Redis; null on a single server. */
  node: string | null;
  /** Set while the server closes: with other nodes about, its connections' members are not leaving, they move. */
  draining: boolean;
  limits: RateLimits;
  /** TURN and the ICE policy every worker gets (turn.ts). */
  ice: IceOptions;
  /** Derives each room's hub key (edge/join-codes.ts), which a hub's join must carry. */
  joinSecret: Buffer;
  log: Logger;
}

/** socket.io room that carries a classroom's broadcasts. */
export const channelOf = (room: string): string => `room:${room}`;
