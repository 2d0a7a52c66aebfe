/**
 * Join codes ("K7M-Q2P"): what a student needs, typed or carried by the class link, to join
 * a room. Easy to read off a projector and to type: six characters from an alphabet without
 * look-alikes (no 0/O, 1/I/L), case-insensitive, the dash optional. The server derives each
 * room's code (signaling-server/join-codes.ts); this half is what the page and the socket
 * handshake share.
 */
import { z } from 'zod';

export const JOIN_CODE_ALPHABET = '23456789ABCDEFGHJKMNPQRSTUVWXYZ';
export const JOIN_CODE_CHARS = 6;
const CANONICAL_PATTERN = /^[2-9A-HJKMNP-Z]{3}-[2-9A-HJKMNP-Z]{3}$/;

export function isCanonicalJoinCode(code: string): boolean {
  return CANONICAL_PATTERN.test(code);
}

/**
 * What the student typed, as the code's canonical form ("k7m q2p" → "K7M-Q2P"), or null when
 * it cannot be a join code. Spaces and dashes anywhere are ignored.
 */
export function normalizeJoinCode(typed: string): string | null {
  const chars = typed.toUpperCase().replace(/[\s-]/g, '');
  if (chars.length !== JOIN_CODE_CHARS) return null;
  const code = `${chars.slice(0, 3)}-${chars.slice(3)}`;
  return isCanonicalJoinCode(code) ? code : null;
}

/** Typed input up to this long is looked at; anything longer is refused before normalizing. */
const JOIN_CODE_INPUT_MAX_CHARS = 32;

/** A join code as typed, validated and made canonical. */
export const joinCodeSchema = z
  .string()
  .max(JOIN_CODE_INPUT_MAX_CHARS)
  .transform((typed, ctx) => {
    const code = normalizeJoinCode(typed);
    if (code === null) {
      ctx.addIssue({ code: 'custom', message: `a join code is ${JOIN_CODE_CHARS} letters and digits, like K7M-Q2P` });
      return z.NEVER;
    }
    return code;
  });
