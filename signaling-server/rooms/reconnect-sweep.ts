/**
 * Members whose connection vanished without a goodbye (the server restarted, or the
 * signaling node holding them died) keep their place for the reconnect grace, so a ring
 * that kept training is not disturbed when they come back. This sweep drops whoever did
 * not, like a closed tab. The one place for it: after a restart (server.ts) and after a
 * node's loss (cluster.ts).
 */
import type { RoomContext } from './room-context';
import { broadcastChange } from './membership-broadcast';
import { scheduleAdmission } from './runs';

/** Drops the members of room `name` disconnected for `graceMs` or longer, and lets in anyone left waiting. */
export async function dropOverdueMembers(ctx: RoomContext, name: string, graceMs: number): Promise<void> {
  let room = await ctx.rooms.read(name);
  if (!room) return;
  for (const id of room.overdue(graceMs)) {
    // Checked again inside the update: the member may have come back meanwhile.
    const left = await ctx.rooms.update(name, (r) => (r.overdue(graceMs).includes(id) ? r.leave(id) : null));
    if (!left?.result) continue;
    room = left.room;
    ctx.log.info(`room ${name}: member ${id} did not reconnect`);
    broadcastChange(ctx, left.room, left.result);
  }
  // Students who were waiting for admission when the server or their node went down are let
  // in now: the admission timer went down with it.
  if (room.isTraining && room.hasWaiting) scheduleAdmission(ctx, name);
  await ctx.rooms.releaseIfIdle(name);
}
