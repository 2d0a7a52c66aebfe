/**
 * This tab's own examples (a run on the class's own data), kept in its IndexedDB only: one
 * collection per room and class set, which survives a reload and never leaves the device
 * (shared/data/own-examples.ts has the rules: sequence numbers that only grow,
 * tombstones for deletions, a new key when the collection is cleared). The trainer reads
 * the in-memory copy this keeps in step with the database.
 */
import { openDB, type DBSchema, type IDBPDatabase } from 'idb';
import { WebringError } from '../shared/protocol/errors';
import { MAX_OWN_SEQ, type CollectSetting } from '../shared/protocol';
import { newStoreKey, tombstone, type OwnExample, type OwnExamples } from '../shared/data/own-examples';
import { collectLabelsOf, collectTaskOf, ownDataOf } from '../shared/tasks/collect';
import { DEFAULT_TASK } from '../shared/tasks/registry';
import type { OwnData } from '../shared/tasks/task';

const DB_NAME = 'webring-own-examples';
const DB_VERSION = 1;

interface StoredExample {
  key: number;
  seq: number;
  label: string;
  pixels: Float32Array | null;
  /** A tombstone's item's size (own-examples.ts). */
  size?: number;
}

interface OwnExamplesDb extends DBSchema {
  /** One per room and setting (task and classes): the key its examples are filed under now. */
  collections: { key: string; value: { id: string; key: number } };
  examples: { key: [number, number]; value: StoredExample };
}

let database: Promise<IDBPDatabase<OwnExamplesDb>> | null = null;
function db(): Promise<IDBPDatabase<OwnExamplesDb>> {
  database ??= openDB<OwnExamplesDb>(DB_NAME, DB_VERSION, {
    upgrade(d) {
      d.createObjectStore('collections', { keyPath: 'id' });
      d.createObjectStore('examples', { keyPath: ['key', 'seq'] });
    },
  });
  return database;
}

/** The default task's collections keep the id they had before tasks (room and classes), so a class's drawings survive the upgrade. */
const collectionId = (room: string, setting: CollectSetting) => {
  const task = collectTaskOf(setting).id;
  const labels = collectLabelsOf(setting);
  return JSON.stringify(task === DEFAULT_TASK.id ? [room, ...labels] : [room, { task }, ...labels]);
};
const examplesOf = (key: number) => IDBKeyRange.bound([key, 0], [key, MAX_OWN_SEQ]);

export class IndexedDbOwnExamples implements OwnExamples {
  private list: OwnExample[];

  /** The labels its items are filed under: the lesson's classes, or a text task's one label. */
  readonly labels: readonly string[];
  /** How the task's items are checked (and a text task's typed). */
  readonly own: OwnData;

  private constructor(
    readonly room: string,
    readonly setting: CollectSetting,
    private storeKey: number,
    stored: StoredExample[],
  ) {
    this.labels = collectLabelsOf(setting);
    this.own = ownDataOf(collectTaskOf(setting));
    this.list = stored.sort((a, b) => a.seq - b.seq).map((e) => ({ seq: e.seq, label: e.label, pixels: e.pixels, ...(e.size !== undefined ? { size: e.size } : {}) }));
  }

  /** This tab's collection for `room` and what it collects, made empty the first time. */
  static async open(room: string, setting: CollectSetting): Promise<IndexedDbOwnExamples> {
    const d = await db();
    const id = collectionId(room, setting);
    let collection = await d.get('collections', id);
    if (!collection) {
      collection = { id, key: newStoreKey() };
      await d.put('collections', collection);
    }
    return new IndexedDbOwnExamples(room, setting, collection.key, await d.getAll('examples', examplesOf(collection.key)));
  }

  get key(): number {
    return this.storeKey;
  }

  get examples(): readonly OwnExample[] {
    return this.list;
  }

  /**
   * Adds one item of the task (shared/tasks/task.ts OwnData), checked as the task says: a
   * drawing's F values in 0..1 as its pad prepares it (row-major, ink = 1), or a text task's
   * text. Resolves to how many this tab now holds of `label`.
   */
  async add(label: string, item: ArrayLike<number> | string): Promise<number> {
    if (!this.labels.includes(label)) throw new WebringError('ERR_BAD_REQUEST', `"${label}" is not one of this lesson's classes (${this.labels.join(', ')})`, 'label');
    let values: Float32Array;
    if (typeof item === 'string') {
      if (this.own.collects !== 'text') throw new WebringError('ERR_BAD_REQUEST', 'this lesson collects drawings, not text', 'pixels');
      values = this.own.encode(item);
    } else {
      this.own.check(item);
      values = Float32Array.from(item);
    }
    const seq = this.list.length === 0 ? 0 : this.list.at(-1)!.seq + 1;
    if (seq > MAX_OWN_SEQ) throw new WebringError('ERR_BAD_REQUEST', `a tab holds at most ${MAX_OWN_SEQ + 1} examples`, 'pixels');
    await (await db()).put('examples', { key: this.storeKey, seq, label, pixels: values });
    this.list.push({ seq, label, pixels: values });
    return this.count(label);
  }

  /** Deletes the newest live item of `label`, keeping its place and size (a tombstone); false when there is none. */
  async deleteLast(label: string): Promise<boolean> {
    let example: OwnExample | undefined;
    for (let i = this.list.length - 1; i >= 0 && !example; i--) if (this.list[i]!.label === label && this.list[i]!.pixels !== null) example = this.list[i];
    if (!example) return false;
    await (await db()).put('examples', { key: this.storeKey, seq: example.seq, label, pixels: null, size: example.pixels!.length });
    tombstone(example);
    return true;
  }

  /** Empties this collection: it becomes a new one, with a new key, to the class another device. */
  async clear(): Promise<void> {
    const d = await db();
    const old = this.storeKey;
    this.storeKey = newStoreKey();
    this.list = [];
    await d.put('collections', { id: collectionId(this.room, this.setting), key: this.storeKey });
    await d.delete('examples', examplesOf(old));
  }

  /** Live examples of `label`. */
  count(label: string): number {
    let n = 0;
    for (const e of this.list) if (e.label === label && e.pixels !== null) n++;
    return n;
  }

  /** Live items per label, every label named (0 for none): what the student and the teacher see. */
  counts(): Record<string, number> {
    return Object.fromEntries(this.labels.map((c) => [c, this.count(c)]));
  }
}
