/**
 * Names from a model that answers next-symbol probabilities for a batch of contexts (a
 * tab's live weights in its compute thread, a checkpoint loaded with tf.loadLayersModel):
 * the pages' samples and completions. Pure: no tfjs, the caller's `ask` runs the model. All
 * the names of one sample are drawn together, one batch per character, so ten names cost
 * about as many round trips to the model as one.
 */
import { CONTEXT, END, SYMBOLS, encodeName, writeContext } from './names-text';

/** The model's output probabilities for `n` contexts (n × CONTEXT symbol indices), n × SYMBOLS.length; null while no model is ready. */
export type Ask = (features: Float32Array, n: number) => Promise<Float32Array | null>;

/** What the teacher page samples at every epoch: stated on the page, so anyone can reproduce it from the checkpoint. */
export const SAMPLE_SEED = 2026;
export const SAMPLE_TEMPERATURE = 0.8;
export const SAMPLE_COUNT = 10;
/** A name is cut here if the end mark has not come (the longest real one has 15 characters). */
export const MAX_NAME_CHARS = 20;

export interface SampleOptions {
  temperature?: number;
  /** The names' first characters, kept as given. */
  prefix?: string;
  maxLength?: number;
}

/** `probabilities` reshaped by a temperature: p^(1/T), renormalised (T = 1 keeps them; lower is more conservative). */
export function atTemperature(probabilities: ArrayLike<number>, temperature: number): Float64Array {
  if (!(temperature > 0)) throw new RangeError(`a temperature is positive, not ${temperature}`);
  const out = new Float64Array(probabilities.length);
  let total = 0;
  for (let s = 0; s < out.length; s++) total += out[s] = Math.pow(Math.max(0, probabilities[s]!), 1 / temperature);
  for (let s = 0; s < out.length; s++) out[s] = total > 0 ? out[s]! / total : 0;
  return out;
}

/** The symbol at which the cumulative probability first exceeds u (u in [0, 1)); the last likely one when rounding leaves u beyond the sum. */
export function pickSymbol(probabilities: ArrayLike<number>, u: number): number {
  let total = 0;
  for (let s = 0; s < probabilities.length; s++) total += probabilities[s]!;
  let target = u * total;
  let last = END;
  for (let s = 0; s < probabilities.length; s++) {
    const p = probabilities[s]!;
    if (p <= 0) continue;
    last = s;
    if (target < p) return s;
    target -= p;
  }
  return last;
}

/**
 * `count` names, drawn together with `rng` (uniform in [0, 1): mulberry32(seed) from
 * shared/util/random), each continuing `prefix` until the model draws the end mark. Null
 * while the model is not ready.
 */
export async function sampleNames(ask: Ask, rng: () => number, count: number, options: SampleOptions = {}): Promise<string[] | null> {
  const { temperature = 1, prefix = '', maxLength = MAX_NAME_CHARS } = options;
  const drawn = Array.from({ length: count }, () => Array.from(encodeName(prefix)));
  const open = drawn.map(() => true);
  const features = new Float32Array(count * CONTEXT);
  while (open.some(Boolean)) {
    const rows = drawn.map((_, i) => i).filter((i) => open[i]);
    rows.forEach((i, r) => writeContext(drawn[i]!, drawn[i]!.length, CONTEXT, features, r * CONTEXT));
    const probabilities = await ask(features.subarray(0, rows.length * CONTEXT), rows.length);
    if (!probabilities) return null;
    rows.forEach((i, r) => {
      const row = atTemperature(probabilities.subarray(r * SYMBOLS.length, (r + 1) * SYMBOLS.length), temperature);
      const symbol = pickSymbol(row, rng());
      if (symbol === END) open[i] = false;
      else drawn[i]!.push(symbol);
      if (drawn[i]!.length >= maxLength) open[i] = false;
    });
  }
  return drawn.map((symbols) => symbols.map((s) => SYMBOLS[s]).join(''));
}

/** The model's next letter after `prefix`, most likely first: each symbol (the end mark as '.') and its probability. Null while no model is ready. */
export async function nextLetters(ask: Ask, prefix: string): Promise<Array<{ symbol: string; probability: number }> | null> {
  const row = new Float32Array(CONTEXT);
  const symbols = encodeName(prefix);
  writeContext(symbols, symbols.length, CONTEXT, row);
  const probabilities = await ask(row, 1);
  if (!probabilities) return null;
  return SYMBOLS.map((symbol, s) => ({ symbol, probability: probabilities[s]! })).sort((a, b) => b.probability - a.probability);
}
