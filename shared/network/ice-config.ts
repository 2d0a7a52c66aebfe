/**
 * A worker's current ICE configuration (TURN servers, credentials, transport policy), for
 * the browser and the Node worker alike. The server sends one with every join and rejoin;
 * the peer factory reads it at every dial, so a link opened late in a long lesson asks for
 * fresh TURN credentials before the old ones lapse.
 */
import { toWebringError, WebringError } from '../protocol/errors';
import { DIRECT_ICE_CONFIG, iceConfigSchema, parseOrThrow, type AckResult, type IceConfig } from '../protocol';

/**
 * Ask for new credentials once the current ones have less than this left: an ICE restart
 * or TURN refresh on a link dialled now must still find them valid.
 */
export const ICE_REFRESH_MARGIN_MS = 30 * 60_000;
/** How long an `ice:config` request may take before the worker gives up on it (and keeps the old config). */
export const ICE_REQUEST_TIMEOUT_MS = 10_000;

export interface IceConfigHolderOptions {
  /** Asks the server for a fresh config (the `ice:config` event). */
  request(): Promise<AckResult<{ ice: IceConfig }>>;
  log(message: string): void;
  now?(): number;
}

export class IceConfigHolder {
  private config: IceConfig = DIRECT_ICE_CONFIG;
  private refreshing: Promise<void> | null = null;
  private readonly now: () => number;

  constructor(private readonly options: IceConfigHolderOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Takes a config from the server; it is validated here, at the edge, like any message. */
  update(raw: unknown): void {
    this.config = parseOrThrow(iceConfigSchema, raw);
  }

  get current(): IceConfig {
    return this.config;
  }

  /** What the next RTCPeerConnection gets; starts a refresh in the background when expiry is near. */
  rtcConfiguration(): RTCConfiguration {
    const { expiresAt } = this.config;
    if (expiresAt !== null && expiresAt - this.now() < ICE_REFRESH_MARGIN_MS) void this.refresh();
    return { iceServers: this.config.iceServers, iceTransportPolicy: this.config.iceTransportPolicy };
  }

  /** Fetches fresh credentials once at a time; a failure is logged and the old config stays. */
  refresh(): Promise<void> {
    this.refreshing ??= this.options
      .request()
      .then((result) => {
        if (!result.ok) throw new WebringError(result.error.code, result.error.message);
        this.update(result.ice);
        this.options.log(`TURN credentials renewed until ${new Date(this.config.expiresAt ?? 0).toISOString()}`);
      })
      .catch((err: unknown) => {
        const e = toWebringError(err);
        this.options.log(`could not renew TURN credentials (${e.code}: ${e.message}); keeping the current ones`);
      })
      .finally(() => {
        this.refreshing = null;
      });
    return this.refreshing;
  }
}
