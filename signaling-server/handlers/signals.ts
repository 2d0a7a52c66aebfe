/** signal:relay: SDP and ICE between members of one room; the server never reads them. */
import { WebringError } from '../../shared/errors';
import { MAX_SIGNAL_BYTES, parseOrThrow, signalRelaySchema } from '../../shared/protocol';
import type { IoSocket, ServerContext } from '../context';
import { guarded } from './errors';

export function registerSignalHandlers(ctx: ServerContext, socket: IoSocket): void {
  socket.on('signal:relay', (raw: unknown, ack: unknown) => {
    guarded(ctx, socket, 'signal:relay', ack, async () => {
      const { room: name, memberId } = socket.data;
      if (!name || !memberId) throw new WebringError('ERR_NOT_IN_ROOM', 'join a room before signaling');
      const relay = parseOrThrow(signalRelaySchema, raw);
      if (JSON.stringify(relay.data).length > MAX_SIGNAL_BYTES) {
        throw new WebringError('ERR_PAYLOAD_TOO_LARGE', `signal larger than ${MAX_SIGNAL_BYTES} bytes`);
      }
      const target = (await ctx.rooms.read(name))?.socketIdOf(relay.to) ?? null;
      if (!target) throw new WebringError('ERR_NOT_IN_ROOM', `member ${relay.to} is not in room ${name}`);
      ctx.io.to(target).emit('signal:relay', { from: memberId, linkId: relay.linkId, data: relay.data });
      return {};
    });
  });
}
