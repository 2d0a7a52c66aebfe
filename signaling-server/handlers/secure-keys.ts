/**
 * secagg:key: a member's public key for one generation of a secure run, relayed to the
 * room (shared/secagg/key-directory.ts). The server reads nothing in the key: it checks
 * that the run is secure and current, that the sender belongs to the room's current
 * generation, and that it publishes one key per run and generation (a client cannot flood
 * its class with keys),
 * then hands the key to everyone in the room, the sender included.
 *
 * What this cannot prove to the members: that it relays their classmates' real keys. A
 * server that swapped keys could read masked values; docs/privacy.md says so plainly.
 */
import { WebringError } from '../../shared/protocol/errors';
import { parseOrThrow, secureKeySchema } from '../../shared/protocol';
import { channelOf, type IoSocket } from '../rooms/room-context';
import type { ServerContext } from './context';
import { guarded } from './errors';
import { requireMember } from './training';

export function registerSecureKeyHandlers(ctx: ServerContext, socket: IoSocket): void {
  socket.on('secagg:key', (raw: unknown, ack: unknown) => {
    guarded(ctx, socket, 'secagg:key', ack, async () => {
      const { name, memberId } = requireMember(socket);
      const key = parseOrThrow(secureKeySchema, raw);
      const room = await ctx.rooms.read(name);
      if (!room) throw new WebringError('ERR_NOT_IN_ROOM', `room ${name} no longer exists`);
      if (!room.isTraining || !room.runConfig?.secureAggregation) throw new WebringError('ERR_BAD_STATE', `room ${name} runs no secure aggregation`);
      if (key.run !== room.runNumber) throw new WebringError('ERR_STALE_RUN', `a key for run ${key.run}; the room is in run ${room.runNumber}`);
      const g = room.snapshot();
      if (key.generation !== g.generation) throw new WebringError('ERR_STALE_GENERATION', `a key for generation ${key.generation}; the ring is at ${g.generation}`);
      if (!g.members.some((m) => m.id === memberId)) throw new WebringError('ERR_NOT_IN_ROOM', `member ${memberId} is not in generation ${g.generation}`);
      const last = socket.data.lastKey;
      if (last && last.run === key.run && last.generation >= key.generation) {
        throw new WebringError('ERR_BAD_REQUEST', `one key per ring: this connection already published one for run ${last.run}, generation ${last.generation}`);
      }
      socket.data.lastKey = { run: key.run, generation: key.generation };
      ctx.io.to(channelOf(name)).emit('secagg:key', { ...key, member: memberId });
      return {};
    });
  });
}
