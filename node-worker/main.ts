/**
 * A headless Node worker: joins a room like a browser tab, with the same shared/ code (the
 * TrainingWorker, the ring, the trainer), over simple-peer + @roamhq/wrtc. A lab machine
 * with a real GPU can join a class of browsers this way.
 *
 *   npm run worker -- --url http://HOST:PORT --room NAME --code K7M-Q2P [--name X] [--backend webgpu|cpu] [--device laptop|tablet|phone|node] [--data DIR]
 *
 * --data DIR holds this worker's own examples for a run on the class's own data: a folder
 * per class of PNG files (node-worker/own-folder.ts). They never leave this machine; the
 * server learns the counts per class.
 *
 * --device says what the teacher's class summary calls this worker (default node): the lab
 * runs its capped workers as the devices they stand for.
 *
 * The join code may also come from JOIN_CODE, which keeps it out of the process list.
 */
import os from 'node:os';
import { statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import SimplePeer from 'simple-peer';
import wrtc from '@roamhq/wrtc';
import { io, type Socket } from 'socket.io-client';
import { BACKENDS, DEVICE_CLASSES, roomNameSchema, memberNameSchema, type Backend, type DeviceClass, type ClientToServerEvents, type ServerToClientEvents } from '../shared/protocol';
import { TrainingWorker } from '../shared/training/worker';
import type { WorkerStatus } from '../shared/training/worker-status';
import { createSimplePeerFactory } from '../shared/network/simple-peer-factory';
import { IceConfigHolder, ICE_REQUEST_TIMEOUT_MS } from '../shared/network/ice-config';
import { toWebringError } from '../shared/protocol/errors';
import { selectNodeBackend } from './node-backend';
import { normalizeJoinCode } from '../shared/protocol/join-code';
import { countByLabel, type OwnExamples } from '../shared/training/own-examples';
import { readOwnFolder } from './own-folder';

const USAGE = 'usage: npm run worker -- --url http://HOST:PORT --room NAME --code JOIN-CODE [--name X] [--backend webgpu|cpu] [--device laptop|tablet|phone|node] [--data DIR]';
/** Exit code for bad arguments, as for the server's bad configuration. */
const EXIT_USAGE = 2;
const EXIT_FAILURE = 1;

function fail(message: string, code = EXIT_USAGE): never {
  console.error(`webring worker: ${message}\n${USAGE}`);
  process.exit(code);
}

function parse(): { url: URL; room: string; code: string; name: string; backend: Backend | null; device: DeviceClass; data: string | null } {
  let values;
  try {
    ({ values } = parseArgs({
      options: { url: { type: 'string' }, room: { type: 'string' }, code: { type: 'string' }, name: { type: 'string' }, backend: { type: 'string' }, device: { type: 'string' }, data: { type: 'string' } },
      strict: true,
    }));
  } catch (err) {
    fail((err as Error).message);
  }
  if (!values.url || !values.room) fail('--url and --room are required');
  let url: URL;
  try {
    url = new URL(values.url);
  } catch {
    fail(`--url ${values.url} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') fail('--url must be http:// or https://');
  const room = roomNameSchema.safeParse(values.room);
  if (!room.success) fail(`--room ${values.room}: letters, digits, "-" and "_" only, at most 64`);
  const typedCode = values.code ?? process.env.JOIN_CODE;
  if (!typedCode) fail('--code (or JOIN_CODE) is required: the room\'s join code, from the teacher page or the server\'s start-up output');
  const code = normalizeJoinCode(typedCode);
  if (code === null) fail(`--code ${typedCode}: a join code is 6 letters and digits, like K7M-Q2P`);
  const name = memberNameSchema.safeParse(values.name ?? `node-${os.hostname()}`.slice(0, 40));
  if (!name.success) fail('--name must be 1 to 40 characters');
  const backend = values.backend ?? null;
  if (backend !== null && !(BACKENDS as readonly string[]).includes(backend)) fail(`--backend ${backend}: one of ${BACKENDS.join(', ')}`);
  const device = values.device ?? 'node';
  if (!(DEVICE_CLASSES as readonly string[]).includes(device)) fail(`--device ${device}: one of ${DEVICE_CLASSES.join(', ')}`);
  if (values.data !== undefined && !isDirectory(values.data)) fail(`--data ${values.data}: not a folder (a folder per class, each holding PNG files)`);
  return { url, room: room.data, code, name: name.data, backend: backend as Backend | null, device: device as DeviceClass, data: values.data ?? null };
}

function isDirectory(where: string): boolean {
  try {
    return statSync(where).isDirectory();
  } catch {
    return false;
  }
}

/** This worker's own examples, read once at start; each unreadable file is named. */
function readOwnExamples(dir: string | null): OwnExamples | null {
  if (dir === null) return null;
  const { store, errors } = readOwnFolder(dir);
  for (const e of errors) console.error(`webring worker: --data ${e}`);
  const counts = Object.entries(countByLabel(store)).map(([label, n]) => `${label} ${n}`);
  console.log(`webring worker: own examples from ${dir}: ${store.examples.length} (${counts.join(', ') || 'none'})${errors.length ? `; ${errors.length} skipped` : ''}`);
  return store;
}

function describe(s: WorkerStatus): string {
  const rank = s.rank === null ? '-' : `${s.rank}/${s.worldSize}${s.chief ? ' chief' : ''}`;
  const loss = s.loss === null ? '-' : s.loss.toFixed(4);
  const accuracy = s.testAccuracy === null ? '' : ` test=${s.testAccuracy.toFixed(4)}`;
  return `state=${s.state} rank=${rank} step=${s.step} loss=${loss} hash=${s.weightsHash ?? '-'} step_ms=${s.computeMs.toFixed(1)} data_ms=${s.dataMs.toFixed(1)}${accuracy}`;
}

async function main(): Promise<void> {
  const args = parse();
  const base = args.url.origin;
  const own = readOwnExamples(args.data);
  const choice = await selectNodeBackend(args.backend);
  console.log(`webring worker: backend ${choice.backend}${choice.adapter ? ` (${choice.adapter})` : ''}${choice.webgpuUnavailable ? `; WebGPU unavailable: ${choice.webgpuUnavailable}` : ''}`);
  // The worker connects when it joins: the handshake carries the room and its join code.
  const socket: Socket<ServerToClientEvents, ClientToServerEvents> = io(base, { transports: ['websocket'], autoConnect: false });
  let last = '';
  const log = (m: string) => console.log(`webring worker: ${m}`);
  const ice = new IceConfigHolder({ request: () => socket.timeout(ICE_REQUEST_TIMEOUT_MS).emitWithAck('ice:config'), log });
  const worker = new TrainingWorker({
    socket,
    // The same TURN servers and policy as the tabs: a lab machine behind the school's NAT
    // reaches students at home through the relay too.
    peerFactory: createSimplePeerFactory(SimplePeer, { rtcConfig: () => ice.rtcConfiguration(), wrtc }),
    onIceConfig: (raw) => ice.update(raw),
    backend: choice.backend,
    kind: 'node',
    device: args.device,
    adapter: choice.adapter,
    serverUrl: base,
    localCheckpoints: null,
    ownExamples: () => own,
    onStatus: (s) => {
      // One line per change of state, rank or step: a readable log, not a flood.
      const line = describe(s);
      if (line !== last) console.log(`webring worker: ${line}`);
      last = line;
    },
    log,
  });
  // Leaving says goodbye, so the ring re-forms at once.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      worker.leave();
      setTimeout(() => process.exit(0), 200).unref();
    });
  }
  if (own) worker.reportOwnExamples(countByLabel(own));
  const joined = await worker.join(args.room, args.name, args.code);
  console.log(`webring worker: joined ${joined.room} as ${args.name} (index ${joined.index})`);
}

main().catch((err: unknown) => {
  const e = toWebringError(err);
  console.error(`webring worker: ${e.code}: ${e.message}`);
  process.exit(EXIT_FAILURE);
});
