/**
 * `npm start`: the classroom server. Environment: PORT (8080), HOST (all interfaces),
 * DATA_DIR (./data), TEACHER_TOKEN (generated and printed when unset), LOG_LEVEL (info),
 * PING_INTERVAL_MS and PING_TIMEOUT_MS (liveness).
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { buildClientIfNeeded, CLIENT_DIST, PROJECT_ROOT } from './build-client';
import { createLogger } from './logger';
import { DEFAULT_PING_INTERVAL_MS, DEFAULT_PING_TIMEOUT_MS, startServer } from './server';

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) {
    console.error(`[webring] ${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
    process.exit(2);
  }
  return value;
}

function lanAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flat()
    .filter((a): a is os.NetworkInterfaceInfo => !!a && a.family === 'IPv4' && !a.internal)
    .map((a) => a.address);
}

async function main(): Promise<void> {
  const log = createLogger();
  const port = intFromEnv('PORT', 8080);
  const host = process.env.HOST || undefined;
  const dataDir = path.resolve(process.env.DATA_DIR || path.join(PROJECT_ROOT, 'data'));
  const tokenFromEnv = process.env.TEACHER_TOKEN;
  const teacherToken = tokenFromEnv || randomBytes(12).toString('hex');

  await buildClientIfNeeded((m) => log.info(m));
  const server = await startServer({
    port,
    host,
    dataDir,
    teacherToken,
    clientDir: CLIENT_DIST,
    pingIntervalMs: intFromEnv('PING_INTERVAL_MS', DEFAULT_PING_INTERVAL_MS),
    pingTimeoutMs: intFromEnv('PING_TIMEOUT_MS', DEFAULT_PING_TIMEOUT_MS),
    log,
  });

  const room = 'class';
  const hosts = host && host !== '0.0.0.0' && host !== '::' ? [host] : ['localhost', ...lanAddresses()];
  const lines = [
    '',
    'webring classroom server is running',
    '',
    'Students open:',
    ...hosts.map((h) => `  http://${h}:${server.port}/?room=${room}`),
    '',
    'Teacher opens:',
    `  http://localhost:${server.port}/teacher?room=${room}&token=${teacherToken}`,
    '',
    tokenFromEnv ? 'Teacher token: from TEACHER_TOKEN' : `Teacher token (generated; set TEACHER_TOKEN to fix it): ${teacherToken}`,
    `Data directory: ${dataDir}`,
    'Note: over plain http only localhost is a secure context, so WebGPU is available to',
    'students on other machines only once HTTPS arrives; they fall back to WebGL.',
    '',
  ];
  console.log(lines.join('\n'));

  const shutdown = () => {
    log.info('shutting down');
    void server.close().then(() => process.exit(0));
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

main().catch((err: unknown) => {
  console.error('[webring] failed to start:', err);
  process.exit(1);
});
