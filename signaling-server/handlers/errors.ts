import { toWebringError, type ErrorBody } from '../../shared/protocol/errors';
import type { AckResult } from '../../shared/protocol';
import type { IoSocket } from '../rooms/room-context';
import type { ServerContext } from './context';

/**
 * A reply that comes later, without holding the socket's queue: the relay acknowledges a
 * message once it went to the partner, which may take a while (edge/relay-backpressure.ts),
 * and the sender's other events must not wait for that.
 */
export class LaterReply<T extends object> {
  constructor(readonly settled: Promise<T>) {}
}

/** Registers an effect that runs after the reply is sent (a broadcast the joiner must hear after its ack). */
export type AfterReply = (effect: () => void) => void;

/**
 * Runs one event handler at the edge: any error becomes a coded reply (the ack when the
 * client sent one, else a 'server:error' event), and is logged once per socket and code.
 * Nothing a client sends can throw past this point and take the server down. Handlers may
 * be async (rooms may live in Redis); effects given to `afterReply` run once the ack is out.
 * `answer` never rejects, so the socket's queue never breaks.
 */
export function guarded<T extends object>(
  ctx: ServerContext,
  socket: IoSocket,
  event: string,
  ack: unknown,
  run: (afterReply: AfterReply) => Promise<T | LaterReply<T> | void> | T | LaterReply<T> | void,
): void {
  const reply = typeof ack === 'function' ? (ack as (r: AckResult<T>) => void) : null;
  const effects: Array<() => void> = [];
  const fail = (err: unknown) => {
    const body: ErrorBody = toWebringError(err).toBody();
    const key = `${event}:${body.code}`;
    if (!socket.data.loggedErrors.has(key)) {
      socket.data.loggedErrors.add(key);
      const level = body.code === 'ERR_INTERNAL' ? 'error' : 'warn';
      ctx.log[level](`socket ${socket.id} ${event}: ${body.code} ${body.message} (further ${body.code} from this socket not logged)`);
    }
    if (reply) reply({ ok: false, error: body });
    else socket.emit('server:error', body);
  };
  const answer = async () => {
    try {
      const result = await run((effect) => effects.push(effect));
      if (result instanceof LaterReply) {
        result.settled.then((later) => reply?.({ ok: true, ...later } as AckResult<T>), fail);
      } else if (reply) {
        reply({ ok: true, ...(result ?? {}) } as AckResult<T>);
      }
    } catch (err) {
      fail(err);
      return;
    }
    for (const effect of effects) {
      try {
        effect();
      } catch (err) {
        ctx.log.error(`socket ${socket.id} ${event}: an effect after the reply failed: ${String(err)}`);
      }
    }
  };
  // One socket's events run in arrival order, each to its end, as they did when rooms were
  // only in memory: a second join must see the first one's membership.
  socket.data.queue = socket.data.queue.then(answer);
}
