/**
 * `engines` in package.json says which Node runs webring. It must not promise a version that
 * a dependency refuses (vite 8 and @noble/hashes need 20.19, and vite skips 21 to 22.11): for
 * every Node release line a teacher may have, a version our range admits must be one every
 * installed, non-optional package admits. Optional packages (other platforms' binaries, a
 * wasm fallback) are skipped. The ranges in package-lock.json use a few forms only; this
 * reads those and fails on any other, so a new form is noticed, not misread.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';

type Version = [number, number, number];

function parseVersion(text: string): Version {
  const parts = text.replace(/\.[x*]$/i, '.0').split('.').map((p) => (p === '*' || p.toLowerCase() === 'x' ? 0 : Number(p)));
  while (parts.length < 3) parts.push(0);
  assert.ok(parts.every((p) => Number.isInteger(p)), `not a version: ${text}`);
  return parts.slice(0, 3) as Version;
}

const compare = (a: Version, b: Version): number => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

/** Whether `v` satisfies `range`: alternatives of `>=X`, `^X`, `X.*`/`X.x`, an exact `X`, or `*` (any; the forms the lock holds). */
function satisfies(v: Version, range: string): boolean {
  return range.split('||').some((alternative) => {
    const a = alternative.trim().replace(/^>=\s+/, '>=');
    if (a === '*') return true;
    if (a.startsWith('>=')) return compare(v, parseVersion(a.slice(2))) >= 0;
    if (a.startsWith('^')) {
      const base = parseVersion(a.slice(1));
      return compare(v, base) >= 0 && v[0] === base[0];
    }
    if (/^\d+(\.\d+)?\.[x*]$/i.test(a) || /^\d+\.[x*]$/i.test(a)) return v[0] === parseVersion(a)[0];
    assert.match(a, /^\d+\.\d+\.\d+$/, `a range form this test does not read: "${a}"`);
    return compare(v, parseVersion(a)) === 0;
  });
}

test('engines admits no Node version that a required dependency refuses, and admits the current 20, 22 and 24 lines', () => {
  const root = path.resolve(import.meta.dirname, '../..');
  const ours = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
  const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { optional?: boolean; engines?: { node?: string } | string[] }> };
  assert.equal((lock.packages[''] as { engines: { node: string } }).engines.node, ours, 'package-lock.json carries the same range');
  const needs = Object.entries(lock.packages)
    .filter(([name, p]) => name !== '' && !p.optional && p.engines && !Array.isArray(p.engines) && p.engines.node)
    .map(([name, p]) => ({ name, range: (p.engines as { node: string }).node }));
  assert.ok(needs.some((n) => n.name.endsWith('node_modules/vite')), 'vite states its range');
  const candidates: Version[] = [];
  for (let major = 18; major <= 26; major++) for (let minor = 0; minor <= 24; minor++) candidates.push([major, minor, 0]);
  candidates.push([20, 18, 9], [22, 11, 9]);
  for (const v of candidates) {
    if (!satisfies(v, ours)) continue;
    const refusing = needs.filter((n) => !satisfies(v, n.range));
    assert.deepEqual(refusing, [], `Node ${v.join('.')} passes engines (${ours}) but ${refusing.map((n) => `${n.name} wants ${n.range}`).join(', ')}`);
  }
  for (const v of [[20, 19, 0], [22, 12, 0], [24, 0, 0]] as Version[]) assert.ok(satisfies(v, ours), `engines admits Node ${v.join('.')}`);
});
