/**
 * `webring/server`: the signaling server started in this process, for apps and tests that
 * embed it (what `npm start` runs, without the console, the TLS and the hub). Every option
 * of server.ts may be given; the ones a program rarely cares about get defaults: a free
 * port, a data folder of its own, a fresh teacher token, and the join secret kept there.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startServer as startSignalingServer, type RunningServer, type ServerOptions } from './server';
import { loadOrCreateJoinSecret } from './edge/join-codes';
import { createLogger } from './logger';
import { RoomControl } from '../shared/library/room-control';

export type { RunningServer } from './server';
export { RoomControl } from '../shared/library/room-control';
export { WebringError, ERROR_CODES, type ErrorCode } from '../shared/protocol/errors';

/** The teacher token's random bytes when none is given. */
const TEACHER_TOKEN_BYTES = 24;

export interface EmbeddedServerOptions extends Partial<Omit<ServerOptions, 'joinSecret'>> {
  /** Derives every room's join code; default: the secret kept in `dataDir` (made there on first start). */
  joinSecret?: Buffer;
  /** Log level when no `log` is given: 'info' (default), 'warn', 'error' or 'silent'. */
  logLevel?: 'info' | 'warn' | 'error' | 'silent';
}

export interface EmbeddedServer extends RunningServer {
  /** The token of the teacher's controls (RoomControl, the HTTP API). */
  readonly teacherToken: string;
  /** Where rooms, checkpoints and the join secret are kept. */
  readonly dataDir: string;
  /** A room's join code, as students type it. */
  joinCode(room: string): string;
  /** The teacher's controls over this server. */
  readonly control: RoomControl;
}

/**
 * Starts the server; resolves once it listens. `port` 0 (the default) picks a free one:
 * read it back from `url` or `port`. Without `dataDir`, rooms and checkpoints live in a
 * new folder under the system's temporary one; give one to keep them across restarts.
 * Without `clientDir` the classroom pages are not served, only the API and the sockets.
 */
export async function startServer(options: EmbeddedServerOptions = {}): Promise<EmbeddedServer> {
  const dataDir = path.resolve(options.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), 'webring-'))));
  const teacherToken = options.teacherToken ?? randomBytes(TEACHER_TOKEN_BYTES).toString('hex');
  const joinSecret = options.joinSecret ?? (await loadOrCreateJoinSecret(dataDir));
  const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };
  const log = options.log ?? (options.logLevel === 'silent' ? silent : createLogger(options.logLevel ?? 'info'));
  const running = await startSignalingServer({
    ...options,
    port: options.port ?? 0,
    dataDir,
    teacherToken,
    joinSecret,
    clientDir: options.clientDir ?? path.join(dataDir, 'no-pages'),
    log,
  });
  return Object.assign(running, {
    teacherToken,
    dataDir,
    joinCode: (room: string) => running.joinInfo(room).code,
    control: new RoomControl({ url: running.url, teacherToken }),
  });
}
