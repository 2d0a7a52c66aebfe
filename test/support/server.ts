import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { io as connect, type Socket } from 'socket.io-client';
import { startServer, type RunningServer } from '../../signaling-server/server';
import { createLogger } from '../../signaling-server/logger';
import type { Logger } from '../../signaling-server/rooms/room-context';
import type { RateLimitOptions, RateLimits } from '../../signaling-server/edge/rate-limits';
import { hubKeyFor, joinCodeFor } from '../../signaling-server/edge/join-codes';
import type { IceOptions } from '../../signaling-server/edge/turn';
import type { AckResult, ClientToServerEvents, JoinAccepted, JoinRequest, ProgressReport, RoomStatus, ServerToClientEvents, SocketAuth, TrainStart } from '../../shared/protocol';

export type TestSocket = Socket<ServerToClientEvents, ClientToServerEvents>;
export const TEST_TOKEN = 'test-teacher-token';
/** Reading a room needs its join code, a member token or the teacher token: tests read as the teacher. */
export const AS_TEACHER = { headers: { authorization: `Bearer ${TEST_TOKEN}` } };
export const TEST_JOIN_SECRET = Buffer.from('test-join-secret-0123456789');
/** The room a test socket is let into before it names one (join() moves it to its room). */
export const LOBBY_ROOM = 'lobby';

/** The join code of `room` on every test server. */
export const codeFor = (room: string): string => joinCodeFor(TEST_JOIN_SECRET, room);

/** The hub key of `room` on every test server: what the teacher's server hands its hub. */
export const hubKeyOf = (room: string): string => hubKeyFor(TEST_JOIN_SECRET, room);

/** What a test server may be started with, over the defaults every test server has. */
export type TestServerOptions = { rateLimits?: Partial<RateLimitOptions>; rateLimiter?: RateLimits; dataDir?: string; redisUrl?: string; reconnectGraceMs?: number; trustProxy?: string; ice?: IceOptions; log?: Logger; admissionDeadlineMs?: number; keyDeadlineMs?: number; stallFloorMs?: number };

export async function startTestServer(overrides: TestServerOptions = {}): Promise<RunningServer> {
  return startServer({
    port: 0,
    host: '127.0.0.1',
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'webring-test-')),
    teacherToken: TEST_TOKEN,
    joinSecret: TEST_JOIN_SECRET,
    clientDir: path.join(os.tmpdir(), 'webring-no-client'),
    log: createLogger(process.env.LOG_LEVEL ?? 'silent'),
    ...overrides,
  });
}

/** A test file's server, as useTestServer hands it out. */
export interface TestServer {
  /** The running server; there once the file's before() has run. */
  readonly server: RunningServer;
  /** A connection let in for `room` (the lobby by default), disconnected after the file's tests. */
  client(room?: string): Promise<TestSocket>;
  /** Keeps `socket`, opened some other way, to be disconnected after the file's tests; returns it. */
  keep(socket: TestSocket): TestSocket;
  /** Room `room` as the teacher reads it from the room API (asserts a 200). */
  status(room: string): Promise<RoomStatus>;
  /** Students `names` join `room` in this order, each on a connection of its own (every join asserted); their sockets and member ids. */
  students(room: string, names: readonly string[]): Promise<{ students: TestSocket[]; ids: string[] }>;
  /** POSTs `body` as JSON to `path` with the teacher's token. */
  teacherPost(path: string, body: unknown): Promise<Response>;
}

/**
 * One server for a test file: started in node:test's before(), closed in after() once every
 * socket `client` opened is disconnected. Call it at the file's top level.
 */
