/**
 * A file only this computer's user may read, written so that nobody else's file is touched:
 * the teacher page's link and the page that opens it carry the teacher token (issue 57: the
 * link file kept the mode it was created with, and its write followed a symlink, so a
 * classmate with a shell on the teacher's machine could point it at a file of theirs, or
 * read it from an old world-readable copy).
 */
import { constants } from 'node:fs';
import { lstat, open, rename, unlink } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { WebringError } from '../shared/protocol/errors';

/** Read and write for the owner only. */
export const PRIVATE_FILE_MODE = 0o600;
// Windows has no O_NOFOLLOW (nor symlinks a user makes without rights); elsewhere the open refuses one.
const NO_FOLLOW = constants.O_NOFOLLOW ?? 0;

/**
 * Writes `text` to `file` with mode 0600 every time: into a fresh file beside it (created
 * exclusively, never through a symlink, chmod-ed after the open since umask may narrow but
 * an existing file would keep its mode), then renamed over `file`, so a reader never sees
 * half a file and the old one, whatever its mode, is gone. Throws ERR_BAD_STATE when `file`
 * is a symlink: something put it there, and its target is left alone.
 */
export async function writePrivateFile(file: string, text: string): Promise<void> {
  const existing = await lstat(file).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (existing?.isSymbolicLink()) throw new WebringError('ERR_BAD_STATE', `${file} is a symbolic link; it is left alone (remove it, and the teacher link is written there again)`);
  const temp = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | NO_FOLLOW, PRIVATE_FILE_MODE);
  try {
    await handle.chmod(PRIVATE_FILE_MODE);
    await handle.writeFile(text);
  } catch (err) {
    await handle.close();
    await unlink(temp);
    throw err;
  }
  await handle.close();
  // rename() replaces the name itself, never what a link at it points to.
  await rename(temp, file);
}
