/** worker:progress, worker:evaluated, worker:finished: what the dashboard and API show; ring:drop, ring:evict and ring:reform: the ring's own removals and re-forms. */
import { WebringError } from '../../shared/protocol/errors';
import {
  dropRequestSchema,
  evaluationReportSchema,
  evictRequestSchema,
  finishReportSchema,
  ownExamplesReportSchema,
  networkReportSchema,
  parseOrThrow,
  progressReportSchema,
  reformRequestSchema,
} from '../../shared/protocol';
import type { Room } from '../rooms/room';
import { tellRemoved, type IoSocket } from '../rooms/room-context';
import { broadcastChange } from '../rooms/membership-broadcast';
import { scheduleAdmission } from '../rooms/runs';
import { watchForStall } from '../rooms/stall-timer';
import { SHED_REPORT_WINDOW_MS } from '../rooms/formation';
import type { ServerContext } from './context';
import { guarded } from './errors';

/**
 * A member the ring let go (a straggler, an evicted peer) is told why and leaves the room's
 * channel; its connection, on whichever signaling node, is free to join again (see
 * stillMember in rooms.ts).
 */

/** This connection's room and member; refused, before anything else is read, for a connection that joined none. */
export function requireMember(socket: IoSocket): { name: string; memberId: string } {
  const { room: name, memberId } = socket.data;
  if (!name || !memberId) throw new WebringError('ERR_NOT_IN_ROOM', 'join a room first');
  return { name, memberId };
}

/** Applies `change` to the room of this connection's member. */
async function updateMemberRoom<T>(ctx: ServerContext, member: { name: string; memberId: string }, change: (room: Room, memberId: string) => T): Promise<{ room: Room; result: T }> {
  const updated = await ctx.rooms.update(member.name, (room) => change(room, member.memberId));
  if (!updated) throw new WebringError('ERR_NOT_IN_ROOM', `room ${member.name} no longer exists`);
  return updated;
}

/**
 * Sheds the members of `generation` nobody can reach, once the other ends of their links
 * had SHED_REPORT_WINDOW_MS to report (formation.ts). Keyed by room: the room is re-read
 * when the timer fires.
 */
function scheduleShedding(ctx: ServerContext, name: string, generation: number): void {
  ctx.timers.once(`shed:${name}`, SHED_REPORT_WINDOW_MS, () => {
    void (async () => {
      const updated = await ctx.rooms.update(name, (r) => r.shedUnreachable(generation));
      if (!updated || updated.result.shed.length === 0) return;
      for (const { id, socketId, notice } of updated.result.shed) {
        ctx.log.warn(`room ${name}: shed unreachable member ${id} (${notice.detail})`);
        tellRemoved(ctx, name, socketId, notice);
      }
      broadcastChange(ctx, updated.room, updated.result.change);
    })().catch((err: unknown) => ctx.log.error(`room ${name}: shedding failed: ${String(err)}`));
  });
}

