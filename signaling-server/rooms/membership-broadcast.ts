/**
 * The one way a membership change reaches the room's sockets, whoever caused it: a join or
 * leave (handlers/rooms.ts); a run's end, a drop, an eviction or a re-form
 * (handlers/training.ts); the teacher removing the hub (hub-access.ts); or the sweep of
 * members who did not come back (reconnect-sweep.ts).
 */
import type { Room } from './room';
import type { MembershipChange } from './room-core';
import { channelOf, type RoomContext } from './room-context';
import { scheduleAutoResume } from './runs';
import { scheduleKeyDeadline } from './key-deadline';

/** Tells the room about a membership change, and recovers a broken run. */
export function broadcastChange(ctx: RoomContext, room: Room, change: MembershipChange): void {
  const name = room.name;
  if (change.trainingAborted) {
    ctx.log.warn(`room ${name}: the run could not go on with its ring; back to the latest checkpoint`);
    ctx.io.to(channelOf(name)).emit('train:stop', { reason: 'failure' });
  }
  if (change.generation) {
    const g = change.generation;
    ctx.log.info(`room ${name}: generation ${g.generation} with ${g.members.length} member(s)${g.hub ? ` and hub ${g.hub.id}` : ''}`);
    ctx.io.to(channelOf(name)).emit('ring:generation', g);
    scheduleKeyDeadline(ctx, room, g.generation);
  }
  if (change.trainingAborted) scheduleAutoResume(ctx, name, room.runConfig);
}
