/**
 * Short join codes for the default room ("K7M-Q2P"): easy to read off a projector and to
 * type, from an alphabet without look-alikes (no 0/O, 1/I/L), and valid room names.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';

export const ROOM_CODE_ALPHABET = '23456789ABCDEFGHJKMNPQRSTUVWXYZ';
const ROOM_CODE_PATTERN = /^[2-9A-HJKMNP-Z]{3}-[2-9A-HJKMNP-Z]{3}$/;
/** DATA_DIR/<this>: the default room's code, so a restarted server keeps the printed URLs valid. */
export const ROOM_CODE_FILE = 'room-code.txt';

export function isRoomCode(name: string): boolean {
  return ROOM_CODE_PATTERN.test(name);
}

/** Six characters of ROOM_CODE_ALPHABET with a dash in the middle; unbiased (rejection sampling). */
export function generateRoomCode(random: (n: number) => Uint8Array = randomBytes): string {
  const limit = 256 - (256 % ROOM_CODE_ALPHABET.length);
  const chars: string[] = [];
  while (chars.length < 6) {
    for (const byte of random(16)) {
      if (byte < limit && chars.length < 6) chars.push(ROOM_CODE_ALPHABET[byte % ROOM_CODE_ALPHABET.length]!);
    }
  }
  return `${chars.slice(0, 3).join('')}-${chars.slice(3).join('')}`;
}

/**
 * Students may type the code in lower case: a name that upper-cases to `code` is that room.
 * Only the generated code is folded, so rooms the teacher named stay case-sensitive as before.
 */
export function canonicalRoomName(name: string, code: string | null): string {
  return code !== null && name !== code && name.toUpperCase() === code ? code : name;
}

/** The code kept in DATA_DIR, or a new one written there (atomically) on first start. */
export async function loadOrCreateRoomCode(dataDir: string): Promise<string> {
  const file = path.join(dataDir, ROOM_CODE_FILE);
  try {
    const saved = (await fs.readFile(file, 'utf8')).trim();
    if (isRoomCode(saved)) return saved;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const code = generateRoomCode();
  await fs.mkdir(dataDir, { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, `${code}\n`);
  await fs.rename(tmp, file);
  return code;
}

/** `/api/rooms/<name>/…` with the name made canonical (see canonicalRoomName). */
export function canonicalRoomPath(url: string, code: string | null): string {
  const match = /^\/api\/rooms\/([^/?#]+)/.exec(url);
  if (!match) return url;
  const name = canonicalRoomName(match[1]!, code);
  return name === match[1] ? url : `/api/rooms/${name}${url.slice(match[0].length)}`;
}
