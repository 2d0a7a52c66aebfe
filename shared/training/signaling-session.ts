/**
 * This worker's side of the signaling connection: getting into a room (the handshake
 * carries the room and its join code), joining and rejoining, and the reports and requests
 * a training run sends the server. Reports made while the connection is down wait, the
 * latest of each kind, until the rejoin.
 */
import type { Socket } from 'socket.io-client';
import { ERROR_CODES, WebringError, toWebringError, type ErrorBody, type ErrorCode } from '../protocol/errors';
import type {
  AckResult,
  ClientToServerEvents,
  DropRequest,
  EvictRequest,
  JoinAccepted,
  JoinRequest,
  ReformRequest,
  ServerToClientEvents,
  SocketAuth,
} from '../protocol';
import type { Clock } from '../util/clock';

/** The whole join (connecting included) fails after this long. */
export const JOIN_TIMEOUT_MS = 10_000;

/**
 * How a member's socket reconnects (socket.io-client's options): a phone that thawed, or a
 * laptop back on Wi-Fi, is back within about a quarter of a second, where socket.io's
 * default first wait is a second; the wait still doubles up to 5 s and is randomized by half,
 * so a class reconnecting to a restarted server does not arrive at once.
 */
export const RECONNECT_OPTIONS = { reconnectionDelay: 250, reconnectionDelayMax: 5_000, randomizationFactor: 0.5 } as const;

/** Reports a training run sends; while disconnected, the latest of each kind waits for the rejoin. */
export type ReportEvent = 'worker:progress' | 'worker:evaluated' | 'worker:finished' | 'worker:own-examples' | 'worker:network';
export type ReportOf<E extends ReportEvent> = Parameters<ClientToServerEvents[E]>[0];

/** Who this worker is in its room, once joined. */
export interface Identity {
  room: string;
  name: string;
  code: string;
  memberId: string;
  memberToken: string;
}

/** The coded error of a handshake the server's auth middleware refused, or null for a network error. */
export function refusalOf(err: Error): ErrorBody | null {
  const data = (err as Error & { data?: unknown }).data;
  if (typeof data !== 'object' || data === null) return null;
  const { code, message } = data as Record<string, unknown>;
  return typeof code === 'string' && (ERROR_CODES as readonly string[]).includes(code) && typeof message === 'string'
    ? { code: code as ErrorCode, message }
    : null;
}

type AnyEmit = (event: string, payload: unknown) => void;

export class SignalingSession {
  private held: Identity | null = null;
  private readonly unsent = new Map<ReportEvent, unknown>();

  /** Set once joined; cleared on leaving, on being dropped, and before a fresh join. */
  get identity(): Identity | null {
    return this.held;
  }

  /**
   * Held, the member token rides in the handshake of every reconnect to its room, so a
   * lockout that wrong join codes from this address set does not keep it out (issue 38).
   */
  set identity(id: Identity | null) {
    this.held = id;
    const auth = this.socket.auth as Partial<SocketAuth> | undefined;
    if (id && auth?.room === id.room) this.socket.auth = { room: id.room, code: auth.code ?? id.code, memberToken: id.memberToken } satisfies SocketAuth;
  }

  constructor(
    readonly socket: Socket<ServerToClientEvents, ClientToServerEvents>,
    private readonly clock: Clock,
    /** Hears the ICE config of every join and rejoin; a throw fails the join with its code. */
    private readonly onIceConfig?: (ice: unknown) => void,
  ) {}

  get connected(): boolean {
    return this.socket.connected;
  }

