/** room:join, room:leave and disconnect: membership and generations. */
import { randomBytes } from 'node:crypto';
import { WebringError } from '../../shared/errors';
import { joinRequestSchema, parseOrThrow, type JoinAccepted } from '../../shared/protocol';
import type { MembershipChange, Room } from '../room';
import { scheduleAdmission, scheduleAutoResume } from '../runs';
import { channelOf, type IoSocket, type ServerContext } from '../context';
import { guarded } from './errors';
import { tokenHash } from '../tokens';
import { iceConfigFor } from '../turn';

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
    if (request.room !== socket.data.authorizedRoom) {
      throw new WebringError('ERR_BAD_JOIN_CODE', `this connection's join code is for room ${socket.data.authorizedRoom}, not ${request.room}`, 'room');
    }
    if (request.rejoin) return rejoin(ctx, socket, request.room, request.rejoin);
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
    queueMicrotask(() => broadcastChange(ctx, room, joined.change));
    if (joined.awaitingAdmission) scheduleAdmission(ctx, room);
    return { memberId, index: joined.index, room: request.room, memberToken, ice: iceConfigFor(ctx.ice, memberId) };
  });
}

/**
 * A known member on a new connection keeps its id, index and rank, and the generation
 * stays: a ring that kept training through a server restart is not disturbed.
 */
function rejoin(ctx: ServerContext, socket: IoSocket, name: string, claim: { memberId: string; memberToken: string }): JoinAccepted {
  const room = ctx.rooms.get(name);
  const back = room?.rejoin(claim.memberId, tokenHash(claim.memberToken), socket.id);
  if (!room || !back) throw new WebringError('ERR_NOT_IN_ROOM', `room ${name} does not know member ${claim.memberId}; join again`);
  socket.data.room = name;
  socket.data.memberId = claim.memberId;
  void socket.join(channelOf(name));
  ctx.log.info(`member ${claim.memberId} rejoined ${name} as index ${back.index}`);
  queueMicrotask(() => socket.emit('ring:generation', room.snapshot()));
  // A rejoin is also when a long-lived worker's TURN credentials get renewed.
  return { memberId: claim.memberId, index: back.index, room: name, memberToken: claim.memberToken, ice: iceConfigFor(ctx.ice, claim.memberId) };
}

/** This connection no longer speaks for a member (it left, or was dropped); it may join again. */
export function forgetMembership(socket: IoSocket): void {
  const name = socket.data.room;
  socket.data.room = null;
  socket.data.memberId = null;
  if (name) void socket.leave(channelOf(name));
}

function leave(ctx: ServerContext, socket: IoSocket): boolean {
  const { room: name, memberId } = socket.data;
  if (!name || !memberId) return false;
  forgetMembership(socket);
  const room = ctx.rooms.get(name);
  // A member that already came back on a newer connection is not removed by the old one closing.
  if (!room || room.socketIdOf(memberId) !== socket.id) return false;
  const change = room.leave(memberId);
  broadcastChange(ctx, room, change);
  ctx.rooms.releaseIfIdle(name);
  return true;
}

/** Tells the room about a membership change, persists it, and recovers a broken run. */
export function broadcastChange(ctx: ServerContext, room: Room, change: MembershipChange): void {
  const name = room.name;
  if (change.trainingAborted) {
    ctx.log.warn(`room ${name}: the run could not go on with its ring; back to the latest checkpoint`);
    ctx.io.to(channelOf(name)).emit('train:stop', { reason: 'failure' });
  }
  if (change.generation) {
    const g = change.generation;
    ctx.log.info(`room ${name}: generation ${g.generation} with ${g.members.length} member(s)`);
    ctx.io.to(channelOf(name)).emit('ring:generation', g);
  }
  if (change.generation || change.trainingAborted) void ctx.persistence.save(room);
  if (change.trainingAborted) scheduleAutoResume(ctx, room);
}
