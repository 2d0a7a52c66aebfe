/**
 * One log call is one log line that reads as it was written: control characters and the
 * bidirectional formatting characters a client can put in a name are escaped (issue 57: a
 * right-to-left override shown raw reversed the rest of its line in the operator's terminal).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger, escapeControlCharacters } from '../../signaling-server/logger';

test('the bidi embeddings, overrides, isolates and marks are written as escapes', () => {
  const name = 'student\u202Egnp.exe\u202C \u2066x\u2069 \u200E\u200F\u061C';
  assert.equal(escapeControlCharacters(name), 'student\\u202egnp.exe\\u202c \\u2066x\\u2069 \\u200e\\u200f\\u061c');
  for (let c = 0x202a; c <= 0x202e; c++) assert.equal(escapeControlCharacters(String.fromCharCode(c)), `\\u${c.toString(16)}`);
  for (let c = 0x2066; c <= 0x2069; c++) assert.equal(escapeControlCharacters(String.fromCharCode(c)), `\\u${c.toString(16)}`);
});

test('controls stay escaped as before, and ordinary text, accents and other scripts pass as they are', () => {
  assert.equal(escapeControlCharacters('a\nb\r\tc\u001b[2J\u0085\u2028'), 'a\\nb\\r\\tc\\x1b[2J\\x85\\u2028');
  assert.equal(escapeControlCharacters('Zoë, 学生, طالب'), 'Zoë, 学生, طالب');
});

test('the logger escapes every message it writes', () => {
  const lines: string[] = [];
  const log = createLogger('info', { log: (l) => lines.push(l), warn: (l) => lines.push(l), error: (l) => lines.push(l) });
  log.warn('member "\u202Eevil" joined');
  assert.equal(lines.length, 1);
  assert.ok(lines[0]!.endsWith('member "\\u202eevil" joined'), lines[0]);
});
