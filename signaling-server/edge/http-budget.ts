/**
 * Whose request budget an /api request spends (issue 57, defect 4): a member's own, when it
 * carries a token of a member of the room it names; the teacher's, with the teacher token;
 * its client address's only without either. Before, every request spent its address's
 * budget before the token was read, so behind one school NAT one student's script spent the
 * class's: a classmate's data read got 429. A token that is no member's of the named room
 * spends the address's budget, so made-up tokens buy nothing. Over the budget: 429
 * ERR_RATE_LIMITED with Retry-After, and nothing else runs.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { WebringError } from '../../shared/protocol/errors';
import { roomNameSchema } from '../../shared/protocol';
import type { RoomContext } from '../rooms/room-context';
import type { HttpRequester, RateLimits } from './rate-limits';
import { bearerToken, tokenHash, tokensEqual } from './tokens';

/** The room an /api path names (`/rooms/:room/…`, relative to /api), or null. */
function roomOfPath(path: string): string | null {
  const segment = /^\/rooms\/([^/]+)/.exec(path)?.[1];
  if (segment === undefined) return null;
  let name: string;
  try {
    name = decodeURIComponent(segment);
  } catch (err) {
    // Not percent-encoding: the route refuses it with 400; its budget is its address's.
    if (err instanceof URIError) return null;
    throw err;
  }
  const parsed = roomNameSchema.safeParse(name);
  return parsed.success ? parsed.data : null;
}

/** Who asks, from the headers and the path only. */
async function requesterOf(ctx: RoomContext, req: Request, teacherToken: string): Promise<HttpRequester> {
  const address = { address: req.ip ?? req.socket.remoteAddress ?? 'unknown' };
  const token = bearerToken(req.get('authorization'));
  if (token === null) return address;
  if (tokensEqual(token, teacherToken)) return { teacher: true };
  const name = roomOfPath(req.path);
  const member = name === null ? null : (await ctx.rooms.read(name))?.memberByTokenHash(tokenHash(token));
  return member ? { member: `${name}/${member.id}` } : address;
}

/** Express middleware for /api: counts the request against its requester's budget, or refuses it. */
export function countRequests(ctx: RoomContext, limits: RateLimits, teacherToken: string): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    requesterOf(ctx, req, teacherToken)
      .then((requester) => limits.httpRequest(requester))
      .then(
        (limited) => {
          if (!limited) return next();
          res.set('Retry-After', String(Math.ceil(limited.retryAfterMs / 1000)));
          next(new WebringError('ERR_RATE_LIMITED', `too many requests; try again in ${Math.ceil(limited.retryAfterMs)} ms`));
        },
        (err: unknown) => next(err),
      );
  };
}
