/**
 * ICE configuration for the workers, with short-lived TURN credentials in coturn's
 * `use-auth-secret` scheme (the "TURN REST API", draft-uberti-behave-turn-rest-00): the
 * server and coturn share one secret; a credential is
 *
 *   username   = "<unix expiry, s>:<member id>"
 *   credential = base64(HMAC-SHA1(secret, username))
 *
 * coturn recomputes the HMAC and refuses a username whose expiry has passed, so nothing is
 * stored per student, a leaked credential dies on its own, and the member id in the
 * username shows up in coturn's log next to the allocation.
 *
 * Environment: TURN_URL (comma-separated turn:/turns: URIs), TURN_SECRET (coturn's
 * static-auth-secret), TURN_TTL_S (credential lifetime, default 6 h), ICE_TRANSPORT_POLICY
 * (all | relay, default all).
 */
import { createHmac } from 'node:crypto';
import { ICE_TRANSPORT_POLICIES, iceConfigSchema, type IceConfig, type IceTransportPolicy } from '../../shared/protocol';

/**
 * Long enough for a double lesson and the breaks around it, short enough that a credential
 * copied out of a tab is useless by the next day. A worker asks for fresh ones before it
 * dials with credentials that are close to expiry (shared/ice-config.ts).
 */
export const DEFAULT_TURN_TTL_S = 6 * 60 * 60;
/** A credential that outlives a week is a standing password, not a short-lived one. */
export const MAX_TURN_TTL_S = 7 * 24 * 60 * 60;
/** Shorter than a dial plus a refresh round trip would expire while in use. */
const MIN_TURN_TTL_S = 60;
/**
 * Anyone who sees one username/credential pair can test guesses of the secret offline, so a
 * short one is refused (`openssl rand -hex 32` gives a good one).
 */
const MIN_TURN_SECRET_CHARS = 16;

/** turn:host[:port][?transport=udp|tcp], turns: likewise (RFC 7065); IPv6 hosts in brackets. */
const TURN_URI = /^turns?:(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::(\d{1,5}))?(\?transport=(?:udp|tcp))?$/;

export interface TurnOptions {
  urls: string[];
  secret: string;
  ttlS: number;
}

export interface IceOptions {
  /** null: no TURN, peers use host candidates only (one LAN). */
  turn: TurnOptions | null;
  policy: IceTransportPolicy;
}

export const NO_TURN: IceOptions = { turn: null, policy: 'all' };

/** A bad TURN setting, refused at start-up (server-side only, like TlsError). */
export class TurnConfigError extends Error {
  readonly code = 'ERR_TURN_CONFIG' as const;
  constructor(message: string) {
    super(message);
    this.name = 'TurnConfigError';
  }
}

