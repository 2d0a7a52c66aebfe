/**
 * What `npm start` prints is often projected with its QR code, so it must never give the
 * class the teacher's powers: the teacher token (generated, or from TEACHER_TOKEN) appears
 * nowhere in the output, the teacher page's link is in DATA_DIR/teacher-link.txt, readable
 * by the teacher alone, and that link works; on a desktop (OPEN_TEACHER_PAGE=1 here) the
 * server hands the browser opener a local page that forwards to the link, never the link
 * itself (a command's arguments are visible to every user: issue 57), nor the terminal.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { capture, freePort, stopProcess, waitForOutput } from '../support/processes';
import { fileURLToPath } from 'node:url';
import { MIN_TEACHER_TOKEN_CHARS, TEACHER_LINK_FILE, TEACHER_OPEN_FILE } from '../../signaling-server/teacher-link';

const ROOT = path.resolve(import.meta.dirname, '../..');
const STARTUP_TIMEOUT_MS = 120_000;

async function startServer(env: NodeJS.ProcessEnv): Promise<{ output: () => string; dataDir: string; port: number; stop: () => Promise<void> }> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'webring-banner-'));
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'signaling-server/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, TEACHER_TOKEN: '', PORT: String(port), HTTPS_PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = capture(child);
  await waitForOutput(child, output, /^Hub: .*$/m, 'the banner', STARTUP_TIMEOUT_MS);
  return { output, dataDir, port, stop: () => stopProcess(child, 'SIGTERM') };
}

test('the banner never shows the teacher token; the teacher link is in a file only the teacher reads, and it works', async () => {
  const server = await startServer({});
  try {
    const file = path.join(server.dataDir, TEACHER_LINK_FILE);
    const link = new URL(readFileSync(file, 'utf8').trim());
    const token = link.searchParams.get('token')!;
    assert.match(token, /^[0-9a-f]{24}$/, 'a generated token');
    assert.equal(statSync(file).mode & 0o777, 0o600, 'readable by this user only');
    const out = server.output();
    assert.ok(out.includes('webring classroom server is running'));
    assert.ok(!out.includes(token), 'the token is nowhere in the output');
    assert.ok(out.includes(file), 'the banner names the file');
    assert.match(out, /cannot take part in a secure run/, 'the banner says what plain http cannot do');
    assert.match(out, /^Hub: on/m, 'a plain npm start runs the hub');
    const asTeacher = await fetch(`http://127.0.0.1:${server.port}/api/rooms/class/join`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(asTeacher.status, 200, 'the link in the file carries the teacher token');
  } finally {
    await server.stop();
  }
});

test('a token from TEACHER_TOKEN is not printed either, and on a desktop the browser opener gets a private local page that forwards to the link, not the token', async () => {
  // A stand-in for xdg-open on PATH: it writes down what it was asked to open.
  const bin = mkdtempSync(path.join(os.tmpdir(), 'webring-opener-'));
  const opened = path.join(bin, 'opened.txt');
  writeFileSync(path.join(bin, 'xdg-open'), `#!/bin/sh\necho "$1" > ${opened}\n`);
  chmodSync(path.join(bin, 'xdg-open'), 0o755);
  const token = 'a-token-set-by-the-teacher-0123';
  const server = await startServer({ TEACHER_TOKEN: token, OPEN_TEACHER_PAGE: '1', PATH: `${bin}:${process.env.PATH}`, HUB: '0' });
  try {
    for (let i = 0; i < 100 && !existsSync(opened); i++) await new Promise((r) => setTimeout(r, 100));
    const argument = readFileSync(opened, 'utf8').trim();
    assert.ok(!argument.includes(token), `the token is not in the opener's arguments: ${argument}`);
    const page = fileURLToPath(argument);
    assert.equal(page, path.join(server.dataDir, TEACHER_OPEN_FILE));
    assert.equal(statSync(page).mode & 0o777, 0o600, 'readable by this user only');
    assert.ok(readFileSync(page, 'utf8').includes(`url=http://localhost:${server.port}/teacher?room=class&amp;token=${token}`), 'it forwards to the teacher page');
    assert.ok(!server.output().includes(token), 'the token is nowhere in the output');
    assert.match(server.output(), /Teacher page: opening in this computer's browser/);
    assert.match(server.output(), /^Hub: off/m);
  } finally {
    await server.stop();
  }
});

test(`a TEACHER_TOKEN under ${MIN_TEACHER_TOKEN_CHARS} characters stops the start with the reason, before anything listens`, async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'signaling-server/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, TEACHER_TOKEN: 'secret', PORT: String(await freePort()), HTTPS_PORT: '0', DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'webring-banner-')), HUB: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = capture(child);
  const exit = new Promise<number | null>((resolve) => child.once('exit', resolve));
  // Before, it started: stop it rather than wait for an exit that never comes.
  if (await waitForOutput(child, output, /^Hub: .*$/m, 'the server', STARTUP_TIMEOUT_MS).then(() => true, () => false)) {
    await stopProcess(child, 'SIGTERM');
    assert.fail(`the server started with a 6-character token:\n${output()}`);
  }
  assert.equal(await exit, 2);
  assert.match(output(), new RegExp(`TEACHER_TOKEN must be at least ${MIN_TEACHER_TOKEN_CHARS} characters`));
  assert.ok(!output().includes('webring classroom server is running'));
});
