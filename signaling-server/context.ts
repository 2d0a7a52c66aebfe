/** What every handler receives: the typed io server, the rooms, and a logger. */
import type { Server, Socket } from 'socket.io';
import type { ClientToServerEvents, ServerToClientEvents } from '../shared/protocol';
import type { Room } from './room';
import type { Logger } from './logger';
import type { CheckpointStore } from './checkpoint-store';
import type { RoomPersistence } from './room-persistence';
import type { RateLimits } from './rate-limits';
import type { IceOptions } from './turn';

export interface SocketData {
  /** The room whose join code this connection presented (socket-auth.ts); it may join only that room. */
  authorizedRoom: string;
  room: string | null;
  memberId: string | null;
  /** Error codes already logged for this socket, so a misbehaving client logs once per kind. */
  loggedErrors: Set<string>;
  /** Until when this socket has been told it is rate-limited (told once per window, ms epoch). */
  limitedUntil: number;
}

export type IoServer = Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;
export type IoSocket = Socket<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;

export class RoomRegistry {
  private readonly rooms = new Map<string, Room>();

  constructor(private readonly create: (name: string) => Room) {}

  get(name: string): Room | undefined {
    return this.rooms.get(name);
  }

  add(room: Room): void {
    this.rooms.set(room.name, room);
  }

  getOrCreate(name: string): Room {
    let room = this.rooms.get(name);
    if (!room) {
      room = this.create(name);
      this.rooms.set(name, room);
    }
    return room;
  }

  /** Forgets a room once nobody is in it and it holds no run worth showing. */
  releaseIfIdle(name: string): void {
    const room = this.rooms.get(name);
    if (room && room.isEmpty && !room.isTraining) this.rooms.delete(name);
  }

  get count(): number {
    return this.rooms.size;
  }
}

export interface ServerContext {
  io: IoServer;
  rooms: RoomRegistry;
  checkpoints: CheckpointStore;
  persistence: RoomPersistence;
  limits: RateLimits;
  /** TURN and the ICE policy every worker gets (signaling-server/turn.ts). */
  ice: IceOptions;
  log: Logger;
}

/** socket.io room that carries a classroom's broadcasts. */
export const channelOf = (room: string): string => `room:${room}`;