/** Reads and checks TURN_URL, TURN_SECRET, TURN_TTL_S and ICE_TRANSPORT_POLICY; throws TurnConfigError. */
export function iceOptionsFromEnv(env: Record<string, string | undefined>): IceOptions {
  const rawUrls = env.TURN_URL?.trim() ?? '';
  const secret = env.TURN_SECRET ?? '';
  const rawTtl = env.TURN_TTL_S ?? '';
  const rawPolicy = env.ICE_TRANSPORT_POLICY?.trim() ?? '';

  let policy: IceTransportPolicy = 'all';
  if (rawPolicy !== '') {
    if (!(ICE_TRANSPORT_POLICIES as readonly string[]).includes(rawPolicy)) {
      throw new TurnConfigError(`ICE_TRANSPORT_POLICY must be one of ${ICE_TRANSPORT_POLICIES.join(', ')}, got ${JSON.stringify(rawPolicy)}`);
    }
    policy = rawPolicy as IceTransportPolicy;
  }

  if (rawUrls === '') {
    if (secret !== '') throw new TurnConfigError('TURN_SECRET is set but TURN_URL is not: set both (or neither)');
    if (rawTtl !== '') throw new TurnConfigError('TURN_TTL_S is set but TURN_URL is not');
    // Relay-only without a relay would leave every link without a single candidate.
    if (policy === 'relay') throw new TurnConfigError('ICE_TRANSPORT_POLICY=relay needs a TURN server: set TURN_URL and TURN_SECRET');
    return { turn: null, policy };
  }

  const urls = rawUrls.split(',').map((u) => u.trim());
  for (const url of urls) {
    const match = TURN_URI.exec(url);
    if (!match) {
      throw new TurnConfigError(`TURN_URL: ${JSON.stringify(url)} is not a turn: or turns: URI (e.g. turn:turn.school.example:3478?transport=udp, turns:turn.school.example:443?transport=tcp)`);
    }
    const port = match[2] === undefined ? null : Number(match[2]);
    if (port !== null && (port < 1 || port > 65_535)) throw new TurnConfigError(`TURN_URL: ${url}: port ${port} is out of range`);
  }
  if (urls.length > 8) throw new TurnConfigError(`TURN_URL: at most 8 URIs, got ${urls.length}`);

  if (secret === '') throw new TurnConfigError("TURN_URL is set but TURN_SECRET is not: set it to coturn's static-auth-secret");
  if (secret.length < MIN_TURN_SECRET_CHARS) {
    throw new TurnConfigError(`TURN_SECRET must be at least ${MIN_TURN_SECRET_CHARS} characters (try: openssl rand -hex 32)`);
  }

  let ttlS = DEFAULT_TURN_TTL_S;
  if (rawTtl !== '') {
    ttlS = Number(rawTtl);
    if (!Number.isInteger(ttlS) || ttlS < MIN_TURN_TTL_S || ttlS > MAX_TURN_TTL_S) {
      throw new TurnConfigError(`TURN_TTL_S must be a whole number of seconds from ${MIN_TURN_TTL_S} to ${MAX_TURN_TTL_S}, got ${JSON.stringify(rawTtl)}`);
    }
  }
  return { turn: { urls, secret, ttlS }, policy };
}

/** The coturn use-auth-secret credential for `username`: base64(HMAC-SHA1(secret, username)). */
export function turnCredential(secret: string, username: string): string {
  return createHmac('sha1', secret).update(username).digest('base64');
}

/** A username/credential pair for `id`, valid `ttlS` seconds from `nowMs`. */
export function restCredentials(secret: string, ttlS: number, id: string, nowMs: number): { username: string; credential: string; expiresAtS: number } {
  // coturn compares the username's timestamp with its own clock, in whole seconds.
  const expiresAtS = Math.floor(nowMs / 1000) + ttlS;
  const username = `${expiresAtS}:${id}`;
  return { username, credential: turnCredential(secret, username), expiresAtS };
}

/** The ICE configuration for one member, with TURN credentials made for it alone. */
export function iceConfigFor(options: IceOptions, id: string, nowMs = Date.now()): IceConfig {
  if (!options.turn) return { iceServers: [], iceTransportPolicy: options.policy, expiresAt: null };
  const { username, credential, expiresAtS } = restCredentials(options.turn.secret, options.turn.ttlS, id, nowMs);
  // Checked against the one protocol, so the server can never hand out what a worker refuses.
  return iceConfigSchema.parse({
    iceServers: [{ urls: options.turn.urls, username, credential }],
    iceTransportPolicy: options.policy,
    expiresAt: expiresAtS * 1000,
  });
}

/** One line for the start-up banner. */
export function describeIce(options: IceOptions): string {
  if (!options.turn) return 'ICE: no TURN server (TURN_URL unset); peers connect directly on the LAN';
  const hours = (options.turn.ttlS / 3600).toFixed(options.turn.ttlS % 3600 === 0 ? 0 : 1);
  return `ICE: TURN ${options.turn.urls.join(', ')}; credentials valid ${hours} h; ${options.policy === 'relay' ? 'every link relayed (ICE_TRANSPORT_POLICY=relay)' : 'direct links where possible, TURN otherwise'}`;
}