export function registerTrainingHandlers(ctx: ServerContext, socket: IoSocket): void {
  socket.on('worker:progress', (raw: unknown) => {
    guarded(ctx, socket, 'worker:progress', undefined, async () => {
      const member = requireMember(socket);
      const report = parseOrThrow(progressReportSchema, raw);
      const { result } = await updateMemberRoom(ctx, member, (room, memberId) => room.recordProgress(memberId, report));
      // A room this node learned of from another node, or from room.json after a restart, is watched too.
      watchForStall(ctx, member.name);
      // The ring switched to the admission that was forming: the next students may come in.
      if (result.admitNext) scheduleAdmission(ctx, member.name);
      // A second rank's hash vouched for (or contradicted) a stored checkpoint of this step.
      for (const { id, trust } of result.trust) {
        if (await ctx.checkpoints.setTrust(member.name, id, trust)) ctx.log.info(`room ${member.name}: checkpoint ${id} ${trust.state}${trust.by ? ` by ${trust.by}` : ''}`);
      }
    });
  });

  socket.on('worker:evaluated', (raw: unknown) => {
    guarded(ctx, socket, 'worker:evaluated', undefined, async () => {
      const member = requireMember(socket);
      const report = parseOrThrow(evaluationReportSchema, raw);
      await updateMemberRoom(ctx, member, (room, memberId) => room.recordEvaluation(memberId, report));
    });
  });

  socket.on('worker:own-examples', (raw: unknown) => {
    guarded(ctx, socket, 'worker:own-examples', undefined, async () => {
      const member = requireMember(socket);
      const report = parseOrThrow(ownExamplesReportSchema, raw);
      await updateMemberRoom(ctx, member, (room, memberId) => room.recordOwnExamples(memberId, report));
    });
  });

  socket.on('worker:network', (raw: unknown) => {
    guarded(ctx, socket, 'worker:network', undefined, () => {
      const { name, memberId } = requireMember(socket);
      ctx.networkChecks.report(name, memberId, parseOrThrow(networkReportSchema, raw), ctx.clock.now());
    });
  });

  socket.on('worker:finished', (raw: unknown) => {
    guarded(ctx, socket, 'worker:finished', undefined, async () => {
      const member = requireMember(socket);
      const report = parseOrThrow(finishReportSchema, raw);
      // Replicas all end at the same step; only the first report changes the room.
      const { room, result } = await updateMemberRoom(ctx, member, (r, memberId) => {
        const wasTraining = r.isTraining;
        const { change, failed } = r.recordFinished(memberId, report);
        const ended = !r.isTraining;
        return { wasTraining, change, failed, withoutState: wasTraining && ended ? r.takeAdmittedWithoutState() : [] };
      });
      if (!result.wasTraining) return;
      if (report.reason === 'failed') {
        // Why a member could not go on belongs in the log, not only on the teacher page.
        const what = result.failed ? 'left the ring, the class trains on' : 'was the last member: back to the latest checkpoint';
        ctx.log.warn(`room ${room.name}: a member's run failed at step ${report.step} (${member.memberId}: ${report.code ?? 'no code'} ${report.message ?? ''}); it ${what}`);
        if (result.failed) tellRemoved(ctx, room.name, result.failed.socketId, result.failed.notice);
      } else {
        ctx.log.info(`room ${room.name}: run ${report.reason} at step ${report.step}`);
      }
      for (const id of result.withoutState) {
        const socketId = room.socketIdOf(id);
        if (socketId) ctx.io.to(socketId).emit('train:stop', { reason: 'ended' });
      }
      broadcastChange(ctx, room, result.change);
    });
  });

  socket.on('ring:drop', (raw: unknown) => {
    guarded(ctx, socket, 'ring:drop', undefined, async () => {
      const member = requireMember(socket);
      const request = parseOrThrow(dropRequestSchema, raw);
      const { room, result } = await updateMemberRoom(ctx, member, (r, memberId) => {
        const socketId = r.socketIdOf(request.member);
        return { socketId, change: r.drop(memberId, request) };
      });
      ctx.log.warn(`room ${room.name}: dropped straggler ${request.member} at step ${request.step} (${Math.round(request.computeMs)} ms vs deadline ${Math.round(request.deadlineMs)} ms)`);
      tellRemoved(ctx, room.name, result.socketId, { reason: 'straggler', step: request.step, computeMs: request.computeMs, deadlineMs: request.deadlineMs });
      broadcastChange(ctx, room, result.change);
    });
  });

  socket.on('ring:evict', (raw: unknown, ack?: unknown) => {
    guarded(ctx, socket, 'ring:evict', ack, async () => {
      const member = requireMember(socket);
      const request = parseOrThrow(evictRequestSchema, raw);
      const { room, result } = await updateMemberRoom(ctx, member, (r, memberId) => r.evict(memberId, request));
      if (result.refused) throw result.refused;
      // A ring member named the hub and the hub stays (accusations.ts): the teacher's terminal hears it too.
      if (result.evicted.length === 0) ctx.log.warn(`room ${room.name}: ${member.memberId} accused the hub (${request.reason} at step ${request.step}); recorded, the hub stays`);
      for (const { id, socketId, notice } of result.evicted) {
        ctx.log.warn(`room ${room.name}: evicted ${id} at ${member.memberId}'s report (${notice.misbehaviour}: ${notice.detail})`);
        tellRemoved(ctx, room.name, socketId, notice);
      }
      broadcastChange(ctx, room, result.change);
      return { evicted: result.evicted.map((e) => e.id) };
    });
  });

  socket.on('ring:reform', (raw: unknown) => {
    guarded(ctx, socket, 'ring:reform', undefined, async () => {
      const member = requireMember(socket);
      const request = parseOrThrow(reformRequestSchema, raw);
      const { room, result } = await updateMemberRoom(ctx, member, (r, memberId) => r.reform(memberId, request.generation, request.reason, request.unreachable));
      // A request past the member's cap was counted (stored above) and is answered with its code.
      if (result.refused) throw result.refused;
      if (result.evicted) {
        const { id, socketId, notice } = result.evicted;
        ctx.log.warn(`room ${room.name}: evicted ${id} (${notice.misbehaviour}: ${notice.detail})`);
        tellRemoved(ctx, room.name, socketId, notice);
      } else if (result.change.generation) {
        ctx.log.warn(`room ${room.name}: ring re-formed at the request of ${result.voters.join(' and ')} (${request.reason})`);
      }
      if (result.shedDue) scheduleShedding(ctx, room.name, request.generation);
      broadcastChange(ctx, room, result.change);
    });
  });
}
