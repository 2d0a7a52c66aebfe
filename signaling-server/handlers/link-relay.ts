/**
 * link:data: the relay (shared/network/relay-link.ts). A member that could open no WebRTC
 * link to a partner sends its ring messages here, and the server passes each one on, as it
 * came and unread, over the partner's own connection. Only between two members of the same
 * room; the bytes are what the data channel would have carried (masked words in a secure
 * run). What each member relayed is counted for the teacher's page (rooms/relay-ledger.ts).
 */
import { WebringError } from '../../shared/protocol/errors';
import { linkDataSchema, parseOrThrow } from '../../shared/protocol';
import type { IoSocket } from '../rooms/room-context';
import type { ServerContext } from './context';
import { guarded } from './errors';

export function registerLinkRelayHandlers(ctx: ServerContext, socket: IoSocket): void {
  socket.on('link:data', (raw: unknown, ack: unknown) => {
    guarded(ctx, socket, 'link:data', ack, async () => {
      const { room: name, memberId } = socket.data;
      if (!name || !memberId) throw new WebringError('ERR_NOT_IN_ROOM', 'join a room before relaying');
      const data = parseOrThrow(linkDataSchema, raw);
      if (data.to === memberId) throw new WebringError('ERR_BAD_REQUEST', 'a member relays to another member, not to itself', 'to');
      const room = await ctx.rooms.read(name);
      // A member dropped from the ring keeps its connection (and this socket's memberId) to
      // join again: only a current member's own connection relays.
      if (room?.socketIdOf(memberId) !== socket.id) throw new WebringError('ERR_NOT_IN_ROOM', `member ${memberId} is no longer in room ${name}`);
      const target = room.socketIdOf(data.to);
      if (!target) throw new WebringError('ERR_NOT_IN_ROOM', `member ${data.to} is not in room ${name}`);
      ctx.io.to(target).emit('link:data', { from: memberId, linkId: data.linkId, bytes: data.bytes });
      ctx.relay.carried(name, memberId, data.to, data.bytes.byteLength, ctx.clock.now());
      return {};
    });
  });
}
