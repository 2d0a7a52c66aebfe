/**
 * The engine knows only "P parameters, and examples of F numbers with a target": every
 * workload lives in shared/tasks/ (docs/architecture.md, "Where the next thing goes"). So
 * no product file outside shared/tasks/ may name the digit shape, MNIST or its two model
 * ids; a new task is one folder, not edits across the tree. Product files are the code
 * and pages under shared/, client/, signaling-server/, node-worker/ and lab/ (tests and
 * docs may name what they like). Read as text, comments included: a comment that says
 * "784 pixels" is a place the next task would have to edit too.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PRODUCT = ['shared', 'client', 'signaling-server', 'node-worker', 'lab'];
const TASKS = 'shared/tasks/';
const EXTENSIONS = ['.ts', '.html', '.css'];

/** What names a workload: MNIST in any case, the model ids as words, the digit's pixel count or its 28 × 28 shape. */
const FORBIDDEN: Array<{ what: string; pattern: RegExp }> = [
  { what: 'MNIST', pattern: /mnist/i },
  { what: "the model id 'mlp'", pattern: /\bmlps?\b/i },
  { what: "the model id 'cnn'", pattern: /\bcnns?\b/i },
  { what: 'the digit\'s 784 pixels', pattern: /\b784\b/ },
  { what: 'the 28 × 28 digit shape', pattern: /\b28\s*(?:[x×*,]|by)\s*28\b/i },
];

function productFiles(): string[] {
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard', '--', ...PRODUCT], { cwd: ROOT, encoding: 'utf8' });
  return [...new Set(listed.split('\0'))]
    .filter((file) => EXTENSIONS.some((ext) => file.endsWith(ext)) && !file.startsWith(TASKS))
    .filter((file) => existsSync(path.join(ROOT, file)))
    .sort();
}

/** Every line of `files` that names a workload, as "file:line: what: the line". */
export function workloadNames(files: Array<{ file: string; text: string }>): string[] {
  const found: string[] = [];
  for (const { file, text } of files) {
    text.split('\n').forEach((line, i) => {
      for (const { what, pattern } of FORBIDDEN) if (pattern.test(line)) found.push(`${file}:${i + 1}: ${what}: ${line.trim().slice(0, 120)}`);
    });
  }
  return found;
}

test('the check sees every product part, and the tasks it exempts exist', () => {
  const files = productFiles();
  for (const part of PRODUCT) assert.ok(files.some((f) => f.startsWith(`${part}/`)), `no file of ${part}/ was read`);
  assert.ok(existsSync(path.join(ROOT, TASKS, 'registry.ts')));
});

test('the check finds each way of naming a workload, and passes the words that are not one', () => {
  const named = workloadNames([
    { file: 'a.ts', text: "const d = 'mnist-60k';\n// the MLP learns\nmodel: 'cnn'\nnew Float32Array(784)\n// a 28×28 image\nshape [28, 28, 1]" },
    { file: 'b.ts', text: '// 2028 steps; port 8280; a 28 ms wait; cnnx, mlpack: not words of ours\nconst y = 17840;' },
  ]);
  assert.deepEqual(
    named.map((n) => n.split(':').slice(0, 2).join(':')),
    ['a.ts:1', 'a.ts:2', 'a.ts:3', 'a.ts:4', 'a.ts:5', 'a.ts:6'],
  );
});

test('no product file outside shared/tasks/ names the digit shape, MNIST or the model ids', () => {
  const files = productFiles().map((file) => ({ file, text: readFileSync(path.join(ROOT, file), 'utf8') }));
  const named = workloadNames(files);
  assert.deepEqual(named, [], `${named.length} line(s) name a workload outside ${TASKS}:\n${named.join('\n')}`);
});
