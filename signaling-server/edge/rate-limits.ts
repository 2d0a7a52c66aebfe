/**
 * Rate limits at the edge, so one tab cannot starve a class or the server: every socket
 * event is counted per connection, and per client address while the connection has not
 * joined as a member; every /api request per member, for the teacher, or per client
 * address when it carries neither's token (edge/http-budget.ts), with rate-limiter-flexible's
 * in-memory counters. A member's traffic never spends its address's budget: behind one
 * school NAT, one student's script slows only that student (issue 57). An address is
 * addressGroup's (rooms/seats.ts): a public IPv6 address counts by its /64, which one
 * device may fill with privacy addresses. Over the limit, the event or request is refused with ERR_RATE_LIMITED and
 * never reaches a handler, so a flood costs the server a counter lookup and leaves other
 * rooms alone.
 *
 * The budgets are generous for a real class: a worker opening links to ~7 peers sends
 * about 100 signals in its first seconds, and a school's students may all share one
 * public IP behind NAT (on a LAN each has its own).
 */
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { addressGroup } from '../rooms/seats';

export interface RateLimitOptions {
  /** Socket events one connection may send per window. */
  socketEventsPerWindow: number;
  /** Socket events all connections from one address that have not joined as members may send per window. */
  ipEventsPerWindow: number;
  /** /api requests one member, the teacher, or one address without a token may make per window. */
  httpRequestsPerWindow: number;
  windowSeconds: number;
  /**
   * Connections with a wrong join code one IP may open per badJoinCodeWindowSeconds; past
   * it, that IP is refused until the window ends, even with the right code. Generous for a
   * class of typos behind one NAT, hopeless for guessing one of 31^6 ≈ 887 million codes.
   */
  badJoinCodesPerWindow: number;
  badJoinCodeWindowSeconds: number;
  /**
   * Bytes of ring messages one connection may have the server relay per window (link:data,
   * handlers/link-relay.ts), each message counted as at least MIN_RELAY_CHARGE_BYTES. They
   * count against this budget instead of the event budget: a relayed device sends a few
   * dozen messages a step.
   */
  relayedBytesPerWindow: number;
}

/** A relayed message costs at least this much of the relay budget, so that a flood of tiny ones is a flood too. */
export const MIN_RELAY_CHARGE_BYTES = 4 * 1024;

/** What a link:data packet's payload costs the relay budget: its bytes, at least MIN_RELAY_CHARGE_BYTES (a malformed one too). */
export function relayedBytesOf(payload: unknown): number {
  const bytes = (payload as { bytes?: unknown } | null)?.bytes;
  const size = ArrayBuffer.isView(bytes) ? bytes.byteLength : 0;
  return Math.max(size, MIN_RELAY_CHARGE_BYTES);
}

export const DEFAULT_RATE_LIMITS: RateLimitOptions = {
  socketEventsPerWindow: 600,
  ipEventsPerWindow: 12_000,
  httpRequestsPerWindow: 1_200,
  windowSeconds: 5,
  badJoinCodesPerWindow: 60,
  badJoinCodeWindowSeconds: 60,
  // 160 Mbit/s for 5 s: several times what a relayed student's share of a class's all-reduce needs.
  relayedBytesPerWindow: 100 * 1024 * 1024,
};

/** Whose budget an /api request spends: a member's (room and id), the teacher's, or, without a token of either, its address's. */
export type HttpRequester = { member: string } | { teacher: true } | { address: string };

/** What a refused caller learns: when to try again. */
export interface RateLimited {
  retryAfterMs: number;
}

export class RateLimits {
  private readonly perSocket: RateLimiterMemory;
  private readonly perIpEvents: RateLimiterMemory;
  private readonly perIpHttp: RateLimiterMemory;
  private readonly perIpBadCodes: RateLimiterMemory;
  private readonly perSocketRelayed: RateLimiterMemory;

  constructor(options: RateLimitOptions = DEFAULT_RATE_LIMITS) {
    const duration = options.windowSeconds;
    this.perSocket = new RateLimiterMemory({ keyPrefix: 'socket', points: options.socketEventsPerWindow, duration });
    this.perIpEvents = new RateLimiterMemory({ keyPrefix: 'ip-events', points: options.ipEventsPerWindow, duration });
    this.perIpHttp = new RateLimiterMemory({ keyPrefix: 'ip-http', points: options.httpRequestsPerWindow, duration });
    this.perIpBadCodes = new RateLimiterMemory({ keyPrefix: 'ip-bad-code', points: options.badJoinCodesPerWindow, duration: options.badJoinCodeWindowSeconds });
    this.perSocketRelayed = new RateLimiterMemory({ keyPrefix: 'socket-relayed', points: options.relayedBytesPerWindow, duration });
  }

  /** Whether this IP has spent its wrong-join-code budget (looked up, not counted); null when not. */
  async joinCodeGuessesBlocked(ip: string): Promise<RateLimited | null> {
    const res = await this.perIpBadCodes.get(addressGroup(ip));
    return res && res.remainingPoints <= 0 ? { retryAfterMs: res.msBeforeNext } : null;
  }

  /** Counts one connection with a wrong join code from this IP. */
  async wrongJoinCode(ip: string): Promise<void> {
    await consume(this.perIpBadCodes, addressGroup(ip));
  }

  /**
   * Counts one socket event; null when allowed. A member's connection (`member`: it joined,
   * or its handshake carried a member token of its room) counts against its own budget only;
   * any other, against its address's too.
   */
  async socketEvent(socketId: string, ip: string, member = false): Promise<RateLimited | null> {
    const own = await consume(this.perSocket, socketId);
    if (own || member) return own;
    return consume(this.perIpEvents, addressGroup(ip));
  }

  /** Counts `bytes` relayed for one connection (relayedBytesOf); null when allowed. */
  relayedBytes(socketId: string, bytes: number): Promise<RateLimited | null> {
    return consume(this.perSocketRelayed, socketId, bytes);
  }

  /** Counts one /api request against its requester's budget; null when allowed. */
  httpRequest(requester: HttpRequester): Promise<RateLimited | null> {
    const key = 'member' in requester ? `member ${requester.member}` : 'teacher' in requester ? 'teacher' : `address ${addressGroup(requester.address)}`;
    return consume(this.perIpHttp, key);
  }
}

async function consume(limiter: RateLimiterMemory, key: string, points = 1): Promise<RateLimited | null> {
  try {
    await limiter.consume(key, points);
    return null;
  } catch (rejection) {
    // The library rejects with a RateLimiterRes when the budget is spent; anything else is a bug.
    if (rejection instanceof RateLimiterRes) return { retryAfterMs: rejection.msBeforeNext };
    throw rejection;
  }
}
