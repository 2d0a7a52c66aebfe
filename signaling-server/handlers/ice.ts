/** ice:config: fresh TURN credentials for a member whose current ones are close to expiry. */
import { WebringError } from '../../shared/protocol/errors';
import type { IceConfig } from '../../shared/protocol';
import type { IoSocket } from '../rooms/room-context';
import { iceConfigFor } from '../edge/turn';
import type { ServerContext } from './context';
import { guarded } from './errors';

export function registerIceHandlers(ctx: ServerContext, socket: IoSocket): void {
  socket.on('ice:config', (ack: unknown) => {
    guarded<{ ice: IceConfig }>(ctx, socket, 'ice:config', ack, () => {
      // Credentials go to members only: a bare socket could otherwise use the school's
      // TURN server as a free relay without ever joining a class.
      const memberId = socket.data.memberId;
      if (!memberId) throw new WebringError('ERR_NOT_IN_ROOM', 'join a room before asking for ICE servers');
      return { ice: iceConfigFor(ctx.ice, memberId) };
    });
  });
}
