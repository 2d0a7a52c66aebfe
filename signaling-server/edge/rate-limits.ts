/**
 * Rate limits at the edge, so one tab cannot starve a class or the server: every socket
 * event is counted per connection and per client IP, every /api request per client IP,
 * with rate-limiter-flexible's in-memory counters. Over the limit, the event or request is refused with ERR_RATE_LIMITED and
 * never reaches a handler, so a flood costs the server a counter lookup and leaves other
 * rooms alone.
 *
 * The budgets are generous for a real class: a worker opening links to ~7 peers sends
 * about 100 signals in its first seconds, and a school's students may all share one
 * public IP behind NAT (on a LAN each has its own).
 */
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';

export interface RateLimitOptions {
  /** Socket events one connection may send per window. */
  socketEventsPerWindow: number;
  /** Socket events all connections from one IP may send per window. */
  ipEventsPerWindow: number;
  /** /api requests one IP may make per window. */
  httpRequestsPerWindow: number;
  windowSeconds: number;
  /**
   * Connections with a wrong join code one IP may open per badJoinCodeWindowSeconds; past
   * it, that IP is refused until the window ends, even with the right code. Generous for a
   * class of typos behind one NAT, hopeless for guessing one of 31^6 ≈ 887 million codes.
   */
  badJoinCodesPerWindow: number;
  badJoinCodeWindowSeconds: number;
}

export const DEFAULT_RATE_LIMITS: RateLimitOptions = {
  socketEventsPerWindow: 600,
  ipEventsPerWindow: 12_000,
  httpRequestsPerWindow: 1_200,
  windowSeconds: 5,
  badJoinCodesPerWindow: 60,
  badJoinCodeWindowSeconds: 60,
};

/** What a refused caller learns: when to try again. */
export interface RateLimited {
  retryAfterMs: number;
}

export class RateLimits {
  private readonly perSocket: RateLimiterMemory;
  private readonly perIpEvents: RateLimiterMemory;
  private readonly perIpHttp: RateLimiterMemory;
  private readonly perIpBadCodes: RateLimiterMemory;

  constructor(options: RateLimitOptions = DEFAULT_RATE_LIMITS) {
    const duration = options.windowSeconds;
    this.perSocket = new RateLimiterMemory({ keyPrefix: 'socket', points: options.socketEventsPerWindow, duration });
    this.perIpEvents = new RateLimiterMemory({ keyPrefix: 'ip-events', points: options.ipEventsPerWindow, duration });
    this.perIpHttp = new RateLimiterMemory({ keyPrefix: 'ip-http', points: options.httpRequestsPerWindow, duration });
    this.perIpBadCodes = new RateLimiterMemory({ keyPrefix: 'ip-bad-code', points: options.badJoinCodesPerWindow, duration: options.badJoinCodeWindowSeconds });
  }

  /** Whether this IP has spent its wrong-join-code budget (looked up, not counted); null when not. */
  async joinCodeGuessesBlocked(ip: string): Promise<RateLimited | null> {
    const res = await this.perIpBadCodes.get(ip);
    return res && res.remainingPoints <= 0 ? { retryAfterMs: res.msBeforeNext } : null;
  }

  /** Counts one connection with a wrong join code from this IP. */
  async wrongJoinCode(ip: string): Promise<void> {
    await consume(this.perIpBadCodes, ip);
  }

  /** Counts one socket event; null when allowed. */
  async socketEvent(socketId: string, ip: string): Promise<RateLimited | null> {
    return (await consume(this.perSocket, socketId)) ?? (await consume(this.perIpEvents, ip));
  }

  /** Counts one /api request; null when allowed. */
  httpRequest(ip: string): Promise<RateLimited | null> {
    return consume(this.perIpHttp, ip);
  }
}

async function consume(limiter: RateLimiterMemory, key: string): Promise<RateLimited | null> {
  try {
    await limiter.consume(key);
    return null;
  } catch (rejection) {
    // The library rejects with a RateLimiterRes when the budget is spent; anything else is a bug.
    if (rejection instanceof RateLimiterRes) return { retryAfterMs: rejection.msBeforeNext };
    throw rejection;
  }
}
