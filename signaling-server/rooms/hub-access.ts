/**
 * The teacher's say over the room's hub: remove it (and refuse hub joins until the teacher
 * allows one again), or allow one again. The room keeps the rule (hub-role.ts, applied by
 * Room.removeHubAsTeacher, Room.allowHub, Room.hubBarred); this file tells the sockets. The HTTP routes are in
 * edge/http-api.ts.
 */
import type { Room } from './room';
import { channelOf, type RoomContext } from './room-context';
import { broadcastChange } from './membership-broadcast';

/**
 * Removes `name`'s hub, if it has one, and bars hub joins with ERR_HUB_REMOVED until
 * allowHubAgain; the removed hub hears `member:dropped` with reason 'removed', the class a
 * generation without it. A room without a hub is barred all the same: the teacher wants none.
 */
export async function removeHubAsTeacher(ctx: RoomContext, name: string): Promise<Room> {
  const { room, result } = (await ctx.rooms.update(name, (r) => r.removeHubAsTeacher(), { create: true }))!;
  if (result.removed) {
    const { id, socketId, notice } = result.removed;
    ctx.log.warn(`room ${name}: the teacher removed hub ${id}; hub joins are refused until the teacher allows one again`);
    if (socketId) {
      ctx.io.in(socketId).socketsLeave(channelOf(name));
      ctx.io.to(socketId).emit('member:dropped', notice);
    }
  } else {
    ctx.log.info(`room ${name}: the teacher bars hubs (no hub was in the room)`);
  }
  broadcastChange(ctx, room, result.change);
  return room;
}

/** Lets a hub join `name` again; a hub waiting outside (hub-member.ts) comes back by itself. */
export async function allowHubAgain(ctx: RoomContext, name: string): Promise<Room | null> {
  const updated = await ctx.rooms.update(name, (r) => r.allowHub());
  if (!updated) return null;
  if (updated.result) ctx.log.info(`room ${name}: the teacher allows a hub again`);
  await ctx.rooms.releaseIfIdle(name);
  return updated.room;
}
