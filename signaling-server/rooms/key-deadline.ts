/**
 * The timer of the server's key deadline (keyless.ts has the rule): every generation a
 * secure run announces gets one, keyed by room and generation.
 */
import type { StartConfig } from '../../shared/protocol';
import { KEY_DEADLINE_MS } from './keyless';
import { channelOf, tellRemoved, type RoomContext } from './room-context';

/** After `room` announced generation `generation`: in a secure run, its keys are due by the deadline. */
export function scheduleKeyDeadline(ctx: RoomContext, room: { name: string; isTraining: boolean; runConfig: StartConfig | null }, generation: number): void {
  if (!room.isTraining || !room.runConfig?.secureAggregation) return;
  const name = room.name;
  ctx.timers.once(`keys:${name}:${generation}`, ctx.keyDeadlineMs ?? KEY_DEADLINE_MS, () => {
    void (async () => {
      const updated = await ctx.rooms.update(name, (r) => r.evictKeyless(generation));
      if (!updated || updated.result.evicted.length === 0) return;
      for (const { id, socketId, notice } of updated.result.evicted) {
        ctx.log.warn(`room ${name}: evicted member ${id} (${notice.detail})`);
        tellRemoved(ctx, name, socketId, notice);
      }
      const next = updated.result.change.generation;
      if (!next) return;
      ctx.io.to(channelOf(name)).emit('ring:generation', next);
      scheduleKeyDeadline(ctx, updated.room, next.generation);
    })().catch((err: unknown) => ctx.log.error(`room ${name}: the key deadline failed: ${String(err)}`));
  });
}
