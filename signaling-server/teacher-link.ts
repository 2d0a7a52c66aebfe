/**
 * The teacher page's link carries the teacher token, which starts, stops and deletes runs.
 * The terminal that prints the class's QR code is often the one on the projector, so the
 * banner never prints that link: `npm start` opens it in this computer's browser, and keeps
 * it in a file only this computer's user reads, for a second device or a new tab.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

/** The file in DATA_DIR that holds the teacher page's link (mode 0600). */
export const TEACHER_LINK_FILE = 'teacher-link.txt';

/** Writes the teacher page's link to DATA_DIR/TEACHER_LINK_FILE, readable by this user only; returns the file's path. */
export async function saveTeacherLink(dataDir: string, link: string): Promise<string> {
  const file = path.join(dataDir, TEACHER_LINK_FILE);
  await writeFile(file, `${link}\n`, { mode: 0o600 });
  return file;
}

/**
 * Whether to open the teacher page in a browser: OPEN_TEACHER_PAGE=1 or 0 decides; unset,
 * only on a terminal of a desktop (a TTY, and on Linux a display), never in a test or a service.
 */
export function shouldOpenBrowser(env: NodeJS.ProcessEnv, isTty: boolean, platform: NodeJS.Platform = process.platform): boolean {
  const raw = env.OPEN_TEACHER_PAGE;
  if (raw === '1' || raw === 'true') return true;
  if (raw === '0' || raw === 'false') return false;
  if (!isTty) return false;
  return platform === 'darwin' || platform === 'win32' || Boolean(env.DISPLAY || env.WAYLAND_DISPLAY);
}

/** The command that opens `url` in the desktop's default browser on `platform`. */
export function browserCommand(url: string, platform: NodeJS.Platform = process.platform): { command: string; args: string[] } {
  if (platform === 'darwin') return { command: 'open', args: [url] };
  // start's first quoted argument is a window title; the URL goes after it.
  if (platform === 'win32') return { command: 'cmd', args: ['/c', 'start', '""', url.replace(/&/g, '^&')] };
  return { command: 'xdg-open', args: [url] };
}

/** Opens `url` in the default browser, detached; says why not when the opener is missing or fails. */
export function openInBrowser(url: string, warn: (message: string) => void): void {
  const { command, args } = browserCommand(url);
  const child = spawn(command, args, { detached: true, stdio: 'ignore' });
  child.on('error', (err) => warn(`could not open the teacher page with ${command} (${err.message}); its link is in the file the banner names`));
  child.unref();
}