export function useTestServer(options: TestServerOptions = {}): TestServer {
  let running: RunningServer | null = null;
  const sockets: TestSocket[] = [];
  before(async () => {
    running = await startTestServer(options);
  });
  after(async () => {
    for (const s of sockets) s.disconnect();
    await running?.close();
  });
  const testServer: TestServer = {
    get server(): RunningServer {
      if (!running) throw new Error('the test server starts in before(); use it inside a test');
      return running;
    },
    async client(room = LOBBY_ROOM) {
      return testServer.keep(await connectClient(testServer.server, room));
    },
    keep(socket) {
      sockets.push(socket);
      return socket;
    },
    teacherPost(path, body) {
      return fetch(`${testServer.server.url}${path}`, { method: 'POST', headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    },
    async status(room) {
      const res = await fetch(`${testServer.server.url}/api/rooms/${room}`, AS_TEACHER);
      assert.equal(res.status, 200);
      return (await res.json()) as RoomStatus;
    },
    async students(room, names) {
      const students: TestSocket[] = [];
      const ids: string[] = [];
      for (const name of names) {
        const s = await testServer.client(room);
        const j = await join(s, room, name);
        assert.ok(j.ok, JSON.stringify(j));
        students.push(s);
        ids.push(j.memberId);
      }
      return { students, ids };
    },
  };
  return testServer;
}

/** A connection let in with `room`'s join code (or the `auth` given: a wrong one is refused). */
export async function connectClient(server: { url: string }, room = LOBBY_ROOM, auth: Partial<SocketAuth> = { room, code: codeFor(room) }): Promise<TestSocket> {
  const socket: TestSocket = connect(server.url, { transports: ['websocket'], forceNew: true, reconnection: false, auth });
  await connected(socket);
  return socket;
}

function connected(socket: TestSocket): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('connect_error', reject);
  });
}

/**
 * Joins `room` as a Node worker would. A connection let in for another room first comes
 * back with this room's join code (the handshake is per room), as a student page does.
 */
export async function join(socket: TestSocket, room: string, name: string, extra: Partial<JoinRequest> = {}): Promise<AckResult<JoinAccepted>> {
  const auth = socket.auth as Partial<SocketAuth>;
  if (auth.room !== room) {
    socket.disconnect();
    socket.auth = { room, code: codeFor(room) };
    const back = connected(socket);
    socket.connect();
    await back;
  }
  return new Promise((resolve) => socket.emit('room:join', { room, name, kind: 'node', backend: 'cpu', ...extra }, resolve));
}

/**
 * The teacher starts a run in `room` with `config` over the form's defaults (the API's own
 * defaults fill the rest); resolves with the train:start `socket` hears. The start must be
 * accepted (200).
 */
export async function startTestRun(server: { url: string }, room: string, socket: TestSocket, config: object = {}): Promise<TrainStart> {
  const started = nextEvent(socket, 'train:start');
  const res = await fetch(`${server.url}/api/rooms/${room}/start`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(config),
  });
  assert.equal(res.status, 200, await res.text());
  return started;
}

export function nextEvent<E extends keyof ServerToClientEvents>(
  socket: TestSocket,
  event: E,
  predicate: (...args: Parameters<ServerToClientEvents[E]>) => boolean = () => true,
  timeoutMs = 5_000,
): Promise<Parameters<ServerToClientEvents[E]>[0]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${String(event)} within ${timeoutMs} ms`)), timeoutMs);
    const handler = (...args: Parameters<ServerToClientEvents[E]>) => {
      if (!predicate(...args)) return;
      clearTimeout(timer);
      (socket.off as (e: string, h: unknown) => void)(event, handler);
      resolve(args[0]);
    };
    (socket.on as (e: string, h: unknown) => void)(event, handler);
  });
}

/**
 * `report` for each step from `from` to `to`, in order, as a worker sends one after every
 * step: the server takes a step at most a turn or two past the room's (progress-bounds.ts),
 * so a chief gets to step 12 by way of steps 1 to 11.
 */
export function reportSteps(socket: TestSocket, report: Omit<ProgressReport, 'step'>, from: number, to: number): void {
  for (let step = from; step <= to; step++) socket.emit('worker:progress', { ...report, step });
}
