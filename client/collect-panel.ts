/**
 * The Collect panel: while the teacher collects (PUT …/collect), a student adds items of
 * the lesson's task: for a lesson's classes, an example drawn on the pad with its class
 * picked; for a text task (names), a typed name. The items stay in this tab's IndexedDB
 * (own-examples-db.ts); the student sees their counts (and a text task's latest items) and
 * can take the last one back, and the server hears the counts only.
 *
 * `window.webringOwnData` is the same path, for scripts and tests: `add(label, item)` adds
 * one drawing (the task's input: F values in 0..1, row-major, ink = 1) or, for a text task,
 * one typed text under its label ("names"), and resolves to the new count of that label;
 * `clear()` empties this tab's collection for the room.
 */
import type { CollectSetting } from '../shared/protocol';
import { WebringError, toWebringError } from '../shared/protocol/errors';
import type { OwnExamples } from '../shared/data/own-examples';
import type { OwnRun } from '../shared/data/run-data';
import { collectionServes, sameCollection } from '../shared/tasks/collect';
import { IndexedDbOwnExamples } from './own-examples-db';

/** Counts go to the server at most this often while a student (or a script) adds many. */
export const COUNT_REPORT_INTERVAL_MS = 500;
/** A text task's latest items the student sees under its count. */
const ITEMS_SHOWN = 12;

export interface CollectPanelElements {
  section: HTMLElement;
  form: HTMLFormElement;
  hint: HTMLElement;
  classPicker: HTMLSelectElement;
  classLabel: HTMLElement;
  text: HTMLInputElement;
  textLabel: HTMLElement;
  add: HTMLButtonElement;
  status: HTMLElement;
  counts: HTMLElement;
}

export interface CollectPanelOptions {
  /** What is drawn on the pad, preprocessed (null: nothing), and clearing it after an add. */
  drawing(): { input: Float32Array | null; clear(): void } | null;
  /** Tells the server this tab's counts per class. */
  report(counts: Record<string, number>): void;
}

export interface OwnDataApi {
  add(label: string, item: ArrayLike<number> | string): Promise<number>;
  clear(): Promise<void>;
}

declare global {
  interface Window {
    webringOwnData?: OwnDataApi;
  }
}

