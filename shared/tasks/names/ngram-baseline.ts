/**
 * Count models of names over the task's symbols (names-text.ts), the yardstick a trained
 * model's held-out loss is read against. An order-n model predicts a symbol from the n − 1
 * before it (padded with the start mark, as the network's examples are) with add-α
 * smoothing over all VOCAB_SIZE symbols: P(s | c) = (count(c, s) + α) / (count(c) + α · V).
 * Every one of the V symbols can be a target (the mark as the end), so no mass is wasted.
 *
 * Held out, in nats per character (the mean of −ln P over every predicted symbol, end marks
 * included, the same quantity as the network's mean softmax cross-entropy), on the fixed
 * split of names-text.ts: unigram 2.88, bigram add-0.1 2.448, trigram 2.208, 4-gram 2.114 (the best
 * order and α of these: α 0.03 gives 2.138, α 0.3 2.159), 5-gram 2.234.
 */
import { VOCAB_SIZE, encodeName, namesToExamples } from './names-text';

export interface NgramModel {
  readonly order: number;
  readonly alpha: number;
  /** P(· | context) for the order − 1 symbols before the prediction (oldest first; longer contexts use their last order − 1). */
  probabilities(context: ArrayLike<number>): Float64Array;
  /** ln P(symbol | context). */
  logProbability(context: ArrayLike<number>, symbol: number): number;
}

/** The key of the last `length` symbols of `context` (base VOCAB_SIZE; exact up to length 10). */
function contextKey(context: ArrayLike<number>, length: number): number {
  let key = 0;
  for (let i = context.length - length; i < context.length; i++) key = key * VOCAB_SIZE + (i >= 0 ? context[i]! : 0);
  return key;
}

/** Counts every example of `names` in an order-`order` model with add-`alpha` smoothing. */
export function trainNgram(names: readonly string[], order: number, alpha = 0.1): NgramModel {
  if (!Number.isInteger(order) || order < 1 || order > 11) throw new Error(`ngram: order must be 1..11, not ${order}`);
  if (!(alpha > 0)) throw new Error(`ngram: alpha must be positive, not ${alpha}`);
  const history = order - 1;
  const counts = new Map<number, Uint32Array>();
  const totals = new Map<number, number>();
  const examples = namesToExamples(names, Math.max(1, history));
  for (let i = 0; i < examples.count; i++) {
    const key = history === 0 ? 0 : contextKey(examples.features.subarray(i * history, (i + 1) * history), history);
    let row = counts.get(key);
    if (!row) counts.set(key, (row = new Uint32Array(VOCAB_SIZE)));
    row[examples.targets[i]!]!++;
    totals.set(key, (totals.get(key) ?? 0) + 1);
  }
  const keyOf = (context: ArrayLike<number>) => (history === 0 ? 0 : contextKey(context, history));
  return {
    order,
    alpha,
    probabilities(context) {
      const key = keyOf(context);
      const row = counts.get(key);
      const denominator = (totals.get(key) ?? 0) + alpha * VOCAB_SIZE;
      const p = new Float64Array(VOCAB_SIZE);
      for (let s = 0; s < VOCAB_SIZE; s++) p[s] = ((row?.[s] ?? 0) + alpha) / denominator;
      return p;
    },
    logProbability(context, symbol) {
      const key = keyOf(context);
      const numerator = (counts.get(key)?.[symbol] ?? 0) + alpha;
      return Math.log(numerator / ((totals.get(key) ?? 0) + alpha * VOCAB_SIZE));
    },
  };
}

/** The model's mean −ln P per predicted symbol (each character and each end mark) over `names`, in nats. */
export function ngramNatsPerChar(model: NgramModel, names: readonly string[]): number {
  const history = model.order - 1;
  let sum = 0;
  let count = 0;
  for (const name of names) {
    const symbols = encodeName(name);
    const padded = new Uint8Array(history + symbols.length + 1);
    padded.set(symbols, history);
    // padded: history start marks, the name, the end mark (0).
    for (let t = 0; t <= symbols.length; t++) {
      sum -= model.logProbability(padded.subarray(t, t + history), padded[t + history]!);
      count++;
    }
  }
  return count === 0 ? NaN : sum / count;
}

export interface NgramBaselines {
  /** Order 2, add-α. */
  bigram: number;
  /** Order 4, add-α. */
  fourgram: number;
}

/** The bigram's and the 4-gram's held-out nats per character, both add-`alpha` (0.1), trained on `train`. */
export function ngramBaselines(train: readonly string[], heldOut: readonly string[], alpha = 0.1): NgramBaselines {
  return {
    bigram: ngramNatsPerChar(trainNgram(train, 2, alpha), heldOut),
    fourgram: ngramNatsPerChar(trainNgram(train, 4, alpha), heldOut),
  };
}
