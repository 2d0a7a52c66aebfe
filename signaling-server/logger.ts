import type { Logger } from './rooms/room-context';

const LEVELS = { debug: 0, info: 1, warn: 2, error: 3, silent: 4 } as const;
type Level = keyof typeof LEVELS;

/** Where log lines go: the console, or a test's capture. */
export interface LogSink {
  log(line: string): void;
  warn(line: string): void;
  error(line: string): void;
}

/**
 * C0 controls (newlines, carriage returns, ESC of ANSI sequences), DEL, C1 controls, the
 * Unicode line and paragraph separators that some log viewers break lines at, and the
 * bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E–U+200F,
 * U+202A–U+202E, U+2066–U+2069): a name with a right-to-left override shows the rest of its
 * line reversed, so it could make a log line read as something else (issue 57; the
 * "Trojan Source" characters, CVE-2021-42574).
 */
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;
const NAMED_ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * `message` with every control character written as an escape (`\n`, `\x1b`, `\u2028`), so
 * one call is one log line: member names, re-form reasons and failure messages come from
 * clients, and a raw newline in one would forge a line of its own, an ESC would repaint the
 * operator's terminal. Backslashes a client typed stay as they are: whatever they spell,
 * they stay inside the one line of the message that carried them.
 */
export function escapeControlCharacters(message: string): string {
  return message.replace(CONTROL_CHARACTERS, (c) => {
    const named = NAMED_ESCAPES[c];
    if (named) return named;
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/**
 * Plain console logging with a level from LOG_LEVEL (default info). Every message is escaped
 * here (escapeControlCharacters), centrally, so no call site can forget to.
 */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info', sink: LogSink = console): Logger {
  const min = LEVELS[(level in LEVELS ? level : 'info') as Level];
  const at = (l: Level, write: (s: string) => void) => (message: string) => {
    if (LEVELS[l] >= min) write(`[webring] ${new Date().toISOString()} ${l} ${escapeControlCharacters(message)}`);
  };
  return { info: at('info', (s) => sink.log(s)), warn: at('warn', (s) => sink.warn(s)), error: at('error', (s) => sink.error(s)) };
}
