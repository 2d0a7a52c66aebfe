/**
 * The timer of the stall watch (stall-watch.ts has the rule): while a room trains, the server
 * looks at it every STALL_CHECK_MS, and a stalled run is ended and its members told to stop.
 * Armed at every start and every progress report, so a room this node learned of from
 * another node, or from room.json after a restart, is watched too; one timer a room.
 */
import { STALL_CHECK_MS, STALL_FLOOR_MS } from './stall-watch';
import { channelOf, type RoomContext } from './room-context';
import { scheduleKeyDeadline } from './key-deadline';

/** Watches `name` while it trains; does nothing when its timer is already set. */
export function watchForStall(ctx: RoomContext, name: string): void {
  // A floor shortened for a test is checked as often as it needs.
  const everyMs = Math.min(STALL_CHECK_MS, (ctx.stallFloorMs ?? STALL_FLOOR_MS) / 2);
  ctx.timers.once(`stall:${name}`, everyMs, () => {
    void (async () => {
      const room = await ctx.rooms.read(name);
      if (!room?.isTraining) return;
      // Read first: a room that is fine costs no write.
      if (!room.stalled(ctx.stallFloorMs)) return watchForStall(ctx, name);
      const updated = await ctx.rooms.update(name, (r) => r.endIfStalled(ctx.stallFloorMs));
      const stall = updated?.result;
      if (!updated || !stall) return watchForStall(ctx, name);
      ctx.log.warn(`room ${name}: ${stall.error.code} ${stall.error.message}`);
      ctx.io.to(channelOf(name)).emit('train:stop', { reason: 'stalled' });
      ctx.io.to(channelOf(name)).emit('ring:generation', stall.generation);
      scheduleKeyDeadline(ctx, updated.room, stall.generation.generation);
    })().catch((err: unknown) => ctx.log.error(`room ${name}: the stall watch failed: ${String(err)}`));
  });
}
