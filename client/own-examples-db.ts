/**
 * This tab's own examples (a run on the class's own data), kept in its IndexedDB only: one
 * collection per room and class set, which survives a reload and never leaves the device
 * (shared/data/own-examples.ts has the rules: sequence numbers that only grow,
 * tombstones for deletions, a new key when the collection is cleared). The trainer reads
 * the in-memory copy this keeps in step with the database.
 */
import { openDB, type DBSchema, type IDBPDatabase } from 'idb';
import { COLLECT_TASK } from '../shared/tasks/registry';
import { featureCount } from '../shared/tasks/task';

/** Numbers in one collected example: the collecting task's input (a drawing, as its pad prepares it). */
const EXAMPLE_FEATURES = featureCount(COLLECT_TASK.example);
import { WebringError } from '../shared/protocol/errors';
import { MAX_OWN_SEQ } from '../shared/protocol';
import { newStoreKey, type OwnExample, type OwnExamples } from '../shared/data/own-examples';

const DB_NAME = 'webring-own-examples';
const DB_VERSION = 1;

interface StoredExample {
  key: number;
  seq: number;
  label: string;
  pixels: Float32Array | null;
}

interface OwnExamplesDb extends DBSchema {
  /** One per room and class set: the key its examples are filed under now. */
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

const collectionId = (room: string, classes: readonly string[]) => JSON.stringify([room, ...classes]);
const examplesOf = (key: number) => IDBKeyRange.bound([key, 0], [key, MAX_OWN_SEQ]);

export class IndexedDbOwnExamples implements OwnExamples {
  private list: OwnExample[];

  private constructor(
    readonly room: string,
    readonly classes: readonly string[],
    private storeKey: number,
    stored: StoredExample[],
  ) {
    this.list = stored.sort((a, b) => a.seq - b.seq).map((e) => ({ seq: e.seq, label: e.label, pixels: e.pixels }));
  }

  /** This tab's collection for `room` and `classes`, made empty the first time. */
  static async open(room: string, classes: readonly string[]): Promise<IndexedDbOwnExamples> {
    const d = await db();
    const id = collectionId(room, classes);
    let collection = await d.get('collections', id);
    if (!collection) {
      collection = { id, key: newStoreKey() };
      await d.put('collections', collection);
    }
    return new IndexedDbOwnExamples(room, classes, collection.key, await d.getAll('examples', examplesOf(collection.key)));
  }

  get key(): number {
    return this.storeKey;
  }

  get examples(): readonly OwnExample[] {
    return this.list;
  }

  /**
   * Adds one example: `pixels` are the collecting task's input, F values in 0..1 (a drawing
   * as its pad prepares it, row-major, ink = 1). Resolves to how many this tab now holds of `label`.
   */
  async add(label: string, pixels: ArrayLike<number>): Promise<number> {
    if (!this.classes.includes(label)) throw new WebringError('ERR_BAD_REQUEST', `"${label}" is not one of this lesson's classes (${this.classes.join(', ')})`, 'label');
    if (pixels.length !== EXAMPLE_FEATURES) throw new WebringError('ERR_BAD_REQUEST', `an example has ${EXAMPLE_FEATURES} pixels, got ${pixels.length}`, 'pixels');
    const values = Float32Array.from(pixels);
    if (!values.every((v) => v >= 0 && v <= 1)) throw new WebringError('ERR_BAD_REQUEST', 'pixels are numbers from 0 (paper) to 1 (ink)', 'pixels');
    const seq = this.list.length === 0 ? 0 : this.list.at(-1)!.seq + 1;
    if (seq > MAX_OWN_SEQ) throw new WebringError('ERR_BAD_REQUEST', `a tab holds at most ${MAX_OWN_SEQ + 1} examples`, 'pixels');
    await (await db()).put('examples', { key: this.storeKey, seq, label, pixels: values });
    this.list.push({ seq, label, pixels: values });
    return this.count(label);
  }

  /** Deletes the newest live example of `label`, keeping its place (a tombstone); false when there is none. */
  async deleteLast(label: string): Promise<boolean> {
    let example: OwnExample | undefined;
    for (let i = this.list.length - 1; i >= 0 && !example; i--) if (this.list[i]!.label === label && this.list[i]!.pixels !== null) example = this.list[i];
    if (!example) return false;
    await (await db()).put('examples', { key: this.storeKey, seq: example.seq, label, pixels: null });
    example.pixels = null;
    return true;
  }

  /** Empties this collection: it becomes a new one, with a new key, to the class another device. */
  async clear(): Promise<void> {
    const d = await db();
    const old = this.storeKey;
    this.storeKey = newStoreKey();
    this.list = [];
    await d.put('collections', { id: collectionId(this.room, this.classes), key: this.storeKey });
    await d.delete('examples', examplesOf(old));
  }

  /** Live examples of `label`. */
  count(label: string): number {
    let n = 0;
    for (const e of this.list) if (e.label === label && e.pixels !== null) n++;
    return n;
  }

  /** Live examples per class, every class named (0 for none): what the student and the teacher see. */
  counts(): Record<string, number> {
    return Object.fromEntries(this.classes.map((c) => [c, this.count(c)]));
  }
}