export class CollectPanel {
  private store: IndexedDbOwnExamples | null = null;
  private opening: Promise<void> = Promise.resolve();
  private reportTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly el: CollectPanelElements,
    private readonly options: CollectPanelOptions,
  ) {
    el.form.addEventListener('submit', (e) => {
      e.preventDefault();
      void (this.store?.own.collects === 'text' ? this.addText() : this.addDrawing());
    });
    window.webringOwnData = {
      add: async (label, item) => {
        await this.opening;
        if (!this.store) throw new WebringError('ERR_BAD_STATE', 'the teacher is not collecting examples in this room yet');
        const count = await this.store.add(label, item);
        this.changed();
        return count;
      },
      clear: async () => {
        await this.opening;
        if (!this.store) throw new WebringError('ERR_BAD_STATE', 'the teacher is not collecting examples in this room yet');
        await this.store.clear();
        this.changed();
      },
    };
  }

  /** The room's collecting changed (the join reply, `room:collect`): open that collection, or hide the panel. */
  setCollect(room: string, collect: CollectSetting | null): Promise<void> {
    this.opening = this.opening.then(async () => {
      const same = this.store && this.store.room === room && collect && sameCollection(this.store.setting, collect);
      if (same) return;
      this.store = collect ? await IndexedDbOwnExamples.open(room, collect) : null;
      this.el.section.classList.toggle('hidden', !collect);
      this.showForm();
      this.changed();
    });
    return this.opening;
  }

  /** This tab's items for a run (its task and classes), or null when it collected none for it. */
  examplesFor(run: OwnRun): OwnExamples | null {
    return this.store && collectionServes(this.store.setting, run) ? this.store : null;
  }

  /** The form for what the lesson collects: a class picker for drawings, a text box for a text task. */
  private showForm(): void {
    const own = this.store?.own;
    const text = own?.collects === 'text';
    const el = this.el;
    el.classPicker.replaceChildren(...(this.store?.labels ?? []).map((c) => new Option(c, c)));
    for (const part of [el.classPicker, el.classLabel]) part.hidden = text;
    for (const part of [el.text, el.textLabel]) part.hidden = !text;
    if (own?.collects === 'text') {
      el.text.maxLength = own.maxChars;
      el.add.textContent = `Add to ${own.label}`;
      el.hint.textContent = `Your teacher is collecting ${own.label}. Type one (yours, your family's, one you like), press Add, and add as many as you like. They stay on this device: the class learns from them without seeing them, and only how many you added leaves this tab.`;
    } else {
      el.add.textContent = 'Add the drawing';
      el.hint.textContent = 'Your teacher picked these classes. Draw one on the pad below, choose its class and press Add. Your drawings stay on this device, and the class learns how many you have of each. What training sends from this device is under "What leaves this tab".';
    }
  }

  private async addText(): Promise<void> {
    const store = this.store;
    if (!store || store.own.collects !== 'text') return;
    const label = store.own.label;
    try {
      const count = await store.add(label, this.el.text.value);
      this.el.text.value = '';
      this.changed();
      this.say(`Added. You have ${count} of your own ${label}.`);
    } catch (err) {
      this.say(`Not added: ${toWebringError(err).message}`);
    }
  }

  private async addDrawing(): Promise<void> {
    const store = this.store;
    const label = this.el.classPicker.value;
    const pad = this.options.drawing();
    if (!store || !pad) return this.say('The pad is still loading.');
    if (!pad.input) return this.say(`Draw ${article(label)} ${label} on the pad first.`);
    try {
      const count = await store.add(label, pad.input);
      pad.clear();
      this.changed();
      this.say(`Added. You have ${count} ${label} example${count === 1 ? '' : 's'}.`);
    } catch (err) {
      this.say(`Not added: ${toWebringError(err).message}`);
    }
  }

  private async deleteLast(label: string): Promise<void> {
    if (await this.store?.deleteLast(label)) {
      this.changed();
      this.say(`Took back your last ${label}.`);
    }
  }

  /** Redraws the counts, and reports them (throttled). */
  private changed(): void {
    const store = this.store;
    const counts = store?.counts() ?? {};
    this.el.counts.replaceChildren(
      ...Object.entries(counts).map(([label, count]) => {
        const item = document.createElement('li');
        Object.assign(item.dataset, { testid: 'collect-count', class: label, count: String(count) });
        const remove = document.createElement('button');
        remove.type = 'button';
        remove.className = 'secondary';
        remove.textContent = 'Delete last';
        remove.disabled = count === 0;
        remove.setAttribute('aria-label', `Delete your last ${label} example`);
        remove.addEventListener('click', () => void this.deleteLast(label));
        item.append(`${label}: ${count} `, remove);
        if (store?.own.collects === 'text') item.append(latestItems(store, label));
        return item;
      }),
    );
    if (!store || this.reportTimer !== null) return;
    this.reportTimer = setTimeout(() => {
      this.reportTimer = null;
      if (this.store) this.options.report(this.store.counts());
    }, COUNT_REPORT_INTERVAL_MS);
  }

  private say(text: string): void {
    this.el.status.textContent = text;
  }
}

/** A text task's latest live items, newest first, so a student sees what they added. */
function latestItems(store: IndexedDbOwnExamples, label: string): HTMLElement {
  const own = store.own;
  const list = document.createElement('span');
  list.className = 'hint';
  list.dataset.testid = 'collect-items';
  if (own.collects !== 'text') return list;
  const texts: string[] = [];
  for (let i = store.examples.length - 1; i >= 0 && texts.length < ITEMS_SHOWN; i--) {
    const e = store.examples[i]!;
    if (e.label === label && e.pixels !== null) texts.push(own.decode(e.pixels));
  }
  list.textContent = texts.join(', ');
  return list;
}

function article(label: string): string {
  return /^[aeiou]/i.test(label) ? 'an' : 'a';
}
