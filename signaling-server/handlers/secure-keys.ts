/**
 * secagg:key: a member's public key for one generation of a secure run, relayed to the
 * room (shared/secagg/key-directory.ts). The server checks that the key is a point of
 * P-256 (a key off the curve would make every partner's key agreement fail, and they, not
 * the sender, would leave as failed: issue 38), that the run is secure and current, that
 * the sender belongs to the room's current generation, and that it publishes one key per
 * run and generation (a client cannot flood its class with keys), then hands the key to
 * everyone in the room, the sender included.
 *
 * What this cannot prove to the members: that it relays their classmates' real keys. A
 * server that swapped keys could read masked values; docs/privacy.md says so plainly.
 */
import { ECDH } from 'node:crypto';
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
      if (!isP256Point(key.publicKey)) throw new WebringError('ERR_BAD_DATA', 'the key is not a point of P-256: nothing was relayed', 'publicKey');
      const room = await ctx.rooms.read(name);
      if (!room) throw new WebringError('ERR_NOT_IN_ROOM', `room ${name} no longer exists`);
      if (!room.isTraining || !room.runConfig?.secureAggregation) throw new WebringError('ERR_BAD_STATE', `room ${name} runs no secure aggregation`);
      if (key.run !== room.runNumber) throw new WebringError('ERR_STALE_RUN', `a key for run ${key.run}; the room is in run ${room.runNumber}`);
      const g = room.snapshot();
      if (key.generation !== g.generation) throw new WebringError('ERR_STALE_GENERATION', `a key for generation ${key.generation}; the ring is at ${g.generation}`);
      if (!g.members.some((m) => m.id === memberId)) throw new WebringError('ERR_NOT_IN_ROOM', `member ${memberId} is not in generation ${g.generation}`);
      // One key per member and ring, on the room's record: a reconnect cannot publish a second.
      await ctx.rooms.update(name, (r) => r.notePublishedKey(memberId, key.run, key.generation));
      ctx.io.to(channelOf(name)).emit('secagg:key', { ...key, member: memberId });
      return {};
    });
  });
}

/** Whether `base64` holds an uncompressed point on P-256 (OpenSSL decodes only points on the curve). */
function isP256Point(base64: string): boolean {
  const bytes = Buffer.from(base64, 'base64');
  if (bytes.length !== 65 || bytes[0] !== 0x04) return false;
  try {
    ECDH.convertKey(bytes, 'prime256v1');
    return true;
  } catch {
    return false; // OpenSSL refused the point: it is not on the curve
  }
}
