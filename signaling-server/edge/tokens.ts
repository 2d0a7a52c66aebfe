import { createHash, timingSafeEqual } from 'node:crypto';

/** Tokens are kept only as sha256 digests; equal-length digests compare in constant time. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export function tokensEqual(a: string, b: string): boolean {
  return timingSafeEqual(Buffer.from(tokenHash(a), 'hex'), Buffer.from(tokenHash(b), 'hex'));
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(header: string | undefined): string | null {
  const match = /^Bearer (.+)$/.exec(header ?? '');
  return match ? match[1]! : null;
}
