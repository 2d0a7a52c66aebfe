/**
 * `npm start`: the classroom server. Environment: PORT (8080), HTTPS_PORT (8443; 0 picks a
 * free port), HOST (all interfaces), ROOM (the default room's name, 'class'), TASK (the task the
 * teacher's form opens with), JOIN_SECRET
 * (derives every room's join code; generated and kept in DATA_DIR when unset),
 * TLS_CERT and TLS_KEY (PEM files; a self-signed certificate is made and kept in
 * DATA_DIR/tls/ when unset), DATA_DIR (./data), TEACHER_TOKEN (at least 16 characters; generated when unset; never
 * printed: the teacher page's link goes to DATA_DIR/teacher-link.txt and, on a desktop, to
 * the browser, see teacher-link.ts), OPEN_TEACHER_PAGE (1/0), LOG_LEVEL (info), PING_INTERVAL_MS and PING_TIMEOUT_MS (liveness), TURN_URL,
 * TURN_SECRET, TURN_TTL_S and ICE_TRANSPORT_POLICY (TURN; see signaling-server/edge/turn.ts),
 * REDIS_URL (share rooms with other signaling nodes; see signaling-server/rooms/cluster.ts),
 * TRUST_PROXY (load balancers whose X-Forwarded-For is believed; see client-address.ts),
 * HUB (0/1/true/false, on when unset; or the flags `--hub`, `--no-hub`): whether the hub
 * member runs beside the server (hub-process.ts).
 */
import { DEFAULT_TASK, TASKS, findTask } from '../shared/tasks/registry';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import QRCode from 'qrcode';
import { roomNameSchema } from '../shared/protocol';
import { buildClientIfNeeded, CLIENT_DIST, PROJECT_ROOT } from './build-client';
import { createLogger } from './logger';
import { JOIN_SECRET_FILE, hubKeyFor, loadOrCreateJoinSecret } from './edge/join-codes';
import { DEFAULT_PING_INTERVAL_MS, DEFAULT_PING_TIMEOUT_MS, startServer } from './server';
import { loadTlsCredentials, TlsError, type TlsCredentials } from './edge/tls';
import { ClusterError } from './rooms/cluster';
import { compileTrustProxy } from './edge/client-address';
import { describeIce, iceOptionsFromEnv, TurnConfigError, type IceOptions } from './edge/turn';
import { openInBrowser, saveTeacherLink, saveTeacherOpener, shouldOpenBrowser, teacherPageLink, teacherTokenProblem } from './teacher-link';
import { HUB_SCRIPT, HubConfigError, hubArguments, hubEnvironment, hubRequested, hubServerUrl, superviseHub, type HubProcess } from './hub-process';

const DEFAULT_HTTPS_PORT = 8443;
const DEFAULT_ROOM = 'class';

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

const isLoopback = (url: string) => /^https?:\/\/(localhost|127\.0\.0\.1|\[::1\])[:/]/.test(url);

function describeCertificate(tls: TlsCredentials): string {
  const until = tls.validTo.toISOString().slice(0, 10);
  if (tls.source === 'files') return `HTTPS certificate: ${tls.certPath} (TLS_CERT), valid until ${until}`;
  const made = tls.source === 'generated' ? `made now (${tls.reason})` : 'kept from an earlier start';
  return `HTTPS certificate: self-signed, ${made}, valid until ${until}\n  ${tls.certPath}\n  SHA-256 ${tls.fingerprint256}`;
}

