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
import { io, type Socket } from 'socket.io-client';
import { hubKeySchema, type ClientToServerEvents, type ServerToClientEvents } from '../shared/protocol';
import { toWebringError } from '../shared/protocol/errors';
import { HUB_WAIT_OUT_CODES, HubMember } from '../shared/training/hub-member';
import { RECONNECT_OPTIONS } from '../shared/training/signaling-session';
import { createWrtcPeerFactory } from '../shared/network/wrtc-peer-factory';
import type { PeerFactory } from '../shared/network/peer';
import { IceConfigHolder, ICE_REQUEST_TIMEOUT_MS } from '../shared/network/ice-config';
import { EXIT_FAILURE, failUsage, parseMemberArgs, type CommandLine, type MemberArgs } from './args';

const COMMAND_LINE: CommandLine<never> = {
  program: 'webring hub',
  usage: 'usage: HUB_KEY=<the room\'s hub key> node --import tsx node-worker/hub.ts --url http://HOST:PORT --room NAME --code JOIN-CODE [--name hub]',
  flags: [],
  defaultName: 'hub',
  codeHint: '',
};
/** How often the hub logs what it summed. */
const STATS_EVERY_MS = 30_000;

function parse(): MemberArgs & { hubKey: string } {
  const { member } = parseMemberArgs(COMMAND_LINE);
  const hubKey = hubKeySchema.safeParse(process.env.HUB_KEY);
  if (!hubKey.success) failUsage(COMMAND_LINE, `HUB_KEY is required in the environment: the room's hub key, 64 hex digits (npm start -- --hub passes it; else GET /api/rooms/${member.room}/hub-key with the teacher token)`);
  return { ...member, hubKey: hubKey.data };
}

/**
 * WebRTC for Node, or null where its optional package is missing: the hub runs by default,
 * and without WebRTC it still reaches every student, through the server (relay-link.ts).
 */
async function directLinks(rtcConfig: () => RTCConfiguration, log: (m: string) => void): Promise<PeerFactory | null> {
  try {
    return await createWrtcPeerFactory(rtcConfig);
  } catch (err) {
    const e = toWebringError(err);
    if (e.code !== 'ERR_MISSING_PACKAGE') throw err;
    log(`${e.message}; every student's link to the hub goes through the server`);
    return null;
  }
}

async function main(): Promise<void> {
  const args = parse();
  const log = (m: string) => console.log(`webring hub: ${m}`);
  const socket: Socket<ServerToClientEvents, ClientToServerEvents> = io(args.url.origin, { transports: ['websocket'], autoConnect: false, ...RECONNECT_OPTIONS });
  const ice = new IceConfigHolder({ request: () => socket.timeout(ICE_REQUEST_TIMEOUT_MS).emitWithAck('ice:config'), log });
  const hub = new HubMember({
    socket,
    factory: await directLinks(() => ice.rtcConfiguration(), log),
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
