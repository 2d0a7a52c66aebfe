/**
 * Connections and handshakes per client address, before the join code is even read (issue
 * 38: nothing bounded how many sockets one address held, or how fast it opened them). The
 * caps follow where the address is, like the seats (rooms/seats.ts): none for the server's
 * own machine (the teacher's hub, Node workers, tests); a device's worth on the class network,
 * where each device has an address of its own; a school's worth for a public address, which
 * may be a whole school behind one NAT. Past a cap the handshake is refused with
 * ERR_RATE_LIMITED, and the sockets already open are untouched.
 */
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { WebringError } from '../../shared/protocol/errors';
import { addressGroup, addressScope, type AddressScope } from '../rooms/seats';

/**
 * Live connections one address may hold: on the class network a room's worth and some (a
 * lab PC running Node workers for a room whose teacher lifted its seat cap); behind a
 * school's NAT, sixteen full rooms.
 */
export const MAX_CONNECTIONS: Readonly<Record<Exclude<AddressScope, 'loopback'>, number>> = { lan: 48, public: 512 };
/** Handshakes one address may make per HANDSHAKE_WINDOW_SECONDS: every seat of a room reconnecting at once, twice over. */
export const MAX_HANDSHAKES: Readonly<Record<Exclude<AddressScope, 'loopback'>, number>> = { lan: 64, public: 640 };
export const HANDSHAKE_WINDOW_SECONDS = 10;

export class ConnectionCaps {
  private readonly live = new Map<string, number>();
  private readonly handshakes: Record<Exclude<AddressScope, 'loopback'>, RateLimiterMemory> = {
    lan: new RateLimiterMemory({ keyPrefix: 'handshakes-lan', points: MAX_HANDSHAKES.lan, duration: HANDSHAKE_WINDOW_SECONDS }),
    public: new RateLimiterMemory({ keyPrefix: 'handshakes-public', points: MAX_HANDSHAKES.public, duration: HANDSHAKE_WINDOW_SECONDS }),
  };

  /** Counts a handshake from `address`; throws ERR_RATE_LIMITED past either cap. */
  async admit(client: string): Promise<void> {
    const scope = addressScope(client);
    if (scope === 'loopback') return;
    const address = addressGroup(client);
    const open = this.live.get(address) ?? 0;
    if (open >= MAX_CONNECTIONS[scope]) {
      throw new WebringError('ERR_RATE_LIMITED', `this address holds ${open} connections to the server already, as many as one may`);
    }
    try {
      await this.handshakes[scope].consume(address);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      throw new WebringError('ERR_RATE_LIMITED', `too many connections opened from this address; try again in ${Math.ceil(rejection.msBeforeNext / 1000)} s`);
    }
  }

  /** A connection from `client` is up. */
  opened(client: string): void {
    const address = addressGroup(client);
    this.live.set(address, (this.live.get(address) ?? 0) + 1);
  }

  /** A connection from `client` closed. */
  closed(client: string): void {
    const address = addressGroup(client);
    const left = (this.live.get(address) ?? 1) - 1;
    if (left > 0) this.live.set(address, left);
    else this.live.delete(address);
  }
}
