/**
 * The shape of the source tree, checked over every .ts file git tracks (or would: new files
 * not yet added count) in the project's own parts: no file grows past what one reader takes in at once, the import graph has no
 * circles (type-only imports count: a circle of types is still two files that cannot be
 * read apart), and the signaling server stays independent of the training engine and the
 * collectives, sharing with them only what shared/protocol/ holds.
 *
 * Imports are read with the TypeScript parser, not a regular expression, so multi-line
 * imports, `import type`, `export ... from`, `import x = require(...)` and `import('...')`
 * types are all seen. Dynamic `import()` calls are edges too: a lazy import still ties the
 * two files together.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PARTS = ['shared', 'client', 'signaling-server', 'node-worker', 'lab', 'test'];
const MAX_LINES = 450;

/**
 * Every .ts file under the parts that git tracks or would (new files not yet added count,
 * ignored ones do not), as a path relative to the repository root.
 */
function sourceFiles(): string[] {
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard', '--', ...PARTS.map((part) => `${part}/*.ts`)], { cwd: ROOT, encoding: 'utf8' });
  return [...new Set(listed.split('\0'))]
    .filter((file) => file.endsWith('.ts') && !file.split('/').includes('node_modules'))
    // A file deleted in the working tree but not yet in the index is no longer source.
    .filter((file) => existsSync(path.join(ROOT, file)))
    .sort();
}

const FILES = sourceFiles();
const TEXT = new Map(FILES.map((file) => [file, readFileSync(path.join(ROOT, file), 'utf8')]));

function lineCount(text: string): number {
  if (text === '') return 0;
  const lines = text.split('\n').length;
  return text.endsWith('\n') ? lines - 1 : lines;
}

/** The module specifiers a file names: static, type-only, re-exports, require and import(). */
function specifiers(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: string[] = [];
  const literal = (node: ts.Node | undefined) => {
    if (node && ts.isStringLiteralLike(node)) found.push(node.text);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) {
      literal(node.moduleSpecifier);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      literal(node.moduleReference.expression);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      literal(node.argument.literal);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      literal(node.arguments[0]);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function isFile(candidate: string): boolean {
  return TEXT.has(candidate) || (existsSync(path.join(ROOT, candidate)) && statSync(path.join(ROOT, candidate)).isFile());
}

/** The project file a relative specifier names, or null for packages and non-.ts targets. */
function resolve(from: string, specifier: string): string | null {
  if (!specifier.startsWith('.')) return null;
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  const candidates = [base, `${base}.ts`, `${base}/index.ts`];
  if (/\.(m|c)?js$/.test(base)) candidates.push(base.replace(/\.(m|c)?js$/, '.ts'));
  for (const candidate of candidates) {
    if (candidate.endsWith('.ts') && isFile(candidate)) return candidate;
  }
  return null;
}

let projectGraph: Map<string, string[]> | null = null;

/** The project's own import graph: each file and the project files it imports (read once). */
function importGraph(): Map<string, string[]> {
  if (projectGraph) return projectGraph;
  const graph = new Map<string, string[]>();
  for (const [file, text] of TEXT) {
    const targets = new Set<string>();
    for (const specifier of specifiers(file, text)) {
      const target = resolve(file, specifier);
      if (target !== null && target !== file) targets.add(target);
    }
    graph.set(file, [...targets].sort());
  }
  projectGraph = graph;
  return graph;
}

/** One circle: a path that comes back to where it began, and every file of its tangle. */
interface Circle {
  path: string[];
  files: string[];
}

/**
 * Every circle, one per strongly connected component (Tarjan): the whole component, and one
 * concrete path through it that comes back to where it began, so the message names the
 * imports to change.
 */
function circles(graph: Map<string, string[]>): Circle[] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const connect = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter++;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        connect(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1) components.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) connect(node);
  return components.map((files) => ({ path: circleThrough(graph, new Set(files)), files }));
}

/** The shortest path from the component's first file back to itself, inside the component. */
function circleThrough(graph: Map<string, string[]>, component: Set<string>): string[] {
  const start = [...component][0]!;
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const next of graph.get(node) ?? []) {
      if (!component.has(next)) continue;
      if (next === start) {
        const loop = [start];
        for (let at = node; at !== start; at = previous.get(at)!) loop.splice(1, 0, at);
        return [...loop, start];
      }
      if (!previous.has(next)) {
        previous.set(next, node);
        queue.push(next);
      }
    }
  }
  return [...component];
}

test('the tree has the source files it is meant to check', () => {
  for (const part of PARTS) {
    assert.ok(FILES.some((file) => file.startsWith(`${part}/`)), `no tracked .ts file under ${part}/`);
  }
});

test(`no source file is over ${MAX_LINES} lines`, () => {
  const offenders = FILES
    .map((file) => ({ file, lines: lineCount(TEXT.get(file)!) }))
    .filter(({ lines }) => lines > MAX_LINES)
    .sort((a, b) => b.lines - a.lines);
  assert.ok(offenders.length === 0, `files over ${MAX_LINES} lines:\n${offenders.map(({ file, lines }) => `  ${file} (${lines})`).join('\n')}`);
});

test('the import graph has no circles, type-only imports included', () => {
  const found = circles(importGraph());
  const lines = found.map(({ path: loop, files }) => {
    const others = files.filter((file) => !loop.includes(file));
    return `  ${loop.join(' -> ')}${others.length > 0 ? ` (tangled with it: ${others.join(', ')})` : ''}`;
  });
  assert.ok(found.length === 0, `import circles:\n${lines.join('\n')}`);
});

test('the signaling server imports nothing from shared/training or shared/collectives', () => {
  const graph = importGraph();
  const forbidden = ['shared/training/', 'shared/collectives/'];
  const offenders: string[] = [];
  for (const [file, targets] of graph) {
    if (!file.startsWith('signaling-server/')) continue;
    for (const target of targets) {
      if (forbidden.some((prefix) => target.startsWith(prefix))) offenders.push(`${file} -> ${target}`);
    }
  }
  assert.ok(offenders.length === 0, `signaling-server imports from the engine:\n${offenders.map((line) => `  ${line}`).join('\n')}`);
});

test('the checks see what they claim: each tangle of imports once, with a loop through it; type-only, multi-line, re-exported and dynamic imports', () => {
  const graph = new Map([
    ['a.ts', ['b.ts']],
    ['b.ts', ['c.ts']],
    ['c.ts', ['a.ts', 'd.ts']],
    ['d.ts', []],
  ]);
  assert.deepEqual(circles(graph), [{ path: ['a.ts', 'b.ts', 'c.ts', 'a.ts'], files: ['a.ts', 'b.ts', 'c.ts'] }]);
  const tangle = new Map([
    ['a.ts', ['b.ts']],
    ['b.ts', ['a.ts', 'c.ts']],
    ['c.ts', ['b.ts']],
    ['d.ts', ['e.ts']],
    ['e.ts', ['d.ts']],
  ]);
  assert.deepEqual(circles(tangle), [{ path: ['a.ts', 'b.ts', 'a.ts'], files: ['a.ts', 'b.ts', 'c.ts'] }, { path: ['d.ts', 'e.ts', 'd.ts'], files: ['d.ts', 'e.ts'] }]);
  const text = "import type { A } from './a';\nexport { B } from './b';\nexport * from './c';\nimport {\n  D,\n} from './d';\ntype E = import('./e').E;\nconst f = await import('./f');\n";
  assert.deepEqual(specifiers('x.ts', text), ['./a', './b', './c', './d', './e', './f']);
});