  /**
   * Sends the join once this connection is let into `request.room` with `code`: the
   * handshake carries the room and its join code (the server's auth middleware checks
   * them), so a connection made for another room, or none yet, connects (again) first. A
   * refused handshake answers with its coded error (ERR_BAD_JOIN_CODE, ERR_RATE_LIMITED).
   * The join is emitted only once connected: emitted earlier it would sit in socket.io's
   * buffer and go out on the next successful connection, after a refusal too.
   */
  async requestJoin(request: JoinRequest, code: string): Promise<AckResult<JoinAccepted>> {
    const deadline = this.clock.now() + JOIN_TIMEOUT_MS;
    const refused = await this.connectTo(request.room, code, JOIN_TIMEOUT_MS);
    if (refused) return { ok: false, error: refused };
    return new Promise<AckResult<JoinAccepted>>((resolve, reject) => {
      const timer = this.clock.setTimeout(
        () => reject(new WebringError('ERR_TIMEOUT', `the server did not answer the join within ${JOIN_TIMEOUT_MS} ms`)),
        Math.max(0, deadline - this.clock.now()),
      );
      this.socket.emit('room:join', request, (r) => {
        this.clock.clearTimeout(timer);
        try {
          if (r.ok) this.onIceConfig?.(r.ice);
        } catch (err) {
          // A config this worker cannot use (another server version?) fails the join with its code.
          reject(toWebringError(err));
          return;
        }
        resolve(r);
      });
    });
  }

  /** Connects with `room` and `code` in the handshake; resolves null once in, or the refusal. */
  private connectTo(room: string, code: string, timeoutMs: number): Promise<ErrorBody | null> {
    const { socket } = this;
    const auth = socket.auth as Partial<SocketAuth> | undefined;
    if (socket.connected && auth?.room === room && auth.code === code) return Promise.resolve(null);
    return new Promise<ErrorBody | null>((resolve, reject) => {
      const done = () => {
        this.clock.clearTimeout(timer);
        socket.off('connect', connected);
        socket.off('connect_error', failed);
      };
      const timer = this.clock.setTimeout(() => {
        done();
        reject(new WebringError('ERR_TIMEOUT', `the classroom server could not be reached within ${timeoutMs} ms`));
      }, timeoutMs);
      const connected = () => {
        done();
        resolve(null);
      };
      const failed = (err: Error) => {
        const body = refusalOf(err);
        if (!body) return; // a network error: socket.io retries by itself, and the timer runs on
        done();
        resolve(body);
      };
      socket.on('connect', connected);
      socket.on('connect_error', failed);
      socket.disconnect();
      const token = this.held?.room === room ? { memberToken: this.held.memberToken } : {};
      socket.auth = { room, code, ...token } satisfies SocketAuth;
      socket.connect();
    });
  }

  /** Says goodbye (pagehide, SIGTERM): the ring re-forms without waiting for a timeout. */
  leave(): void {
    this.socket.emit('room:leave');
    this.identity = null;
  }

  disconnect(): void {
    this.socket.disconnect();
  }

  /** Relays a WebRTC signal to another member through the server. */
  relaySignal(to: string, linkId: string, data: Record<string, unknown>): void {
    this.socket.emit('signal:relay', { to, linkId, data });
  }

  /** Sends a report now, or keeps it (the latest of its kind) until resendUnsent(). */
  report<E extends ReportEvent>(event: E, payload: ReportOf<E>): void {
    if (this.socket.connected) (this.socket.emit as AnyEmit)(event, payload);
    else this.unsent.set(event, payload);
  }

  /** After a rejoin: the reports the server missed, or only those of `events`. */
  resendUnsent(events?: readonly ReportEvent[]): void {
    for (const [event, payload] of this.unsent) {
      if (events && !events.includes(event)) continue;
      (this.socket.emit as AnyEmit)(event, payload);
      this.unsent.delete(event);
    }
  }

  /** Before a fresh join: reports of the old membership are of no use to the server. */
  dropUnsent(): void {
    this.unsent.clear();
  }

  /** The chief asks the server to drop a straggler. */
  dropStraggler(request: DropRequest): void {
    this.socket.emit('ring:drop', request);
  }

  /** Names a member whose ring data this worker rejected; `onRefused` hears a refusal. */
  accuse(request: EvictRequest, onRefused: (error: ErrorBody) => void): void {
    this.socket.emit('ring:evict', request, (r) => {
      if (!r.ok) onRefused(r.error);
    });
  }

  /** Asks the server to re-form a ring whose links broke with nobody gone. */
  askReform(request: ReformRequest): void {
    this.socket.emit('ring:reform', request);
  }
}
