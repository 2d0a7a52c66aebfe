/**
 * One headless bench peer in a lab namespace: joins the lab's room like a student (the same
 * RingNetwork over @roamhq/wrtc as a Node worker) and runs bare collectives
 * the lab asks for. Commands arrive as JSON lines on stdin (a pipe works through
 * `ip netns exec`, where an IPC channel may not); each answer is one line on stdout:
 *
 *   {"id":1,"cmd":"join","hub":true}                                  -> RESULT {"id":1,"value":<rank>}
 *   {"id":2,"cmd":"allReduce","bytes":1048576,"reps":3,"algorithm":"hub","wire":"fp16"}
 *                                                                      -> RESULT {"id":2,"value":[ms, ms, ms]}
 *   {"id":3,"cmd":"measure","bytes":1048576,"wire":"fp32"}            -> RESULT {"id":3,"value":<LinkModels>}
 *   {"id":4,"cmd":"close"}
 *
 * A failed command answers `RESULT {"id":N,"error":"…"}`.
 *
 *   node --import tsx lab/bench-peer-process.ts --url http://198.18.0.1:8080 --room R --name w0 --n 4   (JOIN_CODE in the environment)
 */
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { io } from 'socket.io-client';
import { BenchPeer } from '../shared/network/bench-peer';
import { createWrtcPeerFactory } from '../shared/network/wrtc-peer-factory';
import { RESULT_PREFIX, type BenchPeerCommand } from './bench-peer-protocol';

const { values } = parseArgs({ options: { url: { type: 'string' }, room: { type: 'string' }, name: { type: 'string' }, n: { type: 'string' } }, strict: true });
const code = process.env.JOIN_CODE;
if (!values.url || !values.room || !values.name || !values.n || !code) {
  console.error('usage: lab/bench-peer-process.ts --url URL --room R --name NAME --n WORLD_SIZE, with JOIN_CODE set');
  process.exit(2);
}
const worldSize = Number(values.n);
const factory = await createWrtcPeerFactory(() => ({ iceServers: [] }));
const peer = new BenchPeer(io(values.url, { transports: ['websocket'], auth: { room: values.room, code } }), factory, (m) => console.log(`[${values.name}] ${m}`));

async function run(c: BenchPeerCommand): Promise<unknown> {
  switch (c.cmd) {
    case 'join':
      return peer.join(values.room!, values.name!, 'node', worldSize, { hub: c.hub });
    case 'allReduce':
      return peer.allReduce(c.bytes, c.reps, c.algorithm, c.wire);
    case 'measure':
      return peer.measure(c.bytes, c.wire);
    case 'close':
      peer.close();
      setTimeout(() => process.exit(0), 100);
      return null;
  }
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const command = JSON.parse(line) as BenchPeerCommand;
  run(command).then(
    (value) => console.log(`${RESULT_PREFIX}${JSON.stringify({ id: command.id, value })}`),
    (err: unknown) => console.log(`${RESULT_PREFIX}${JSON.stringify({ id: command.id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) })}`),
  );
});
// The lab's end closes stdin: leave with it.
process.stdin.on('end', () => process.exit(0));
