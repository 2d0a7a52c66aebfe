/** room:join, room:leave and disconnect: membership and generations. */
import { randomBytes } from 'node:crypto';
import { WebringError } from '../../shared/protocol/errors';
import { joinRequestSchema, parseOrThrow, type DeviceProbe, type JoinAccepted } from '../../shared/protocol';
import { scheduleAdmission } from '../rooms/runs';
import { broadcastChange } from '../rooms/membership-broadcast';
import { channelOf, type IoSocket } from '../rooms/room-context';
import type { ServerContext } from './context';
import { guarded, type AfterReply } from './errors';
import { tokenHash } from '../edge/tokens';
import { hubKeyMatches } from '../edge/join-codes';
import { iceConfigFor } from '../edge/turn';

export function registerRoomHandlers(ctx: ServerContext, socket: IoSocket): void {
  socket.on('room:join', (raw: unknown, ack: unknown) => {
    guarded<JoinAccepted>(ctx, socket, 'room:join', ack, (afterReply) => join(ctx, socket, raw, afterReply));
  });

  socket.on('room:leave', (ack: unknown) => {
    guarded(ctx, socket, 'room:leave', ack, async () => {
      if (!(await leave(ctx, socket))) throw new WebringError('ERR_NOT_IN_ROOM', 'not in a room');
      return {};
    });
  });

  socket.on('disconnect', (reason) => {
    if (socket.data.memberId) ctx.log.info(`member ${socket.data.memberId} disconnected (${reason})`);
    // A node shutting down beside others: its students reconnect through another node and
    // keep their places; the other nodes drop whoever does not come back (cluster.ts).
    if (ctx.draining && ctx.node !== null) return;
    leave(ctx, socket).catch((err: unknown) => ctx.log.error(`socket ${socket.id}: leaving on disconnect failed: ${String(err)}`));
  });
}

/**
 * Whether this connection still speaks for a member. A member dropped through another
 * signaling node keeps its stale socket.data here; the room is what counts.
 */
async function stillMember(ctx: ServerContext, socket: IoSocket): Promise<boolean> {
  const { room: name, memberId } = socket.data;
  if (!name || !memberId) return false;
  const room = await ctx.rooms.read(name);
  if (room?.socketIdOf(memberId) === socket.id) return true;
  forgetMembership(socket);
  return false;
}

async function join(ctx: ServerContext, socket: IoSocket, raw: unknown, afterReply: AfterReply): Promise<JoinAccepted> {
  if (await stillMember(ctx, socket)) throw new WebringError('ERR_ALREADY_JOINED', 'this connection already joined a room');
  const request = parseOrThrow(joinRequestSchema, raw);
  if (request.room !== socket.data.authorizedRoom) {
    throw new WebringError('ERR_BAD_JOIN_CODE', `this connection's join code is for room ${socket.data.authorizedRoom}, not ${request.room}`, 'room');
  }
  if (request.rejoin) return rejoin(ctx, socket, request.room, request.rejoin, request.probe ?? null, afterReply);
  // The join code lets a student in; the hub, which sees every gradient, needs the key only
  // the teacher's server hands out. Checked before the room is touched.
  if (request.kind === 'hub' && !(request.hubKey !== undefined && hubKeyMatches(ctx.joinSecret, request.room, request.hubKey))) {
    throw new WebringError('ERR_HUB_NOT_AUTHORIZED', `joining room ${request.room} as its hub needs the room's hub key, which the teacher's server hands out`, 'hubKey');
  }
  const memberId = randomBytes(8).toString('hex');
  const memberToken = randomBytes(24).toString('hex');
  const member = {
    id: memberId,
    socketId: socket.id,
    tokenHash: tokenHash(memberToken),
    name: request.name,
    backend: request.backend,
    kind: request.kind,
    adapter: request.adapter ?? null,
    probe: request.probe ?? null,
    node: ctx.node,
    address: socket.data.address,
  };
  const { room, result: joined } = (await ctx.rooms.update(request.room, (r) => r.join(member), { create: true }))!;
  socket.data.room = request.room;
  socket.data.memberId = memberId;
  void socket.join(channelOf(request.room));
  ctx.log.info(`member ${memberId} "${request.name}" joined ${request.room} as index ${joined.index} (${request.kind}, ${request.backend})`);
  // The ack goes first, so the worker knows its id before it reads the generation.
  afterReply(() => {
    broadcastChange(ctx, room, joined.change);
    if (joined.awaitingAdmission) scheduleAdmission(ctx, room.name);
  });
  return { memberId, index: joined.index, room: request.room, memberToken, ice: iceConfigFor(ctx.ice, memberId), collect: room.collect };
}

/**
 * A known member on a new connection keeps its id, index and rank, and the generation
 * stays: a ring that kept training through a server restart, or through the loss of the
 * signaling node it was connected to, is not disturbed.
 */
async function rejoin(ctx: ServerContext, socket: IoSocket, name: string, claim: { memberId: string; memberToken: string }, probe: DeviceProbe | null, afterReply: AfterReply): Promise<JoinAccepted> {
  const updated = await ctx.rooms.update(name, (r) => r.rejoin(claim.memberId, tokenHash(claim.memberToken), socket.id, ctx.node, probe, socket.data.address));
  const back = updated?.result;
  if (!updated || !back) throw new WebringError('ERR_NOT_IN_ROOM', `room ${name} does not know member ${claim.memberId}; join again`);
  socket.data.room = name;
  socket.data.memberId = claim.memberId;
  void socket.join(channelOf(name));
  ctx.log.info(`member ${claim.memberId} rejoined ${name} as index ${back.index}`);
  afterReply(() => socket.emit('ring:generation', updated.room.snapshot()));
  return { memberId: claim.memberId, index: back.index, room: name, memberToken: claim.memberToken, ice: iceConfigFor(ctx.ice, claim.memberId), collect: updated.room.collect };
}

/** This connection no longer speaks for a member (it left, or was dropped); it may join again. */
function forgetMembership(socket: IoSocket): void {
  const name = socket.data.room;
  socket.data.room = null;
  socket.data.memberId = null;
  if (name) void socket.leave(channelOf(name));
}

async function leave(ctx: ServerContext, socket: IoSocket): Promise<boolean> {
  const { room: name, memberId } = socket.data;
  if (!name || !memberId) return false;
  forgetMembership(socket);
  // A member that already came back on a newer connection is not removed by the old one closing.
  const updated = await ctx.rooms.update(name, (room) => (room.socketIdOf(memberId) === socket.id ? room.leave(memberId) : null));
  if (!updated?.result) return false;
  broadcastChange(ctx, updated.room, updated.result);
  await ctx.rooms.releaseIfIdle(name);
  return true;
}
