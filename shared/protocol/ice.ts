/** ICE configuration on the wire (part of the one protocol; index.ts re-exports it). */
import { z } from 'zod';

// ---------------------------------------------------------------------------
// ICE configuration: STUN and TURN servers, with short-lived TURN credentials
// ---------------------------------------------------------------------------
/** 'relay' makes every link go through TURN (RTCConfiguration.iceTransportPolicy). */
export const ICE_TRANSPORT_POLICIES = ['all', 'relay'] as const;
export type IceTransportPolicy = (typeof ICE_TRANSPORT_POLICIES)[number];
/** stun:, turn: and turns: URIs (RFC 7064, RFC 7065), one per entry, as RTCIceServer.urls takes them. */
export const ICE_URL_PATTERN = /^(stun|turns?):[^\s,]+$/;
export const MAX_ICE_SERVERS = 4;
export const MAX_ICE_URLS_PER_SERVER = 8;
const ICE_FIELD_MAX_CHARS = 256;

export const iceServerSchema = z.strictObject({
  urls: z.array(z.string().max(ICE_FIELD_MAX_CHARS).regex(ICE_URL_PATTERN)).min(1).max(MAX_ICE_URLS_PER_SERVER),
  /** TURN REST scheme (coturn use-auth-secret): "<unix expiry s>:<member id>". */
  username: z.string().max(ICE_FIELD_MAX_CHARS).optional(),
  /** base64(HMAC-SHA1(secret, username)). */
  credential: z.string().max(ICE_FIELD_MAX_CHARS).optional(),
});

/**
 * What every worker's peer connections use: the server hands it out with each join and on
 * `ice:config`, with TURN credentials made for that member alone.
 */
export const iceConfigSchema = z.strictObject({
  iceServers: z.array(iceServerSchema).max(MAX_ICE_SERVERS),
  iceTransportPolicy: z.enum(ICE_TRANSPORT_POLICIES),
  /** When the TURN credentials stop working (ms since the epoch); null when there are none. */
  expiresAt: z.number().int().min(0).nullable(),
});
export type IceConfig = z.output<typeof iceConfigSchema>;

/** No ICE servers: tabs on one LAN reach each other through host candidates. */
export const DIRECT_ICE_CONFIG: IceConfig = { iceServers: [], iceTransportPolicy: 'all', expiresAt: null };

