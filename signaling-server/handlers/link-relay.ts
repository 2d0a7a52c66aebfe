/**
 * link:data: the relay (shared/network/relay-link.ts). A member that could open no WebRTC
 * link to a partner sends its ring messages here, and the server passes each one on, as it
 * came and unread, over the partner's own connection. Only between two members of the same
 * room that the ring links (their partners now or in the generation before), on a link
 * the target said it relays (rooms/relay-partners.ts), and no faster than the target's
 * connection takes it (edge/relay-backpressure.ts): the acknowledgement comes once the
 * message went. The bytes are what the data channel would have carried (masked words in a
 * secure run). What each member relayed, and what the relay refused it, is counted for the
 * teacher's page (rooms/relay-ledger.ts).
 */
import { WebringError, toWebringError } from '../../shared/protocol/errors';
import { linkDataSchema, parseOrThrow } from '../../shared/protocol';
import type { IoSocket } from '../rooms/room-context';
import type { ServerContext } from './context';
import { guarded, LaterReply } from './errors';

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
      const bytes = data.bytes.byteLength;
      try {
        room.checkRelay(memberId, data.to, data.linkId);
        const local = ctx.io.sockets.sockets.get(target) ?? null;
        const message = { from: memberId, linkId: data.linkId, bytes: data.bytes };
        const send = (taken: () => void) => {
          // The page acknowledges each message as it arrives (shared/network/relay-link.ts), which paces the flow to its link.
          if (local) local.emit('link:data', message, taken);
          else ctx.io.to(target).emit('link:data', message);
          ctx.relay.carried(name, memberId, data.to, bytes, ctx.clock.now());
        };
        const named = (from: string) => {
          const why = `${from} keeps relaying to ${data.to} faster than ${data.to} takes it`;
          ctx.log.warn(`room ${name}: ${why}; its messages are refused (ERR_RELAY_BACKLOG)`);
        };
        const forwarded = ctx.relayFlow.forward(memberId, target, local, bytes, send, named);
        return new LaterReply(forwarded.then(() => ({})));
      } catch (err) {
        ctx.relay.refused(name, memberId, toWebringError(err).code, ctx.clock.now());
        throw err;
      }
    });
  });
}
