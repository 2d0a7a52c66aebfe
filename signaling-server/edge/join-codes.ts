/**
 * Each room's join code is HMAC-SHA256(secret, room name), spelled in the join-code
 * alphabet. Nothing per room is stored, so every signaling node that shares the secret
 * agrees on every room's code (several nodes), a restart keeps printed links
 * valid, and a room name alone (printed on the dashboard, in the API) gives no way in.
 *
 * The secret is JOIN_SECRET, or a random one kept in DATA_DIR (made on first start, mode
 * 0600), so nodes on a shared DATA_DIR agree without configuration. Changing it changes
 * every room's code.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { JOIN_CODE_ALPHABET, JOIN_CODE_CHARS } from '../../shared/protocol/join-code';

/** DATA_DIR/<this>: the generated secret, hex. */
export const JOIN_SECRET_FILE = 'join-secret.key';
const JOIN_SECRET_BYTES = 32;
/** Domain separation: the same secret must never yield the same MAC for another purpose. */
const JOIN_CODE_CONTEXT = 'webring join code v1\0';
/** The hub key's own label: a join code reveals nothing about the hub key, nor the other way round. */
const HUB_KEY_CONTEXT = 'webring hub key v1\0';

/**
 * The room's code. Bytes of the MAC map to characters by rejection sampling (bytes at or
 * above the largest multiple of the alphabet's size are skipped), so every code is equally
 * likely; a 32-byte MAC nearly always has the 6 usable bytes, and a counter extends it.
 */
export function joinCodeFor(secret: Buffer, room: string): string {
  const limit = 256 - (256 % JOIN_CODE_ALPHABET.length);
  const chars: string[] = [];
  for (let block = 0; chars.length < JOIN_CODE_CHARS; block++) {
    const mac = createHmac('sha256', secret).update(`${JOIN_CODE_CONTEXT}${block}\0${room}`).digest();
    for (const byte of mac) {
      if (byte < limit && chars.length < JOIN_CODE_CHARS) chars.push(JOIN_CODE_ALPHABET[byte % JOIN_CODE_ALPHABET.length]!);
    }
  }
  return `${chars.slice(0, 3).join('')}-${chars.slice(3).join('')}`;
}

/** Whether `code` (canonical) opens `room`, compared in constant time. */
export function joinCodeMatches(secret: Buffer, room: string, code: string): boolean {
  const expected = Buffer.from(joinCodeFor(secret, room));
  const given = Buffer.from(code);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * The room's hub key: HMAC-SHA256(secret, label, room), hex. A `kind: 'hub'` join must carry
 * it, so only the teacher's server (which hands it to the hub it supervises, and to the
 * teacher) makes hubs; nodes sharing the secret agree on it, and nothing is stored.
 */
export function hubKeyFor(secret: Buffer, room: string): string {
  return createHmac('sha256', secret).update(`${HUB_KEY_CONTEXT}${room}`).digest('hex');
}

/** Whether `key` is `room`'s hub key, compared in constant time. */
export function hubKeyMatches(secret: Buffer, room: string, key: string): boolean {
  const expected = Buffer.from(hubKeyFor(secret, room));
  const given = Buffer.from(key);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Too short a JOIN_SECRET would let codes be computed by guessing it. */
const JOIN_SECRET_MIN_CHARS = 16;

/** JOIN_SECRET when set, else the secret kept in DATA_DIR, made (atomically) on first start. */
export async function loadOrCreateJoinSecret(dataDir: string, fromEnv?: string): Promise<Buffer> {
  if (fromEnv !== undefined && fromEnv !== '') {
    if (fromEnv.length < JOIN_SECRET_MIN_CHARS) throw new RangeError(`JOIN_SECRET must have at least ${JOIN_SECRET_MIN_CHARS} characters`);
    return Buffer.from(fromEnv, 'utf8');
  }
  const file = path.join(dataDir, JOIN_SECRET_FILE);
  try {
    const saved = (await fs.readFile(file, 'utf8')).trim();
    if (/^[0-9a-f]{64}$/.test(saved)) return Buffer.from(saved, 'hex');
    throw new RangeError(`${file} does not hold a ${JOIN_SECRET_BYTES}-byte hex secret; delete it to make a new one (every room's code changes)`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const secret = randomBytes(JOIN_SECRET_BYTES);
  await fs.mkdir(dataDir, { recursive: true });
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  await fs.writeFile(tmp, `${secret.toString('hex')}\n`, { mode: 0o600 });
  try {
    // Two nodes starting at once on a shared DATA_DIR: the first link wins, the other reads it.
    await fs.link(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    await fs.unlink(tmp);
    return loadOrCreateJoinSecret(dataDir);
  }
  await fs.unlink(tmp);
  return secret;
}
