export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

const LEVELS = { debug: 0, info: 1, warn: 2, error: 3, silent: 4 } as const;
type Level = keyof typeof LEVELS;

/** Plain console logging with a level from LOG_LEVEL (default info). */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info'): Logger {
  const min = LEVELS[(level in LEVELS ? level : 'info') as Level];
  const at = (l: Level, write: (s: string) => void) => (message: string) => {
    if (LEVELS[l] >= min) write(`[webring] ${new Date().toISOString()} ${l} ${message}`);
  };
  return { info: at('info', console.log), warn: at('warn', console.warn), error: at('error', console.error) };
}
