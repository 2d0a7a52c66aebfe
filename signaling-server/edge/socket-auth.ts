/**
 * socket.io auth middleware (io.use): every connection names its room and that room's join
 * code in the handshake's `auth`. Without the right code the connection is refused before
 * any event is handled; the client's connect_error carries `data: { code, message }`, which
 * the student page puts in plain words.
 */
import type { ExtendedError } from 'socket.io';
import { WebringError } from '../../shared/protocol/errors';
import { parseOrThrow, socketAuthSchema } from '../../shared/protocol';
import type { IoSocket, Logger } from '../rooms/room-context';
import { joinCodeMatches } from './join-codes';
import type { RateLimits } from './rate-limits';
import type { ConnectionCaps } from './connection-caps';

export interface SocketAuthOptions {
  joinSecret: Buffer;
  limits: RateLimits;
  log: Logger;
  /** Whether `token` is a member's of `room`, or was lately: its reconnects pass the lockout (below). */
  holdsSeat(room: string, token: string): Promise<boolean>;
  /** Connections and handshakes per address (connection-caps.ts), checked first. */
  caps: ConnectionCaps;
}

/**
 * Resolves when the connection may go on (socket.data.authorizedRoom is set): true when its
 * handshake carried a member token of the room (a member coming back, whose events then spend
 * its own budget, not its address's: rate-limits.ts). Rejects with a coded error.
 */
export async function authenticateSocket(socket: IoSocket, options: SocketAuthOptions): Promise<boolean> {
  const ip = socket.data.address;
  try {
    await options.caps.admit(ip);
    let auth;
    try {
      auth = parseOrThrow(socketAuthSchema, socket.handshake.auth);
    } catch (err) {
      throw new WebringError('ERR_BAD_JOIN_CODE', `a room and its join code are needed to connect (${(err as WebringError).message})`, (err as WebringError).field);
    }
    // Wrong codes lock their address out, school NAT and all; a member holding its token
    // (unguessable, and only the server hands it out) reconnects through the lock (issue 38).
    const holdsSeat = auth.memberToken !== undefined && (await options.holdsSeat(auth.room, auth.memberToken));
    const blocked = await options.limits.joinCodeGuessesBlocked(ip);
    if (blocked && !holdsSeat) {
      throw new WebringError('ERR_RATE_LIMITED', `too many wrong join codes from this address; try again in ${Math.ceil(blocked.retryAfterMs / 1000)} s`);
    }
    if (!joinCodeMatches(options.joinSecret, auth.room, auth.code)) {
      await options.limits.wrongJoinCode(ip);
      options.log.warn(`connection from ${ip} refused: wrong join code for room ${auth.room}`);
      throw new WebringError('ERR_BAD_JOIN_CODE', `that join code does not open room ${auth.room}`, 'code');
    }
    socket.data.authorizedRoom = auth.room;
    return holdsSeat;
  } catch (err) {
    if (!(err instanceof WebringError)) throw err;
    const refused: ExtendedError = new Error(err.message);
    refused.data = err.toBody();
    throw refused;
  }
}
