/** worker:progress, worker:evaluated, worker:finished: what the dashboard and API show. */
import { WebringError } from '../../shared/errors';
import {
  dropRequestSchema,
  evaluationReportSchema,
  evictRequestSchema,
  finishReportSchema,
  parseOrThrow,
  progressReportSchema,
  reformRequestSchema,
} from '../../shared/protocol';
import type { Room } from '../room';
import type { IoSocket, ServerContext } from '../context';
import { guarded } from './errors';
import { broadcastChange, forgetMembership } from './rooms';

function memberRoom(ctx: ServerContext, socket: IoSocket): { room: Room; memberId: string } {
  const { room: name, memberId } = socket.data;
  const room = name ? ctx.rooms.get(name) : undefined;
  if (!room || !memberId) throw new WebringError('ERR_NOT_IN_ROOM', 'join a room first');
  return { room, memberId };
}

export function registerTrainingHandlers(ctx: ServerContext, socket: IoSocket): void {
  socket.on('worker:progress', (raw: unknown) => {
    guarded(ctx, socket, 'worker:progress', undefined, () => {
      const { room, memberId } = memberRoom(ctx, socket);
      room.recordProgress(memberId, parseOrThrow(progressReportSchema, raw));
    });
  });

  socket.on('worker:evaluated', (raw: unknown) => {
    guarded(ctx, socket, 'worker:evaluated', undefined, () => {
      const { room, memberId } = memberRoom(ctx, socket);
      room.recordEvaluation(memberId, parseOrThrow(evaluationReportSchema, raw));
    });
  });

  socket.on('worker:finished', (raw: unknown) => {
    guarded(ctx, socket, 'worker:finished', undefined, () => {
      const { room, memberId } = memberRoom(ctx, socket);
      const report = parseOrThrow(finishReportSchema, raw);
      // Replicas all end at the same step; only the first report changes the room.
      const wasTraining = room.isTraining;
      const change = room.recordFinished(memberId, report);
      if (!wasTraining) return;
      ctx.log.info(`room ${room.name}: run ${report.reason} at step ${report.step}`);
      for (const id of room.takeAdmittedWithoutState()) {
        const socketId = room.socketIdOf(id);
        if (socketId) ctx.io.to(socketId).emit('train:stop', { reason: 'ended' });
      }
      broadcastChange(ctx, room, change);
      void ctx.persistence.save(room);
    });
  });

  socket.on('ring:drop', (raw: unknown) => {
    guarded(ctx, socket, 'ring:drop', undefined, () => {
      const { room, memberId } = memberRoom(ctx, socket);
      const request = parseOrThrow(dropRequestSchema, raw);
      const socketId = room.socketIdOf(request.member);
      const change = room.drop(memberId, request);
      ctx.log.warn(`room ${room.name}: dropped straggler ${request.member} at step ${request.step} (${Math.round(request.computeMs)} ms vs deadline ${Math.round(request.deadlineMs)} ms)`);
      // The dropped tab is told why, and its connection is free to join again.
      const dropped = socketId ? ctx.io.sockets.sockets.get(socketId) : undefined;
      if (dropped) {
        forgetMembership(dropped);
        dropped.emit('member:dropped', { reason: 'straggler', step: request.step, computeMs: request.computeMs, deadlineMs: request.deadlineMs });
      }
      broadcastChange(ctx, room, change);
    });
  });

  socket.on('ring:evict', (raw: unknown, ack?: unknown) => {
    guarded(ctx, socket, 'ring:evict', ack, () => {
      const { room, memberId } = memberRoom(ctx, socket);
      const request = parseOrThrow(evictRequestSchema, raw);
      const { change, evicted } = room.evict(memberId, request);
      for (const { id, socketId, notice } of evicted) {
        ctx.log.warn(`room ${room.name}: evicted ${id} at ${memberId}'s report (${notice.misbehaviour}: ${notice.detail})`);
        // Told why; its connection no longer speaks for a member and may join afresh.
        const gone = socketId ? ctx.io.sockets.sockets.get(socketId) : undefined;
        if (gone) {
          forgetMembership(gone);
          gone.emit('member:dropped', notice);
        }
      }
      broadcastChange(ctx, room, change);
      return { evicted: evicted.map((e) => e.id) };
    });
  });

  socket.on('ring:reform', (raw: unknown) => {
    guarded(ctx, socket, 'ring:reform', undefined, () => {
      const { room, memberId } = memberRoom(ctx, socket);
      const request = parseOrThrow(reformRequestSchema, raw);
      const change = room.reform(memberId, request.generation, request.reason);
      if (change.generation) ctx.log.warn(`room ${room.name}: ring re-formed at ${memberId}'s request (${request.reason})`);
      broadcastChange(ctx, room, change);
    });
  });
}
