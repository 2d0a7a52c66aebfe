/**
 * The model's answer beside the digit pad: the class it picked, one labelled probability bar
 * per class, and the one live sentence a screen reader hears. It shows what it is given;
 * the pad (digit-pad.ts) decides when to ask the model.
 */
import { el } from '../../element';

/** Why no answer is shown: nothing drawn, no model, the pad disabled, or the model failed. */
export type NoAnswer = 'empty' | 'unavailable' | 'disabled' | 'error';

interface Bar {
  row: HTMLLIElement;
  fill: HTMLSpanElement;
  value: HTMLSpanElement;
}

export class AnswerView {
  /** The answer's element; its data-state, data-predicted and data-probabilities are what the tests read. */
  readonly element = el('div', 'digit-pad__result');
  private readonly answer = el('p', 'digit-pad__class', '–');
  private readonly status: HTMLParagraphElement;
  private readonly bars = el('ol', 'digit-pad__bars');
  private barRows: Bar[] = [];
  private classesShown: readonly string[];

  /** `id`: the pad's id, for the status element's; `classes`: the model's classes in output order. */
  constructor(id: string, emptyHint: string, classes: readonly string[]) {
    this.element.dataset.testid = 'digit-prediction';
    this.answer.setAttribute('aria-hidden', 'true');
    // Only this sentence is live, and it changes only when the answer does: refresh() runs
    // every second while the class trains, and re-reading ten percentages each time would
    // drown a screen reader. The bars stay readable on demand.
    this.status = el('p', 'digit-pad__status', emptyHint);
    this.status.id = `${id}-status`;
    this.status.setAttribute('role', 'status');
    this.status.setAttribute('aria-live', 'polite');
    this.bars.setAttribute('aria-label', 'Probability of each class');
    this.classesShown = classes;
    this.makeBars();
    this.element.append(this.answer, this.status, this.bars);
  }

  /** The classes the bars stand for, in the model's output order. */
  get classes(): readonly string[] {
    return this.classesShown;
  }

  /** One bar per class from now on; the answer on screen is for the caller to renew. */
  setClasses(classes: readonly string[]): void {
    this.classesShown = [...classes];
    this.makeBars();
  }

  showNoAnswer(state: NoAnswer, text: string): void {
    const result = this.element;
    result.dataset.state = state;
    delete result.dataset.predicted;
    delete result.dataset.probabilities;
    this.answer.textContent = '–';
    for (const { row, fill, value } of this.barRows) {
      row.classList.remove('is-top');
      fill.style.width = '0%';
      value.textContent = '–';
    }
    this.setStatus(text);
  }

  showAnswer(probabilities: Float32Array): void {
    const result = this.element;
    const classes = this.classesShown;
    let top = 0;
    probabilities.forEach((p, i) => {
      if (p > probabilities[top]!) top = i;
    });
    result.dataset.state = 'predicted';
    result.dataset.predicted = classes[top]!;
    result.dataset.probabilities = Array.from(probabilities, (p) => p.toFixed(4)).join(',');
    this.answer.textContent = classes[top]!;
    this.barRows.forEach(({ row, fill, value }, digit) => {
      const p = probabilities[digit]!;
      row.classList.toggle('is-top', digit === top);
      fill.style.width = `${(p * 100).toFixed(1)}%`;
      value.textContent = `${Math.round(p * 100)}%`;
    });
    this.setStatus(`Looks like ${/^[aeiou]/i.test(classes[top]!) ? 'an' : 'a'} ${classes[top]}.`);
  }

  /** The drawing changed: the answer on screen is about the previous drawing until the new one arrives. */
  markPending(): void {
    const result = this.element;
    if (result.dataset.state !== 'predicted') return;
    result.dataset.state = 'pending';
    delete result.dataset.predicted;
    delete result.dataset.probabilities;
  }

  private setStatus(text: string): void {
    if (this.status.textContent !== text) this.status.textContent = text;
  }

  private makeBars(): void {
    this.barRows = this.classesShown.map((name, index) => {
      const row = el('li', 'digit-pad__bar');
      row.dataset.digit = String(index);
      row.dataset.class = name;
      const label = el('span', 'digit-pad__bar-label', name);
      const track = el('span', 'digit-pad__bar-track');
      track.setAttribute('aria-hidden', 'true');
      const fill = el('span', 'digit-pad__bar-fill');
      track.append(fill);
      const value = el('span', 'digit-pad__bar-value', '–');
      row.append(label, track, value);
      return { row, fill, value };
    });
    this.bars.replaceChildren(...this.barRows.map((b) => b.row));
  }
}

/** Accepts probabilities as they are; anything else (logits) goes through a softmax. */
export function toProbabilities(out: Float32Array, classes: number): Float32Array {
  if (out.length !== classes) throw new Error(`the model returned ${out.length} values, expected ${classes}`);
  let sum = 0;
  let isDistribution = true;
  for (const v of out) {
    if (!Number.isFinite(v)) throw new Error('the model returned a value that is not a number');
    if (v < 0 || v > 1) isDistribution = false;
    sum += v;
  }
  if (isDistribution && Math.abs(sum - 1) < 1e-3) return out;
  const max = Math.max(...out);
  const exp = out.map((v) => Math.exp(v - max));
  const total = exp.reduce((a, b) => a + b, 0);
  return exp.map((v) => v / total);
}
