/**
 * The Collect panel: while the teacher collects for a lesson's classes (PUT …/collect), a
 * student draws an example on the pad, picks its class and adds it. The examples stay in
 * this tab's IndexedDB (own-examples-db.ts); the student sees their counts per class and can
 * take the last one of a class back, and the server hears the counts only.
 *
 * `window.webringOwnData` is the same path as a drawing, for scripts and tests:
 * `add(label, pixels)` adds one drawing as the collecting task's input (F values in 0..1, row-major, ink = 1) and resolves to
 * the new count of that label; `clear()` empties this tab's collection for the room.
 */
import { sameClasses, type CollectSetting } from '../shared/protocol';
import { WebringError, toWebringError } from '../shared/protocol/errors';
import type { OwnExamples } from '../shared/data/own-examples';
import { IndexedDbOwnExamples } from './own-examples-db';

/** Counts go to the server at most this often while a student (or a script) adds many. */
export const COUNT_REPORT_INTERVAL_MS = 500;

export interface CollectPanelElements {
  section: HTMLElement;
  form: HTMLFormElement;
  classPicker: HTMLSelectElement;
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
  add(label: string, pixels: ArrayLike<number>): Promise<number>;
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
      void this.addDrawing();
    });
    window.webringOwnData = {
      add: async (label, pixels) => {
        await this.opening;
        if (!this.store) throw new WebringError('ERR_BAD_STATE', 'the teacher is not collecting examples in this room yet');
        const count = await this.store.add(label, pixels);
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
      const same = this.store && this.store.room === room && collect && sameClasses(this.store.classes, collect.classes);
      if (same) return;
      this.store = collect ? await IndexedDbOwnExamples.open(room, collect.classes) : null;
      this.el.section.classList.toggle('hidden', !collect);
      this.el.classPicker.replaceChildren(...(collect?.classes ?? []).map((c) => new Option(c, c)));
      this.changed();
    });
    return this.opening;
  }

  /** This tab's examples for a run of `classes`, or null when it collected none for them. */
  examplesFor(classes: readonly string[]): OwnExamples | null {
    return this.store && sameClasses(this.store.classes, classes) ? this.store : null;
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

function article(label: string): string {
  return /^[aeiou]/i.test(label) ? 'an' : 'a';
}
