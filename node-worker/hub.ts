/**
 * The hub: a non-training member that sums the class's gradients for the hub collective
 * (shared/collectives/hub-reducer.ts). On one shared Wi-Fi it moves half the airtime of
 * the ring: every rank sends its gradient once and receives the sum once, where a ring
 * frame between two laptops crosses the air twice. The server starts it beside itself
 * with `npm start -- --hub` (or HUB=1); it can also run on its own:
 *
 *   HUB_KEY=… node --import tsx node-worker/hub.ts --url http://HOST:PORT --room NAME [--code K7M-Q2P] [--name hub]
 *
 * HUB_KEY is the room's hub key, without which the server refuses a hub
 * (ERR_HUB_NOT_AUTHORIZED): the server hands it to the hub it starts, and to the teacher
 * (GET /api/rooms/NAME/hub-key). It is read only from the environment, never the command
 * line, so it stays out of the process list; the join code may come from JOIN_CODE too.
 * A hub the server let go joins again by itself; one the teacher removed waits until the
 * teacher allows a hub again. Every 30 s it logs what it summed.
 */
import { parseArgs } from 'node:util';
import SimplePeer from 'simple-peer';
import wrtc from '@roamhq/wrtc';
import { io, type Socket } from 'socket.io-client';
import { hubKeySchema, memberNameSchema, roomNameSchema, type ClientToServerEvents, type ServerToClientEvents } from '../shared/protocol';
import { normalizeJoinCode } from '../shared/protocol/join-code';
import { toWebringError } from '../shared/protocol/errors';
import { HUB_WAIT_OUT_CODES, HubMember } from '../shared/training/hub-member';
import { createSimplePeerFactory } from '../shared/network/simple-peer-factory';
import { IceConfigHolder, ICE_REQUEST_TIMEOUT_MS } from '../shared/network/ice-config';

const USAGE = 'usage: HUB_KEY=<the room\'s hub key> node --import tsx node-worker/hub.ts --url http://HOST:PORT --room NAME --code JOIN-CODE [--name hub]';
const EXIT_USAGE = 2;
const EXIT_FAILURE = 1;
/** How often the hub logs what it summed. */
const STATS_EVERY_MS = 30_000;

function fail(message: string, code = EXIT_USAGE): never {
  console.error(`webring hub: ${message}\n${USAGE}`);
  process.exit(code);
}

function parse(): { url: URL; room: string; code: string; name: string; hubKey: string } {
  let values;
  try {
    ({ values } = parseArgs({ options: { url: { type: 'string' }, room: { type: 'string' }, code: { type: 'string' }, name: { type: 'string' } }, strict: true }));
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
  const typed = values.code ?? process.env.JOIN_CODE;
  if (!typed) fail('--code (or JOIN_CODE) is required: the room\'s join code');
  const code = normalizeJoinCode(typed);
  if (code === null) fail(`--code ${typed}: a join code is 6 letters and digits, like K7M-Q2P`);
  const name = memberNameSchema.safeParse(values.name ?? 'hub');
  if (!name.success) fail('--name must be 1 to 40 characters');
  const hubKey = hubKeySchema.safeParse(process.env.HUB_KEY);
  if (!hubKey.success) fail(`HUB_KEY is required in the environment: the room's hub key, 64 hex digits (npm start -- --hub passes it; else GET /api/rooms/${room.data}/hub-key with the teacher token)`);
  return { url, room: room.data, code, name: name.data, hubKey: hubKey.data };
}

async function main(): Promise<void> {
  const args = parse();
  const log = (m: string) => console.log(`webring hub: ${m}`);
  const socket: Socket<ServerToClientEvents, ClientToServerEvents> = io(args.url.origin, { transports: ['websocket'], autoConnect: false });
  const ice = new IceConfigHolder({ request: () => socket.timeout(ICE_REQUEST_TIMEOUT_MS).emitWithAck('ice:config'), log });
  const hub = new HubMember({
    socket,
    factory: createSimplePeerFactory(SimplePeer, { rtcConfig: () => ice.rtcConfiguration(), wrtc }),
    onIceConfig: (raw) => ice.update(raw),
    onGaveUp: () => process.exit(EXIT_FAILURE),
    log,
  });
  const goodbye = () => {
    hub.leave();
    setTimeout(() => process.exit(0), 200).unref();
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, goodbye);
  if (process.env.WEBRING_HUB_EXIT_WITH_STDIN === '1') {
    // Started by the server (signaling-server/hub-process.ts): its pipe closes when the server dies, even by kill -9.
    process.stdin.on('end', goodbye);
    process.stdin.resume();
  }
  try {
    const joined = await hub.join(args.room, args.name, args.code, args.hubKey);
    log(`joined ${args.room} as its hub ${args.name} (index ${joined.index})`);
  } catch (err) {
    const e = toWebringError(err);
    if (!HUB_WAIT_OUT_CODES.has(e.code)) throw e;
    // The teacher removed the room's hub, or another holds the role: wait to be let in, as after a drop.
    log(`not let in yet (${e.code}: ${e.message}); trying again with a back-off`);
    hub.waitToJoin();
  }
  setInterval(() => {
    const r = hub.reducer;
    if (r) log(`generation ${r.generation}: ${r.chunksReduced} chunks summed for ${r.worldSize} worker(s), ${(r.stats.bytesSent / 1e6).toFixed(1)} MB sent`);
  }, STATS_EVERY_MS).unref();
}

main().catch((err: unknown) => {
  const e = toWebringError(err);
  console.error(`webring hub: ${e.code}: ${e.message}`);
  process.exit(EXIT_FAILURE);
});
