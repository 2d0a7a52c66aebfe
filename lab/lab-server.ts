/**
 * The real signaling server and real Node workers inside a lab: the server in its
 * namespace (reached by the workers over the shaped network, by the harness over the
 * control path), each worker in its own namespace under a CPU cap.
 */
import type { DeviceClass } from '../shared/protocol';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { joinCodeFor } from '../signaling-server/edge/join-codes';
import type { RoomStatus } from '../shared/protocol';
import { LabError } from './lab-error';
import type { Lab } from './netlab';
import { LAB_SERVER_PORT } from './network-models';
import type { CpuCapSpec } from './cpu-caps';
import type { LabProcess } from './spawn';
import { recorder } from './run-settings';

const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export { LAB_SERVER_PORT } from './network-models';
/** Building the client once (vite, about 6 s here) comes before the ready line. */
const SERVER_START_TIMEOUT_MS = 120_000;
const POLL_INTERVAL_MS = 250;

export interface LabServer {
  proc: LabProcess;
  room: string;
  teacherToken: string;
  joinCode: string;
  /** As the workers reach it (shaped). */
  url: string;
  /** As the harness reaches it (the unshaped control path). */
  controlUrl: string;
  /** Reads the room over the control path, as the teacher. */
  roomStatus(): Promise<RoomStatus>;
  /** POST /api/rooms/<room>/start with `config`; throws ERR_LAB_PROCESS unless 200. */
  start(config: Record<string, unknown>): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts `node signaling-server/main.ts` in the server namespace on all its interfaces
 * (HOST unset: the default), with a fresh data directory, and waits until it is ready.
 */
export async function startLabServer(lab: Lab, room: string, options: { env?: NodeJS.ProcessEnv } = {}): Promise<LabServer> {
  const teacherToken = 'lab-teacher-token';
  const joinSecret = 'lab-join-secret-0123456789';
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'webring-lab-data-'));
  // HUB=0 unless a row asks for the hub: the rows say which they measured, whatever npm start's default.
  const env = { PORT: String(LAB_SERVER_PORT), HTTPS_PORT: '0', ROOM: room, TEACHER_TOKEN: teacherToken, JOIN_SECRET: joinSecret, DATA_DIR: dataDir, LOG_LEVEL: 'warn', HUB: '0', ...options.env };
  // The liveness the server runs with may come from the harness's own environment too (spawn merges it).
  recorder().noteServer({ ...process.env, ...env });
  const proc = lab.spawnInServer(process.execPath, ['--import', 'tsx', 'signaling-server/main.ts'], { label: 'signaling server', cwd: PROJECT_ROOT, env });
  await proc.waitForLine(/webring classroom server is running/, SERVER_START_TIMEOUT_MS);
  const controlUrl = lab.controlUrl(LAB_SERVER_PORT);
  const auth = { authorization: `Bearer ${teacherToken}` };
  return {
    proc,
    room,
    teacherToken,
    joinCode: joinCodeFor(Buffer.from(joinSecret), room),
    url: lab.serverUrl(LAB_SERVER_PORT),
    controlUrl,
    async roomStatus() {
      const res = await fetch(`${controlUrl}/api/rooms/${room}`, { headers: auth });
      if (!res.ok) throw new LabError('ERR_LAB_PROCESS', `GET /api/rooms/${room}: HTTP ${res.status}`);
      return (await res.json()) as RoomStatus;
    },
    async start(config) {
      recorder().noteConfig(config);
      const res = await fetch(`${controlUrl}/api/rooms/${room}/start`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(config) });
      if (res.status !== 200) throw new LabError('ERR_LAB_PROCESS', `POST /api/rooms/${room}/start: HTTP ${res.status} ${await res.text()}`);
    },
    async stop() {
      await proc.kill();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** What a Node worker prints once it is in the room (node-worker/main.ts). */
const WORKER_JOINED_LINE = /^webring worker: joined \S+ as /;

/** Starts `node node-worker/main.ts` in worker `i`'s namespace, capped at `cpu` from the moment it has joined `server`'s room. */
/** What the teacher's class summary calls a lab device (a Chromebook is a laptop to it). */
export const deviceClassOf = (cpu: CpuCapSpec): DeviceClass => (cpu === 'phone' ? 'phone' : typeof cpu === 'string' ? 'laptop' : 'node');

export function startLabWorker(lab: Lab, i: number, server: LabServer, cpu: CpuCapSpec, name = `lab-w${i}`): LabProcess {
  // LAB_WORKER_COMPUTE=main runs the maths on the workers' network thread, as before the compute thread: the comparison's other side.
  const compute = process.env.LAB_WORKER_COMPUTE ? ['--compute', process.env.LAB_WORKER_COMPUTE] : [];
  const args = ['--import', 'tsx', 'node-worker/main.ts', '--url', server.url, '--room', server.room, '--name', name, '--backend', 'cpu', '--device', deviceClassOf(cpu), ...compute];
  return lab.spawnInWorker(i, process.execPath, args, {
    label: 'node worker',
    cwd: PROJECT_ROOT,
    cpuCap: lab.cpuCap(`w${i}`, cpu),
    // Capped from the moment it is in the room: before that it starts Node and imports tfjs, which a device's browser does not do at its speed.
    startup: { group: lab.startupCap(), capOn: WORKER_JOINED_LINE },
    // The join code through the environment keeps it out of the process list.
    env: { JOIN_CODE: server.joinCode },
  });
}

/** Polls `server`'s room over the control path until `done` says so; throws ERR_LAB_PROCESS after `timeoutMs`. */
export async function waitForRoom(server: LabServer, done: (room: RoomStatus) => boolean, what: string, timeoutMs: number): Promise<RoomStatus> {
  const deadline = Date.now() + timeoutMs;
  let last: RoomStatus | null = null;
  while (Date.now() < deadline) {
    last = await server.roomStatus();
    if (done(last)) return last;
    await new Promise((r) => setTimeout(r, POLL_INTERVAL_MS));
  }
  throw new LabError('ERR_LAB_PROCESS', `${what}: not within ${timeoutMs} ms; the room last said ${JSON.stringify({ state: last?.state, members: last?.members.map((m) => ({ name: m.name, step: m.step, hash: m.weightsHash })), lastError: last?.lastError })}`);
}
