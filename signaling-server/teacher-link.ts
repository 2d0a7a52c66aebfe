/**
 * The teacher page's link carries the teacher token, which starts, stops and deletes runs.
 * The terminal that prints the class's QR code is often the one on the projector, so the
 * banner never prints that link: `npm start` opens it in this computer's browser, and keeps
 * it in a file only this computer's user reads, for a second device or a new tab. The
 * browser is opened on a local page that forwards to the link, never on the link itself: a
 * command's arguments are visible to every user of the machine (ps, /proc), a file of mode
 * 0600 is not (issue 57).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { writePrivateFile } from './private-file';

/** The file in DATA_DIR that holds the teacher page's link (mode 0600). */
export const TEACHER_LINK_FILE = 'teacher-link.txt';
/** The page in DATA_DIR (mode 0600) that the browser opens, and that forwards to the teacher page's link. */
export const TEACHER_OPEN_FILE = 'teacher-open.html';

/**
 * The shortest TEACHER_TOKEN accepted: 16 characters. The token is the teacher's only key,
 * sent with every request of the teacher page; a short one is guessed (the generated one is
 * 24 hex digits, 96 bits).
 */
export const MIN_TEACHER_TOKEN_CHARS = 16;

/** Why `token` (TEACHER_TOKEN) cannot be the teacher token, or null when it can. */
export function teacherTokenProblem(token: string): string | null {
  if (token.length < MIN_TEACHER_TOKEN_CHARS) return `TEACHER_TOKEN must be at least ${MIN_TEACHER_TOKEN_CHARS} characters (it has ${token.length}): a short token is guessed. Unset it for a generated one`;
  return null;
}

/** The teacher page's link on this computer, with the token in its query (client/teacher/token.ts takes it from there). */
export function teacherPageLink(port: number, room: string, token: string): string {
  return `http://localhost:${port}/teacher?room=${encodeURIComponent(room)}&token=${encodeURIComponent(token)}`;
}

/** Writes the teacher page's link to DATA_DIR/TEACHER_LINK_FILE, readable by this user only; returns the file's path. */
export async function saveTeacherLink(dataDir: string, link: string): Promise<string> {
  const file = path.join(dataDir, TEACHER_LINK_FILE);
  await writePrivateFile(file, `${link}\n`);
  return file;
}

/**
 * Writes DATA_DIR/TEACHER_OPEN_FILE, readable by this user only: a page that forwards to
 * `link` at once (and links to it, should the browser refuse to). Returns its file: URL,
 * which carries no token, for the browser's command line.
 */
export async function saveTeacherOpener(dataDir: string, link: string): Promise<string> {
  const file = path.join(dataDir, TEACHER_OPEN_FILE);
  const href = escapeAttribute(link);
  const page = [
    '<!doctype html>',
    '<meta charset="utf-8">',
    // The token stays out of any Referer header.
    '<meta name="referrer" content="no-referrer">',
    `<meta http-equiv="refresh" content="0; url=${href}">`,
    '<title>webring: teacher page</title>',
    `<p><a href="${href}">Open the teacher page</a></p>`,
    '',
  ].join('\n');
  await writePrivateFile(file, page);
  return pathToFileURL(file).href;
}

/** `text` for an HTML attribute in double quotes. */
function escapeAttribute(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
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
