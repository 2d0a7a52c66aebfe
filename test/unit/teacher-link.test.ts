/**
 * The files that carry the teacher token (issue 57): written with mode 0600 every time, never
 * through a symlink; the browser opened on a local page, not on the token; and a
 * TEACHER_TOKEN too short to resist a guess refused at start-up.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync, chmodSync, readdirSync, lstatSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MIN_TEACHER_TOKEN_CHARS, TEACHER_LINK_FILE, TEACHER_OPEN_FILE, browserCommand, saveTeacherLink, saveTeacherOpener, teacherPageLink, teacherTokenProblem } from '../../signaling-server/teacher-link';
import { WebringError } from '../../shared/protocol/errors';

const modeOf = (file: string): number => statSync(file).mode & 0o777;
const dir = (): string => mkdtempSync(path.join(os.tmpdir(), 'webring-teacher-link-'));
const LINK = teacherPageLink(8080, 'class', 'a-token-of-24-characters');

test('an existing teacher-link.txt of mode 0644 is 0600 after a start, with the new link and no leftover file', { skip: process.platform === 'win32' }, async () => {
  const d = dir();
  const file = path.join(d, TEACHER_LINK_FILE);
  writeFileSync(file, 'old link\n');
  chmodSync(file, 0o644);
  assert.equal(await saveTeacherLink(d, LINK), file);
  assert.equal(modeOf(file), 0o600);
  assert.equal(readFileSync(file, 'utf8'), `${LINK}\n`);
  assert.deepEqual(readdirSync(d), [TEACHER_LINK_FILE]);
});

test('a symlink at teacher-link.txt is refused with a code, and the file it points to is untouched', { skip: process.platform === 'win32' }, async () => {
  const d = dir();
  const target = path.join(dir(), 'someone-elses-file');
  writeFileSync(target, 'theirs\n');
  chmodSync(target, 0o644);
  symlinkSync(target, path.join(d, TEACHER_LINK_FILE));
  await assert.rejects(saveTeacherLink(d, LINK), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_STATE');
  assert.equal(readFileSync(target, 'utf8'), 'theirs\n');
  assert.equal(modeOf(target), 0o644);
  assert.ok(lstatSync(path.join(d, TEACHER_LINK_FILE)).isSymbolicLink(), 'the link itself is left as found');
  assert.deepEqual(readdirSync(d), [TEACHER_LINK_FILE], 'no temporary file left behind');
});

test("the browser opens a local page of mode 0600 that forwards to the teacher page: the token is in no command's arguments", { skip: process.platform === 'win32' }, async () => {
  const d = dir();
  const url = await saveTeacherOpener(d, LINK);
  const { args } = browserCommand(url, 'linux');
  assert.ok(!args.join(' ').includes('a-token-of-24-characters'), args.join(' '));
  const file = fileURLToPath(url);
  assert.equal(path.basename(file), TEACHER_OPEN_FILE);
  assert.equal(modeOf(file), 0o600);
  const page = readFileSync(file, 'utf8');
  assert.ok(page.includes(`<meta http-equiv="refresh" content="0; url=${LINK.replace(/&/g, '&amp;')}">`), page);
  assert.ok(page.includes('<meta name="referrer" content="no-referrer">'));
});

test('the link carries the token URL-encoded, and a page forwarding to it escapes it for HTML', { skip: process.platform === 'win32' }, async () => {
  const link = teacherPageLink(8080, 'class', 'x"><script>&y=1 long enough');
  assert.equal(new URL(link).searchParams.get('token'), 'x"><script>&y=1 long enough');
  const page = readFileSync(fileURLToPath(await saveTeacherOpener(dir(), link)), 'utf8');
  assert.ok(!page.includes('<script>'), page);
});

test(`TEACHER_TOKEN is refused under ${MIN_TEACHER_TOKEN_CHARS} characters, with the reason; from there on it is taken`, () => {
  assert.match(teacherTokenProblem('secret') ?? '', new RegExp(`at least ${MIN_TEACHER_TOKEN_CHARS} characters \\(it has 6\\)`));
  assert.notEqual(teacherTokenProblem('x'.repeat(MIN_TEACHER_TOKEN_CHARS - 1)), null);
  assert.equal(teacherTokenProblem('x'.repeat(MIN_TEACHER_TOKEN_CHARS)), null);
});
