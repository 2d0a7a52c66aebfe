/**
 * The README and the guides under docs/ point at things that exist: every relative link
 * reaches a file (and its heading, where it names one), every `npm run` names a script of
 * package.json, and every path of the repository they quote in backticks is there. A
 * reader who follows the docs never lands on nothing. And they keep to their budgets: the
 * README's lines, a page's lines, a table cell's characters.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DOCS = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const TEXT = new Map(DOCS.map((doc) => [doc, readFileSync(path.join(ROOT, doc), 'utf8')]));
/** The README's budget: its first screen is the set-up, the rest points into docs/. */
const README_MAX_LINES = 250;
/** A guide's budget: a page longer than this is two guides. */
const PAGE_MAX_LINES = 400;
/** A table cell's budget: a cell longer than this is a paragraph, and belongs in a list. */
const CELL_MAX_CHARS = 300;
/** Top-level folders of the repository a doc may quote a path in. */
const REPO_FOLDERS = ['shared', 'client', 'signaling-server', 'node-worker', 'lab', 'test', 'bench', 'docs', 'examples', 'scripts', '.ci'];

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

test('every relative link of the README and docs/ reaches a file, and the heading it names', () => {
  const dead: string[] = [];
  let checked = 0;
  for (const [doc, text] of TEXT) {
    for (const [, link] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(link!)) continue; // https:, mailto:: outside the repository
      checked++;
      const [file, anchor] = link!.split('#');
      const target = file ? path.join(path.dirname(doc), file) : doc;
      if (!existsSync(path.join(ROOT, target))) dead.push(`${doc}: ${link} (no ${target})`);
      else if (anchor && target.endsWith('.md') && !anchorsOf(readFileSync(path.join(ROOT, target), 'utf8')).has(anchor)) dead.push(`${doc}: ${link} (no heading #${anchor})`);
    }
  }
  assert.ok(checked > 100, `only ${checked} links found: the pattern no longer reads the docs`);
  assert.deepEqual(dead, []);
});

test('every `npm run` the docs name is a script of package.json, and every repository path they quote exists', () => {
  const scripts = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const missing: string[] = [];
  let named = 0;
  let quoted = 0;
  for (const [doc, text] of TEXT) {
    for (const [, script] of text.matchAll(/npm run(?: -s| --silent)? ([\w:.-]+)/g)) {
      named++;
      if (!(script! in scripts)) missing.push(`${doc}: npm run ${script}`);
    }
    for (const [, quote] of text.matchAll(/`([^`\s]+)`/g)) {
      const file = quote!.replace(/[:#].*$/, '');
      // A pattern or a placeholder (test/unit/*.test.ts, bench/<name>.json) names no one file.
      if (!REPO_FOLDERS.some((folder) => file.startsWith(`${folder}/`)) || /[*<>{}]/.test(file)) continue;
      quoted++;
      if (!existsSync(path.join(ROOT, file))) missing.push(`${doc}: ${quote}`);
    }
  }
  assert.ok(named > 20 && quoted > 100, `${named} scripts and ${quoted} paths found: the patterns no longer read the docs`);
  assert.deepEqual(missing, []);
});

test(`the README stays within ${README_MAX_LINES} lines`, () => {
  const lines = TEXT.get('README.md')!.trimEnd().split('\n').length;
  assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines`);
});

test(`every docs page stays within ${PAGE_MAX_LINES} lines, and no table cell of the docs or the README passes ${CELL_MAX_CHARS} characters`, () => {
  const over: string[] = [];
  for (const [doc, text] of TEXT) {
    const lines = text.trimEnd().split('\n');
    if (doc !== 'README.md' && lines.length > PAGE_MAX_LINES) over.push(`${doc}: ${lines.length} lines`);
    let fenced = false;
    lines.forEach((line, i) => {
      if (line.startsWith('```')) fenced = !fenced;
      if (fenced || !line.startsWith('|')) return;
      // Cells split on the pipes a table uses, not the escaped ones inside a cell.
      for (const cell of line.split(/(?<!\\)\|/).slice(1, -1)) {
        if (cell.trim().length > CELL_MAX_CHARS) over.push(`${doc}:${i + 1}: a cell of ${cell.trim().length} characters (${cell.trim().slice(0, 40)}…)`);
      }
    });
  }
  assert.deepEqual(over, []);
});