async function main(): Promise<void> {
  const log = createLogger();
  const port = intFromEnv('PORT', 8080);
  const httpsPortFromEnv = process.env.HTTPS_PORT !== undefined && process.env.HTTPS_PORT !== '';
  const httpsPort = intFromEnv('HTTPS_PORT', DEFAULT_HTTPS_PORT);
  const host = process.env.HOST || undefined;
  const dataDir = path.resolve(process.env.DATA_DIR || path.join(PROJECT_ROOT, 'data'));
  const tokenFromEnv = process.env.TEACHER_TOKEN;
  const tokenProblem = tokenFromEnv ? teacherTokenProblem(tokenFromEnv) : null;
  if (tokenProblem) {
    console.error(`[webring] ${tokenProblem}`);
    process.exit(2);
  }
  const teacherToken = tokenFromEnv || randomBytes(12).toString('hex');
  const roomFromEnv = process.env.ROOM;
  if (roomFromEnv && !roomNameSchema.safeParse(roomFromEnv).success) {
    console.error(`[webring] ROOM must be letters, digits, "-" and "_" (up to 64, starting with a letter or digit), got ${JSON.stringify(roomFromEnv)}`);
    process.exit(2);
  }
  // Checked before anything is built or bound: a typo in TURN_URL must not surface as
  // "students cannot connect" halfway through a lesson.
  let ice: IceOptions;
  try {
    ice = iceOptionsFromEnv(process.env);
  } catch (err) {
    if (!(err instanceof TurnConfigError)) throw err;
    console.error(`[webring] ${err.code}: ${err.message}`);
    process.exit(2);
  }
  let hub: boolean;
  try {
    hub = hubRequested(process.argv.slice(2), process.env);
    if (hub && !existsSync(path.join(PROJECT_ROOT, HUB_SCRIPT))) throw new HubConfigError(`the hub was asked for, but ${HUB_SCRIPT} is missing`);
  } catch (err) {
    if (!(err instanceof HubConfigError)) throw err;
    console.error(`[webring] ${err.code}: ${err.message}`);
    process.exit(2);
  }
  const room = roomFromEnv || DEFAULT_ROOM;
  // TASK= picks the task the teacher's form opens with (shared/tasks/registry.ts).
  const taskFromEnv = process.env.TASK;
  if (taskFromEnv && !findTask(taskFromEnv)) {
    console.error(`[webring] ERR_UNKNOWN_TASK: TASK=${JSON.stringify(taskFromEnv)} is no task; there are ${TASKS.map((t) => t.id).join(', ')}`);
    process.exit(2);
  }
  const defaultTask = taskFromEnv || DEFAULT_TASK.id;
  let joinSecret: Buffer;
  try {
    joinSecret = await loadOrCreateJoinSecret(dataDir, process.env.JOIN_SECRET);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    console.error(`[webring] ${err.message}`);
    process.exit(2);
  }

  let tls: TlsCredentials;
  try {
    tls = await loadTlsCredentials({ dataDir, certPath: process.env.TLS_CERT || undefined, keyPath: process.env.TLS_KEY || undefined });
  } catch (err) {
    if (!(err instanceof TlsError)) throw err;
    console.error(`[webring] ${err.code}: ${err.message}`);
    process.exit(2);
  }

  await buildClientIfNeeded((m) => log.info(m));
  const redisUrl = process.env.REDIS_URL || undefined;
  const trustProxy = process.env.TRUST_PROXY || undefined;
  try {
    compileTrustProxy(trustProxy);
  } catch (err) {
    console.error(`[webring] TRUST_PROXY: ${(err as Error).message} (addresses, subnets like 10.0.0.0/8, or loopback/linklocal/uniquelocal, comma-separated)`);
    process.exit(2);
  }
  let server;
  try {
    server = await startServer({
      port,
      host,
      dataDir,
      teacherToken,
      joinSecret,
      clientDir: CLIENT_DIST,
      pingIntervalMs: intFromEnv('PING_INTERVAL_MS', DEFAULT_PING_INTERVAL_MS),
      pingTimeoutMs: intFromEnv('PING_TIMEOUT_MS', DEFAULT_PING_TIMEOUT_MS),
      log,
      ice,
      redisUrl,
      trustProxy,
      defaultRoom: room,
      defaultTask,
      https: { port: httpsPort, cert: tls.cert, key: tls.key, anyPortIfTaken: !httpsPortFromEnv },
    });
  } catch (err) {
    if (!(err instanceof ClusterError)) throw err;
    console.error(`[webring] ${err.code}: ${err.message}`);
    process.exit(2);
  }

  const info = server.joinInfo(room);
  const teacherLink = teacherPageLink(server.port, room, teacherToken);
  const teacherLinkFile = await saveTeacherLink(dataDir, teacherLink);
  const openBrowser = shouldOpenBrowser(process.env, process.stdout.isTTY === true);
  // The browser's command line shows a local page's address, not the token (teacher-link.ts).
  const teacherOpener = openBrowser ? await saveTeacherOpener(dataDir, teacherLink) : null;
  const httpsUrls = info.studentUrls.filter((u) => u.startsWith('https:'));
  const lanHttps = httpsUrls.filter((u) => !isLoopback(u));
  const lanHttp = info.studentUrls.filter((u) => u.startsWith('http:') && !isLoopback(u));
  const qr = lanHttps[0]
    ? await QRCode.toString(lanHttps[0], process.stdout.isTTY ? { type: 'terminal', small: true } : { type: 'utf8' })
    : '';
  const lines = [
    '',
    'webring classroom server is running',
    '',
    `Room: ${room}${roomFromEnv ? ' (from ROOM)' : ' (set ROOM to choose another name)'}`,
    `Task: ${findTask(defaultTask)!.title}${taskFromEnv ? ' (from TASK)' : ` (set TASK to one of ${TASKS.map((t) => t.id).join(', ')})`}`,
    `Join code: ${info.code}   (students need it, or a link below, which carries it)`,
    '',
    'Students open:',
    ...(httpsUrls.length > 0 ? httpsUrls : [`https://localhost:${server.httpsPort}/?room=${room}&code=${info.code}`]).map((u) => `  ${u}`),
    ...(lanHttps.length > 0 ? [] : ['  (no LAN address: only this computer can reach the server; check HOST and the network)']),
    `  ${info.localUrl}   (on this computer)`,
    ...(lanHttp.length > 0
      ? ['', `  Plain http also works, but without WebGPU on other computers, and a device on it cannot take part in a secure run`, `  (the class's own examples are secure by default): ${lanHttp[0]}`]
      : []),
    '',
    ...(qr ? ['Scan to join:', qr.trimEnd(), ''] : []),
    ...(tls.source === 'files'
      ? []
      : [
          'The first time, students see "Your connection is not private": this computer made its',
          'own certificate, so no authority vouches for it. Before they click Advanced, then',
          'Proceed, they check that the certificate\'s SHA-256 fingerprint starts as the teacher',
          'page shows it (the SHA-256 below): a classmate in the middle would show another one.',
          '',
        ]),
    // Never the link itself: it carries the teacher token, and this screen may be projected (teacher-link.ts).
    openBrowser ? 'Teacher page: opening in this computer\'s browser.' : 'Teacher page: its link is in the file below; open it on this computer.',
    `  Its link carries the teacher token, so it is not shown here: ${teacherLinkFile}`,
    '  (read it on this computer, or in the teacher page\'s "Use from a second device"; never project it)',
    '',
    tokenFromEnv ? 'Teacher token: from TEACHER_TOKEN' : 'Teacher token: generated at this start (set TEACHER_TOKEN to keep one), in the link above',
    `Join codes: derived from ${process.env.JOIN_SECRET ? 'JOIN_SECRET' : `the secret in ${path.join(dataDir, JOIN_SECRET_FILE)}`} (a new secret changes every room's code)`,
    describeCertificate(tls),
    describeIce(ice),
    redisUrl ? `Rooms: shared with other signaling nodes through Redis (REDIS_URL); checkpoints in DATA_DIR, which they must share` : 'Rooms: in this process (set REDIS_URL to run several signaling nodes)',
    `Data directory: ${dataDir}`,
    hub
      ? `Hub: on; it joins room ${room} and sums the gradients when the hub collective runs (the default on one Wi-Fi), seeing each student's gradient unless the run is secure (npm start -- --no-hub turns it off)`
      : 'Hub: off (npm start runs one on this computer unless --no-hub or HUB=0)',
    '',
  ];
  console.log(lines.join('\n'));
  if (teacherOpener) openInBrowser(teacherOpener, (m) => log.warn(m));

  // The hub dials the plain-http listener on this machine, which always exists beside https.
  const hubProcess: HubProcess | null = hub
    ? superviseHub({
        command: process.execPath,
        args: hubArguments(hubServerUrl(host, server.port), room),
        env: hubEnvironment(process.env, info.code, hubKeyFor(joinSecret, room)),
        cwd: PROJECT_ROOT,
        log,
        output: (line, stream) => (stream === 'stdout' ? console.log(line) : console.error(line)),
      })
    : null;
  process.on('exit', () => hubProcess?.killNow());

  const shutdown = () => {
    log.info('shutting down');
    void (async () => {
      // The hub first, so its goodbye reaches a server that still listens.
      await hubProcess?.stop();
      await server.close();
      process.exit(0);
    })();
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

main().catch((err: unknown) => {
  console.error('[webring] failed to start:', err);
  process.exit(1);
});
