/**
 * signal:relay: SDP and ICE between members of one room; the server never reads them, but
 * for the relay signal, which it records: a member may relay to another only on a link the
 * other said it relays (rooms/relay-partners.ts).
 */
import { WebringError } from '../../shared/protocol/errors';
import { MAX_SIGNAL_BYTES, parseOrThrow, signalRelaySchema } from '../../shared/protocol';
import type { IoSocket } from '../rooms/room-context';
import type { ServerContext } from './context';
import { guarded } from './errors';
import { RELAY_SIGNAL } from '../../shared/network/relay-link';

/** Signals (SDP and ICE candidates, shared/network/rtc-peer.ts) are objects of strings and small objects; anything deeper is abuse. */
const MAX_SIGNAL_DEPTH = 8;

/** Whether `value` has objects or arrays nested more than `max` levels; stops looking at max. */
function nestedDeeperThan(value: unknown, max: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (max === 0) return true;
  return Object.values(value).some((v) => nestedDeeperThan(v, max - 1));
}

export function registerSignalHandlers(ctx: ServerContext, socket: IoSocket): void {
  socket.on('signal:relay', (raw: unknown, ack: unknown) => {
    guarded(ctx, socket, 'signal:relay', ack, async () => {
      const { room: name, memberId } = socket.data;
      if (!name || !memberId) throw new WebringError('ERR_NOT_IN_ROOM', 'join a room before signaling');
      const relay = parseOrThrow(signalRelaySchema, raw);
      // SDP and ICE are a level or two deep; JSON.stringify (and socket.io's encoder on the
      // relay) would overflow the stack on a deeply nested one (test/class/abuse-sockets.test.ts).
      if (nestedDeeperThan(relay.data, MAX_SIGNAL_DEPTH)) {
        throw new WebringError('ERR_BAD_REQUEST', `signal data nested deeper than ${MAX_SIGNAL_DEPTH} levels`, 'data');
      }
      if (JSON.stringify(relay.data).length > MAX_SIGNAL_BYTES) {
        throw new WebringError('ERR_PAYLOAD_TOO_LARGE', `signal larger than ${MAX_SIGNAL_BYTES} bytes`);
      }
      const target = (await ctx.rooms.read(name))?.socketIdOf(relay.to) ?? null;
      if (!target) throw new WebringError('ERR_NOT_IN_ROOM', `member ${relay.to} is not in room ${name}`);
      // Recorded before the other side hears it: that side relays as soon as it has.
      if (relay.data.type === RELAY_SIGNAL) await ctx.rooms.update(name, (r) => r.saidRelay({ from: memberId, to: relay.to, linkId: relay.linkId }));
      ctx.io.to(target).emit('signal:relay', { from: memberId, linkId: relay.linkId, data: relay.data });
      return {};
    });
  });
}
