/**
 * `npm start -- --hub`'s pieces (signaling-server/hub-process.ts): the flag and HUB, the URL
 * and command line the hub gets, and the supervisor over real child processes (short Node
 * scripts stand in for the hub): prefixed output, restarts with back-off, stop.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hubArguments, hubEnvironment, hubRequested, hubServerUrl, superviseHub, type HubProcessOptions } from '../../signaling-server/hub-process';

const codeOf = (fn: () => unknown): string => {
  try {
    fn();
    return 'none';
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
};

test('the hub runs by default; --no-hub or HUB=0/false turns it off, --hub or HUB=1/true on; anything else is ERR_HUB_CONFIG', () => {
  assert.equal(hubRequested([], {}), true, 'a plain npm start runs the hub');
  assert.equal(hubRequested([], { HUB: '' }), true);
  assert.equal(hubRequested(['--hub'], {}), true);
  assert.equal(hubRequested([], { HUB: '1' }), true);
  assert.equal(hubRequested([], { HUB: 'true' }), true);
  assert.equal(hubRequested([], { HUB: '0' }), false);
  assert.equal(hubRequested([], { HUB: 'false' }), false);
  assert.equal(hubRequested(['--no-hub'], {}), false);
  assert.equal(hubRequested(['--hub'], { HUB: '0' }), true, 'the command line wins');
  assert.equal(hubRequested(['--no-hub'], { HUB: '1' }), false, 'the command line wins');
  assert.equal(codeOf(() => hubRequested(['--hub', '--no-hub'], {})), 'ERR_HUB_CONFIG');
  assert.equal(codeOf(() => hubRequested([], { HUB: 'yes' })), 'ERR_HUB_CONFIG');
  assert.equal(codeOf(() => hubRequested(['--hbu'], {})), 'ERR_HUB_CONFIG');
  assert.equal(codeOf(() => hubRequested(['extra'], {})), 'ERR_HUB_CONFIG');
});

test('the hub dials the plain-http listener on this machine, with the join code and hub key in its environment, never its arguments', () => {
  assert.equal(hubServerUrl(undefined, 8080), 'http://127.0.0.1:8080');
  assert.equal(hubServerUrl('0.0.0.0', 8080), 'http://127.0.0.1:8080');
  assert.equal(hubServerUrl('::', 8080), 'http://[::1]:8080');
  assert.equal(hubServerUrl('192.168.1.5', 8080), 'http://192.168.1.5:8080');
  assert.equal(hubServerUrl('fd00::5', 8080), 'http://[fd00::5]:8080');
  const args = hubArguments('http://127.0.0.1:8080', 'class');
  assert.deepEqual(args, ['--import', 'tsx', 'node-worker/hub.ts', '--url', 'http://127.0.0.1:8080', '--room', 'class', '--name', 'hub']);
  const hubKey = 'ab'.repeat(32);
  // A HUB_KEY the server itself was started with is no key of this room's: the server's own replaces it.
  const env = hubEnvironment({ PATH: '/bin', JOIN_SECRET: 's', TEACHER_TOKEN: 't', TURN_SECRET: 'u', HUB_KEY: 'stale' }, 'K7M-Q2P', hubKey);
  assert.deepEqual(env, { PATH: '/bin', JOIN_CODE: 'K7M-Q2P', HUB_KEY: hubKey, WEBRING_HUB_EXIT_WITH_STDIN: '1' });
  assert.ok(!args.includes('K7M-Q2P'));
  assert.ok(!args.some((a) => a.includes(hubKey)), 'the hub key never appears in the process list');
});

/** Supervises `script` (run by this Node) with short delays; what it logged and printed. */
function supervise(script: string, extra: Partial<HubProcessOptions> = {}) {
  const logged: string[] = [];
  const printed: Array<[string, string]> = [];
  const log = { info: (m: string) => logged.push(`info ${m}`), warn: (m: string) => logged.push(`warn ${m}`), error: (m: string) => logged.push(`error ${m}`) };
  const hub = superviseHub({
    command: process.execPath,
    args: ['-e', script],
    env: { ...process.env, JOIN_CODE: 'K7M-Q2P' },
    cwd: process.cwd(),
    log,
    output: (line, stream) => printed.push([stream, line]),
    restartDelayMs: 20,
    maxRestarts: 2,
    stopTimeoutMs: 2_000,
    ...extra,
  });
  return { hub, logged, printed };
}

async function until(what: string, ok: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('a hub that keeps exiting is restarted with a doubling delay, then given up on; its lines are prefixed [hub]', async () => {
  const { hub, logged, printed } = supervise("console.log('joined as ' + process.env.JOIN_CODE); console.error('boom'); process.exit(3)");
  await until('giving up', () => logged.some((l) => l.includes('gave up')));
  const starts = logged.filter((l) => l.startsWith('info hub started'));
  assert.equal(starts.length, 3, logged.join('\n'));
  const restarts = logged.filter((l) => l.startsWith('warn'));
  assert.match(restarts[0]!, /\(exit code 3\); restart 1 of 2 in 20 ms/);
  assert.match(restarts[1]!, /\(exit code 3\); restart 2 of 2 in 40 ms/);
  assert.match(logged.at(-1)!, /^error hub exited unexpectedly \(exit code 3\); gave up after 2 restarts/);
  assert.deepEqual(printed.slice(0, 2).sort(), [['stderr', '[hub] boom'], ['stdout', '[hub] joined as K7M-Q2P']]);
  assert.equal(hub.pid, null);
  await hub.stop();
});

test('stop() ends a running hub with SIGTERM and does not restart it; one that ignores SIGTERM is killed', async () => {
  const { hub, logged, printed } = supervise("process.on('SIGTERM', () => { console.log('bye'); process.exit(0); }); console.log('up'); setInterval(() => {}, 1000)");
  await until('the hub to start', () => printed.some(([, l]) => l === '[hub] up'));
  const pid = hub.pid;
  assert.ok(pid);
  await hub.stop();
  assert.deepEqual(printed.map(([, l]) => l), ['[hub] up', '[hub] bye']);
  assert.equal(hub.pid, null);
  assert.throws(() => process.kill(pid, 0), /ESRCH/, 'the process is gone');
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(logged.filter((l) => l.startsWith('info hub started')).length, 1, 'no restart after stop');

  const stubborn = supervise("process.on('SIGTERM', () => {}); console.log('up'); setInterval(() => {}, 1000)", { stopTimeoutMs: 200 });
  await until('the stubborn hub to start', () => stubborn.printed.length > 0);
  const started = Date.now();
  await stubborn.hub.stop();
  assert.ok(Date.now() - started < 2_000);
  assert.equal(stubborn.hub.pid, null);
});
