/**
 * Headless Node bench peers for the large rings (N = 16 and 32): one process hosts
 * `--count` BenchPeers over @roamhq/wrtc, joined to the bench's room, and
 * runs the commands test/bench/bench.ts sends over IPC on all of them at once.
 */
import { parseArgs } from 'node:util';
import { io } from 'socket.io-client';
import { BenchPeer } from '../../shared/network/bench-peer';
import { createWrtcPeerFactory } from '../../shared/network/wrtc-peer-factory';
import type { Algorithm, WireFormat } from '../../shared/protocol';

export type NodePeerCommand =
  | { id: number; cmd: 'join'; hub?: boolean }
  | { id: number; cmd: 'allReduce'; bytes: number; reps: number; algorithm: Algorithm; wire?: WireFormat }
  | { id: number; cmd: 'measure'; bytes: number }
  | { id: number; cmd: 'close' };

export interface NodePeerReply {
  id: number;
  /** One entry per hosted peer: its rank and the command's result. */
  results?: Array<{ rank: number; value: unknown }>;
  error?: string;
}

const { values } = parseArgs({
  options: { url: { type: 'string' }, room: { type: 'string' }, code: { type: 'string' }, count: { type: 'string' }, n: { type: 'string' }, name: { type: 'string', default: 'node' } },
});
const count = Number(values.count);
const worldSize = Number(values.n);
const factory = await createWrtcPeerFactory(() => ({ iceServers: [] }));
const peers = Array.from({ length: count }, (_, i) => new BenchPeer(io(values.url!, { transports: ['websocket'], auth: { room: values.room!, code: values.code! } }), factory, process.env.BENCH_VERBOSE ? (m) => console.log(`[${values.name}-${i}] ${m}`) : () => {}));

async function run(command: NodePeerCommand): Promise<unknown[]> {
  switch (command.cmd) {
    case 'join':
      return Promise.all(peers.map((p, i) => p.join(values.room!, `${values.name}-${i}`, 'node', worldSize, { hub: command.hub ?? false })));
    case 'allReduce':
      return Promise.all(peers.map((p) => p.allReduce(command.bytes, command.reps, command.algorithm, command.wire ?? 'fp32')));
    case 'measure':
      return Promise.all(peers.map((p) => p.measure(command.bytes)));
    case 'close':
      for (const p of peers) p.close();
      setTimeout(() => process.exit(0), 100);
      return [];
  }
}

process.on('message', (command: NodePeerCommand) => {
  run(command).then(
    (values) => process.send!({ id: command.id, results: values.map((value, i) => ({ rank: command.cmd === 'close' ? -1 : peers[i]!.rank, value })) } satisfies NodePeerReply),
    (err: unknown) => process.send!({ id: command.id, error: err instanceof Error ? err.stack ?? err.message : String(err) } satisfies NodePeerReply),
  );
});
process.send!({ id: 0, results: [] } satisfies NodePeerReply);
