/**
 * A real HAProxy (Debian's package) in front of several signaling nodes, as a school or a
 * course would run them: one address for students, WebSocket connections spread round-robin
 * over the nodes, health-checked on /healthz, and retried on another node when one is down.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { capture, stopProcess } from './processes';

export const HAPROXY = process.env.HAPROXY_PATH ?? '/usr/sbin/haproxy';
const READY_TIMEOUT_MS = 10_000;

export interface TestHaproxy {
  url: string;
  stop(): Promise<void>;
}

/**
 * The configuration: socket.io's WebSocket connections (path /socket.io/) and everything
 * else go to separate backends, each round-robin, so consecutive students' connections
 * alternate between nodes whatever else their pages fetch.
 */
export function haproxyConfig(port: number, nodes: number[]): string {
  const servers = nodes.map((p, i) => `  server node${i} 127.0.0.1:${p} check inter 300ms fall 2 rise 2`).join('\n');
  return `global
  maxconn 1024
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  # WebSocket connections live for the whole lesson.
  timeout tunnel 1h
  # A request that meets a dead node (refused, or closed under it) goes to another one.
  option redispatch
  retries 3
  retry-on all-retryable-errors
  option httpchk GET /healthz
  # The nodes count rate limits per student, not per balancer (TRUST_PROXY on the nodes).
  option forwardfor
frontend students
  bind 127.0.0.1:${port}
  acl signaling path_beg /socket.io/
  use_backend signaling if signaling
  default_backend pages
backend signaling
  balance roundrobin
${servers}
backend pages
  balance roundrobin
${servers}
`;
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export async function startHaproxy(port: number, nodes: number[]): Promise<TestHaproxy> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'webring-haproxy-'));
  const config = path.join(dir, 'haproxy.cfg');
  writeFileSync(config, haproxyConfig(port, nodes));
  const child = spawn(HAPROXY, ['-db', '-f', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  const output = capture(child);
  // HAProxy prints nothing when it is ready: wait for its port, and for an early exit.
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (err) => reject(new Error(`cannot start ${HAPROXY} (npm test installs it: scripts/ensure-system-packages.sh): ${err.message}`)));
    child.once('exit', (code) => reject(new Error(`haproxy exited (${code}):\n${output()}`)));
  });
  // Past start-up the exit is expected (stop() kills it); the race below reports an early one.
  failed.catch(() => undefined);
  const deadline = Date.now() + READY_TIMEOUT_MS;
  const listening = (async () => {
    while (!(await portOpen(port))) {
      if (Date.now() > deadline) throw new Error(`haproxy not listening on ${port} within ${READY_TIMEOUT_MS} ms:\n${output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  await Promise.race([listening, failed]);
  return { url: `http://127.0.0.1:${port}`, stop: () => stopProcess(child) };
}
