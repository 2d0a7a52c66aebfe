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

  /** Counts `bytes` relayed for one connection (relayedBytesOf); null when allowed. */
  relayedBytes(socketId: string, bytes: number): Promise<RateLimited | null> {
    return consume(this.perSocketRelayed, socketId, bytes);
  }

  /** Counts one /api request; null when allowed. */
  httpRequest(ip: string): Promise<RateLimited | null> {
    return consume(this.perIpHttp, ip);
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
