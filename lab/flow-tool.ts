/**
 * A minimal TCP throughput tool, run inside lab namespaces by lab/flows.ts (iperf is not
 * installed here, and this keeps the measurement in code we can read):
 *
 *   flow-tool.ts sink --port P      prints "ready", reads {"from","to"} (epoch ms) on stdin,
 *                                   counts the bytes that arrive between them, prints
 *                                   {"bytes","seconds"} and exits
 *   flow-tool.ts source --host H --port P
 *                                   connects, prints "ready", reads {"until"} on stdin, then
 *                                   sends as fast as TCP lets it until then
 *
 * The window is counted at the receiver: bytes a sender has written may still sit in its
 * socket buffer (megabytes, at these rates seconds' worth), so only arrivals are a rate.
 * Every namespace shares the machine's clock, so one window fits all simultaneous flows.
 */
import net from 'node:net';
import readline from 'node:readline';
import { parseArgs } from 'node:util';

/** Large writes keep the sender's loop out of the measurement at Gbit/s. */
const CHUNK_BYTES = 256 * 1024;
/** A sink that never hears "go" (its harness died) must not stay forever. */
const IDLE_EXIT_MS = 60_000;

function firstLine(): Promise<Record<string, number>> {
  const rl = readline.createInterface({ input: process.stdin });
  return new Promise((resolve) =>
    rl.once('line', (line) => {
      rl.close();
      resolve(JSON.parse(line) as Record<string, number>);
    }),
  );
}

async function sink(port: number): Promise<void> {
  let bytes = 0;
  let window: { from: number; to: number } | null = null;
  const server = net.createServer((socket) => {
    socket.on('data', (d: Buffer) => {
      const now = Date.now();
      if (window && now >= window.from && now <= window.to) bytes += d.length;
    });
    // The source resets its connection when it stops; that is the end of a flow, not a failure.
    socket.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(port, '0.0.0.0', resolve));
  console.log('ready');
  const go = await firstLine();
  window = { from: go.from!, to: go.to! };
  await new Promise((r) => setTimeout(r, Math.max(0, window!.to - Date.now()) + 50));
  console.log(JSON.stringify({ bytes, seconds: (window.to - window.from) / 1000 }));
  process.exit(0);
}

async function source(host: string, port: number): Promise<void> {
  const socket = net.connect({ host, port });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.setNoDelay(true);
  console.log('ready');
  const { until } = await firstLine();
  const chunk = Buffer.alloc(CHUNK_BYTES, 0x5a);
  const pump = () => {
    while (Date.now() < until!) {
      if (!socket.write(chunk)) return void socket.once('drain', pump);
    }
    socket.resetAndDestroy();
    process.exit(0);
  };
  // A full socket buffer may never drain past `until` on a slow link: stop on time anyway.
  setTimeout(() => {
    socket.resetAndDestroy();
    process.exit(0);
  }, Math.max(0, until! - Date.now())).unref();
  pump();
}

const { positionals, values } = parseArgs({ allowPositionals: true, options: { port: { type: 'string' }, host: { type: 'string' } } });
setTimeout(() => process.exit(3), IDLE_EXIT_MS).unref();
if (positionals[0] === 'sink') await sink(Number(values.port));
else if (positionals[0] === 'source' && values.host) await source(values.host, Number(values.port));
else {
  console.error('usage: flow-tool.ts sink --port P | source --host H --port P');
  process.exit(2);
}
