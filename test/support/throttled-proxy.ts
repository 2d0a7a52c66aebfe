/**
 * A slow download for one test client: a TCP proxy in front of the server that passes the
 * client's bytes to the server at once and the server's bytes to the client at
 * `bytesPerSecond`, a busy school Wi-Fi tab. What it cannot pass yet it stops reading, so
 * the backlog builds up where it would on a real slow link: in the server's connection.
 */
import net from 'node:net';

/** The proxy passes the server's bytes in slices this often (ms). */
const TICK_MS = 10;
/** It reads from the server while it holds less than this: a link's own buffer, not a store. */
const HELD_BYTES = 64 * 1024;

export interface ThrottledProxy {
  /** The server's URL, through the proxy. */
  url: string;
  /** Bytes passed to the client so far. */
  readonly passed: number;
  close(): Promise<void>;
}

export async function throttledProxy(serverUrl: string, bytesPerSecond: number): Promise<ThrottledProxy> {
  const target = new URL(serverUrl);
  const sockets = new Set<net.Socket>();
  let passed = 0;
  const proxy = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    const held: Buffer[] = [];
    let heldBytes = 0;
    upstream.on('data', (chunk: Buffer) => {
      held.push(chunk);
      heldBytes += chunk.byteLength;
      if (heldBytes >= HELD_BYTES) upstream.pause();
    });
    const timer = setInterval(() => {
      let allowance = (bytesPerSecond * TICK_MS) / 1000;
      while (allowance > 0 && held.length > 0) {
        const first = held[0]!;
        const part = first.subarray(0, allowance);
        if (part.byteLength === first.byteLength) held.shift();
        else held[0] = first.subarray(part.byteLength);
        heldBytes -= part.byteLength;
        allowance -= part.byteLength;
        passed += part.byteLength;
        client.write(part);
      }
      if (heldBytes < HELD_BYTES) upstream.resume();
    }, TICK_MS);
    const close = () => {
      clearInterval(timer);
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', close).on('error', close);
    upstream.on('close', close).on('error', close);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const { port } = proxy.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get passed() {
      return passed;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        proxy.close(() => resolve());
      }),
  };
}
