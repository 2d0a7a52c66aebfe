/**
 * The teacher's seat settings for a room (PUT /api/rooms/:room/seats): the cap on seats per
 * client address (seats.ts), and the vouch that members sharing an address are distinct
 * devices (secure-count.ts). The room keeps the rule; this file tells the sockets when the
 * vouch changes a running ring's count of clients. The HTTP route is in edge/http-api.ts.
 */
import { WebringError } from '../../shared/protocol/errors';
import type { z } from 'zod';
import type { seatsRequestSchema } from '../../shared/protocol';
import type { Room } from './room';
import { NO_CHANGE } from './room-core';
import type { RoomContext } from './room-context';
import { broadcastChange } from './membership-broadcast';

/** Applies what `request` names (a field left out stays as it is); the room after the change. */
export async function setSeats(ctx: RoomContext, name: string, request: z.output<typeof seatsRequestSchema>): Promise<Room> {
  const { perAddress, vouched } = request;
  if (perAddress === undefined && vouched === undefined) throw new WebringError('ERR_BAD_REQUEST', 'name perAddress, vouched, or both', 'perAddress');
  const { room, result } = (await ctx.rooms.update(
    name,
    (r) => {
      if (perAddress !== undefined) r.setSeatsPerAddress(perAddress);
      return vouched === undefined ? NO_CHANGE : r.vouchForSharedAddresses(vouched);
    },
    { create: true },
  ))!;
  if (vouched !== undefined) ctx.log.info(`room ${name}: the teacher ${vouched ? 'vouches' : 'no longer vouches'} that members sharing an address are distinct devices`);
  broadcastChange(ctx, room, result);
  await ctx.rooms.releaseIfIdle(name);
  return room;
}
