/** room:join, room:leave and disconnect: membership and generations. */
import { randomBytes } from 'node:crypto';
import { WebringError } from '../../shared/errors';
import { joinRequestSchema, parseOrThrow, type JoinAccepted } from '../../shared/protocol';
import type { MembershipChange } from '../room';
import { channelOf, type IoSocket, type ServerContext } from '../context';
import { guarded } from './errors';
import { tokenHash } from '../tokens';

export function registerRoomHandlers(ctx: ServerContext, socket: IoSocket): void {
  socket.on('room:join', (raw: unknown, ack: unknown) => join(ctx, socket, raw, ack));

  socket.on('room:leave', (ack: unknown) => {
    guarded(ctx, socket, 'room:leave', ack, () => {
      if (!leave(ctx, socket)) throw new WebringError('ERR_NOT_IN_ROOM', 'not in a room');
      return {};
    });
  });

  socket.on('disconnect', (reason) => {
    if (socket.data.memberId) ctx.log.info(`member ${socket.data.memberId} disconnected (${reason})`);
    leave(ctx, socket);
  });
}

function join(ctx: ServerContext, socket: IoSocket, raw: unknown, ack: unknown): void {
  guarded<JoinAccepted>(ctx, socket, 'room:join', ack, () => {
    if (socket.data.memberId) throw new WebringError('ERR_ALREADY_JOINED', 'this connection already joined a room');
    const request = parseOrThrow(joinRequestSchema, raw);
    const room = ctx.rooms.getOrCreate(request.room);
    const memberId = randomBytes(8).toString('hex');
    const memberToken = randomBytes(24).toString('hex');
    let joined;
    try {
      joined = room.join({
        id: memberId,
        socketId: socket.id,
        tokenHash: tokenHash(memberToken),
        name: request.name,
        backend: request.backend,
        kind: request.kind,
        adapter: request.adapter ?? null,
      });
    } catch (err) {
      ctx.rooms.releaseIfIdle(request.room);
      throw err;
    }
    socket.data.room = request.room;
    socket.data.memberId = memberId;
    void socket.join(channelOf(request.room));
    ctx.log.info(`member ${memberId} "${request.name}" joined ${request.room} as index ${joined.index} (${request.kind}, ${request.backend})`);
    // The ack goes first, so the worker knows its id before it reads the generation.
    queueMicrotask(() => broadcastChange(ctx, request.room, joined.change));
    return { memberId, index: joined.index, room: request.room, memberToken };
  });
}

function leave(ctx: ServerContext, socket: IoSocket): boolean {
  const { room: name, memberId } = socket.data;
  if (!name || !memberId) return false;
  socket.data.room = null;
  socket.data.memberId = null;
  void socket.leave(channelOf(name));
  const room = ctx.rooms.get(name);
  if (!room) return false;
  const change = room.leave(memberId);
  broadcastChange(ctx, name, change);
  ctx.rooms.releaseIfIdle(name);
  return true;
}

export function broadcastChange(ctx: ServerContext, name: string, change: MembershipChange): void {
  if (change.trainingAborted) {
    ctx.log.warn(`room ${name}: a member left during training; run aborted`);
    ctx.io.to(channelOf(name)).emit('train:stop', { reason: 'membership' });
  }
  if (change.generation) {
    const g = change.generation;
    ctx.log.info(`room ${name}: generation ${g.generation} with ${g.members.length} member(s)`);
    ctx.io.to(channelOf(name)).emit('ring:generation', g);
  }
}
