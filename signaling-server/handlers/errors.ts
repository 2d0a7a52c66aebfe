import { toWebringError, type ErrorBody } from '../../shared/errors';
import type { AckResult } from '../../shared/protocol';
import type { IoSocket, ServerContext } from '../context';

/**
 * Runs one event handler at the edge: any error becomes a coded reply (the ack when the
 * client sent one, else a 'server:error' event), and is logged once per socket and code.
 * Nothing a client sends can throw past this point and take the server down.
 */
export function guarded<T extends object>(
  ctx: ServerContext,
  socket: IoSocket,
  event: string,
  ack: unknown,
  run: () => T | void,
): void {
  const reply = typeof ack === 'function' ? (ack as (r: AckResult<T>) => void) : null;
  try {
    const result = run();
    if (reply) reply({ ok: true, ...(result ?? {}) } as AckResult<T>);
  } catch (err) {
    const body: ErrorBody = toWebringError(err).toBody();
    const key = `${event}:${body.code}`;
    if (!socket.data.loggedErrors.has(key)) {
      socket.data.loggedErrors.add(key);
      const level = body.code === 'ERR_INTERNAL' ? 'error' : 'warn';
      ctx.log[level](`socket ${socket.id} ${event}: ${body.code} ${body.message} (further ${body.code} from this socket not logged)`);
    }
    if (reply) reply({ ok: false, error: body });
    else socket.emit('server:error', body);
  }
}
