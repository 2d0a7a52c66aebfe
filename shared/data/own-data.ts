/**
 * Training on the class's own examples (`data: 'own'`): each device trains only on what its
 * student collected (own-examples.ts), and only gradients and counts travel.
 *
 * **What an epoch is.** Epoch e is one pass over the union of the examples the ring's
 * devices held for training when e began: its *roster*, each device's store key, its count
 * of training examples and the last of them (its seq), in rank order, agreed by every
 * replica through the gradient tail (DataAgreement). The union is laid out as one line of
 * T = Σ nᵢ places, the devices' examples spread evenly along it: device i's k-th example
 * sits at (k + ½) / nᵢ of the way, and the line takes every example in that order (ties to
 * the lower device). Once the class has consumed O places, device i has consumed cᵢ(O) of
 * its own examples: how many of its places are among the first O. So Σᵢ cᵢ(O) = O exactly,
 * each cᵢ only grows, it reaches nᵢ at O = T, and it stays within two examples of its
 * proportional part O·nᵢ/T (unit-tested). A step covers the next
 * perWorker × (ranks in the roster) places, [O, O + B), and device i trains
 * cᵢ(O + B) − cᵢ(O) of its examples, the next ones of its own permutation of the epoch. So each device's share of every step is proportional to its data, every device
 * finishes its examples with the epoch, and every example of the roster is trained once.
 * The update is the sum of the gradients over everything trained in the step divided by
 * how many that was (the count is all-reduced with the gradients): each example weighs the
 * same, whichever device holds it.
 *
 * **When the class changes.**
 *  - A device that leaves takes its places with it: the class skips them (a step whose
 *    places are all a departed device's trains nothing and moves on).
 *  - A device that joins mid-epoch trains nothing until the next epoch, whose roster has it.
 *    A device that comes back with the same store (a reload) takes up its block where the
 *    line says, since cᵢ(O) depends only on O and the roster.
 *  - A device with no examples has no places: it joins the ring, sends zeros, and is never
 *    a divisor.
 *  - Examples collected during an epoch wait for the next; one deleted during an epoch keeps
 *    its place as a tombstone and is skipped. Clearing a store makes a new store: its old
 *    block is a departed device's.
 *  - The roster (keys and counts, never examples) travels with the hand-over's state and
 *    is kept in checkpoints with the data cursor, so a resumed run goes on with the same
 *    epoch.
 *
 * Balancing shares by speed does not apply: where an example is decides who trains it.
 *
 * **`dataset+own`.** The server's dataset joins the line as one more block (roster entry 0,
 * store key 0, which no store has), first in the roster. Its places in a step are cut
 * equally among the ring's ranks, and each reads its slice of them from the data service
 * at the block's own offset, cᵢ(O) of the dataset's permutation of the epoch. So the epoch is
 * one pass over the dataset and the class's examples together, each once. A step then covers
 * perWorker × N places, since every rank can train the dataset.
 */
import { featureCount, ownClassExamples, type OwnData } from '../tasks/task';
import { taskOf } from '../tasks/registry';
import { MAX_OWN_EXAMPLES_PER_DEVICE, MAX_ROOM_MEMBERS, type StartConfig } from '../protocol';
import { WebringError } from '../protocol/errors';
import { mixSeed, permutationInto } from '../util/random';
import type { DataAgreement, DataSource, EpochRoster, RosterDevice } from './data-source';
import { EpochLine, RANK_FLOATS, ROSTER_STATE_FLOATS, checkRosterTotal, isIntegerIn, readPeerEntry, writeEntry } from './epoch-roster';
import { isHeldOut, type OwnExample, type OwnExamples } from './own-examples';
import { batchOfSlices, cutBatch, globalBatchSize, ranksThatTrain, type DataCursor, type GlobalBatch } from './batch-plan';

/** One held-out example: example `part` of an item, whose label's index is `label`. */
interface HeldOutExample {
  item: Float32Array;
  part: number;
  label: number;
}

/** The server's dataset beside the class's own: any DataSource, and a streamed one can be told what to fetch ahead. */
export type SharedDigits = DataSource & {
  fetchAhead?(batches: readonly GlobalBatch[], rank: number): void;
  readonly stepsAhead?: number;
};

/** The roster's key for the server's dataset in a `dataset+own` run: no store has it (newStoreKey never returns 0). */
export const SHARED_BLOCK_KEY = 0;
/**
 * A DataSource over this device's own examples. A student's item gives the task's examples
 * (task.own: a drawing is one, a name one per letter and its end); the roster counts
 * examples, and an item is trained or held out whole. The test set: the dataset's held-out
 * split for a run of its outputs (`datasetTest`), else the fifth of its items each device
 * holds out, scored in place.
 */
export class OwnDataSource implements DataSource, DataAgreement {
  readonly agreement: DataAgreement = this;
  readonly floatsPerRank = RANK_FLOATS;
  readonly stateFloats = ROSTER_STATE_FLOATS;
  private readonly perWorker: number;
  private readonly seed: number;
  /** Numbers in one example (the task's F). */
  private readonly features: number;
  private readonly classIndex: Map<string, number>;
  /** How the task's items give examples (a drawing: itself; a name: one per character and its end). */
  private readonly own: OwnData;
  /** Whether each device holds out a fifth of its items to score the model on: only where the dataset's held-out split does not. */
  private readonly holdsOut: boolean;
  /** What each rank holds for the next roster, as last agreed (by rank of that ring), and the floats it came from. */
  private holdings: RosterDevice[] = [];
  private agreed = new Float32Array(0);
  private line: EpochLine | null = null;
  /** Each rank's device in the current roster, or -1. */
  private rankDevice: number[] = [];
  /** This device's training examples of the current roster: each one's item (an index into the store) and its place in the item, and its permutation of them. */
  private ownBlock: Uint32Array = new Uint32Array(0);
  private ownPart: Uint32Array = new Uint32Array(0);
  private ownOrder: Uint32Array = new Uint32Array(0);
  private ownDevice = -1;
  /** This device's count of training examples, kept up to date as the store grows. */
  private counted = { key: 0, scanned: 0, examples: 0, lastSeq: -1 };
  /** The held-out examples of the evaluation under way (testShard takes them). */
  private evaluating: HeldOutExample[] = [];

  constructor(
    config: Pick<StartConfig, 'task' | 'batchSizePerWorker' | 'seed' | 'classes'>,
    /** This device's examples; null for a device that holds none. */
    private readonly store: OwnExamples | null,
    private readonly datasetTest: Pick<DataSource, 'testShard' | 'readTest'> | null = null,
    /**
     * The server's dataset, trained beside the class's own examples (`dataset+own`); null for
     * `own`. This source cuts them, so it plans their fetches ahead itself (fetchAhead).
     */
    private readonly shared: SharedDigits | null = null,
  ) {
    this.perWorker = config.batchSizePerWorker;
    this.seed = config.seed;
    const task = taskOf(config.task);
    this.features = featureCount(task.example);
    this.classIndex = new Map(config.classes.map((c, i) => [c, i]));
    this.own = task.own ?? ownClassExamples(task.example);
    this.holdsOut = datasetTest === null;
  }

  /** The current epoch's roster; null before the first. */
  get roster(): EpochRoster | null {
    return this.line?.roster ?? null;
  }

  get trainCount(): number {
    return this.line?.places ?? 0;
  }

  /** A device may hold most of the class's examples, and then trains most of each batch. */
  get maxShardExamples(): number {
    return this.perWorker * MAX_ROOM_MEMBERS;
  }

  /**
   * perWorker for each rank whose examples the epoch passes over: a device with none (or
   * one that joined mid-epoch) neither grows the batch nor changes what the others train.
   */
  globalBatchSize(worldSize: number): number {
    return globalBatchSize(this.perWorker, this.trainingRanks(worldSize));
  }

  nextBatch(cursor: DataCursor, worldSize: number): GlobalBatch {
    let { epoch, offset } = cursor;
    if (this.line?.roster.epoch !== epoch) {
      if (offset !== 0) throw new WebringError('ERR_BAD_DATA', `no roster for epoch ${epoch}, ${offset} places in: the position lost its roster`);
      this.beginEpoch(epoch);
    }
    for (;;) {
      if (offset >= this.trainCount) {
        epoch++;
        offset = 0;
        this.beginEpoch(epoch);
      }
      const training = this.trainingRanks(worldSize);
      if (training === 0) {
        // Every device of this epoch has left: the rest of it is theirs.
        offset = this.trainCount;
        continue;
      }
      const span = Math.min(globalBatchSize(this.perWorker, training), this.trainCount - offset);
      const at = { epoch, offset };
      const fromDataset = this.sharedBatch(at.offset, span, worldSize);
      // Each rank trains what its device holds of the span, and its slice of the dataset's examples in it.
      const slices = Array.from({ length: worldSize }, (_, r) => {
        const d = this.rankDevice[r] ?? -1;
        return (d < 0 ? 0 : this.line!.consumed(d, at.offset + span) - this.line!.consumed(d, at.offset)) + fromDataset.slices[r]!;
      });
      const batch = batchOfSlices(at, span, slices);
      if (batch.size > 0) return batch;
      // Only departed devices' places here: nobody can train them.
      offset += span;
    }
  }

  /**
   * This rank's examples of `batch`: its own first (a deleted one is skipped, so it may
   * return fewer than its share), then its slice of the server's dataset in `dataset+own`.
   */
  async readShard(batch: GlobalBatch, rank: number, features: Float32Array, labels: Int32Array): Promise<number> {
    const line = this.line;
    if (!line || line.roster.epoch !== batch.epoch) return 0;
    const span = batch.span;
    let n = 0;
    if (this.store && this.ownDevice >= 0) {
      const from = line.consumed(this.ownDevice, batch.offset);
      const to = line.consumed(this.ownDevice, batch.offset + span);
      const examples = this.store.examples;
      for (let j = from; j < to; j++) {
        const at = this.ownOrder[j]!;
        const item = examples[this.ownBlock[at]!]!;
        const label = this.labelTarget(item);
        if (item.pixels === null || label === undefined) continue;
        labels[n] = this.own.writeExample(item.pixels, this.ownPart[at]!, label, features, n * this.features);
        n++;
      }
    }
    const fromDataset = this.sharedBatch(batch.offset, span, batch.worldSize);
    if (this.shared && fromDataset.size > 0) {
      this.planDigits(batch.offset + span, span, batch.worldSize, rank);
      n += await this.shared.readShard(fromDataset, rank, features.subarray(n * this.features), labels.subarray(n));
    }
    return n;
  }

  /** Fetches the dataset's examples of the next steps of this epoch, as this membership would cut them. */
  private planDigits(from: number, span: number, worldSize: number, rank: number): void {
    const shared = this.shared!;
    if (!shared.fetchAhead) return;
    const planned: GlobalBatch[] = [];
    for (let o = from, s = 0; s < (shared.stepsAhead ?? 0) && o < this.trainCount; s++) {
      const next = Math.min(span, this.trainCount - o);
      planned.push(this.sharedBatch(o, next, worldSize));
      o += next;
    }
    shared.fetchAhead(planned, rank);
  }

  /**
   * The server's examples a step covering [offset, offset + span) trains, as the dataset's own
   * global batch: their permutation's epoch and offset, cut equally among the ranks
   * (cutBatch); size 0 without them.
   */
  private sharedBatch(offset: number, span: number, worldSize: number): GlobalBatch {
    const line = this.line!;
    const epoch = line.roster.epoch;
    if (!this.shared || line.roster.devices[0]?.key !== SHARED_BLOCK_KEY) return cutBatch({ epoch, offset: 0 }, 0, worldSize);
    const from = line.consumed(0, offset);
    return cutBatch({ epoch, offset: from }, line.consumed(0, offset + span) - from, worldSize);
  }

  testShard(rank: number, worldSize: number): { start: number; count: number } {
    if (this.datasetTest) return this.datasetTest.testShard(rank, worldSize);
    // Taken once per evaluation: an example deleted while it runs is still scored as it was.
    this.evaluating = this.heldOut();
    return { start: 0, count: this.evaluating.length };
  }

  readTest(start: number, count: number, features: Float32Array, labels: Int32Array): Promise<void> {
    if (this.datasetTest) return this.datasetTest.readTest(start, count, features, labels);
    for (let i = 0; i < count; i++) {
      const example = this.evaluating[start + i]!;
      labels[i] = this.own.writeExample(example.item, example.part, example.label, features, i * this.features);
    }
    return Promise.resolve();
  }

  // DataAgreement ------------------------------------------------------------

  writeOwn(out: Float32Array, at: number): void {
    writeEntry(out, at, this.countOwn());
  }

  /** Every step: unchanged holdings (the usual case) cost one comparison, not a new mapping of the ranks. */
  agree(values: Float32Array, worldSize: number): void {
    const n = worldSize * RANK_FLOATS;
    if (this.agreed.length === n && this.agreed.every((v, i) => v === values[i])) return;
    // Checked before it is kept: refused floats must not pass as agreed at the next step.
    const holdings = Array.from({ length: worldSize }, (_, r) => readPeerEntry(values, r * RANK_FLOATS, `rank ${r}'s holding in the agreement`));
    checkRosterTotal(holdings, 'the agreed holdings');
    this.agreed = values.slice(0, n);
    this.holdings = holdings;
    this.mapRanks();
  }

  writeState(out: Float32Array, at: number): void {
    out.fill(0, at, at + ROSTER_STATE_FLOATS);
    const roster = this.roster;
    if (!roster) return;
    out[at] = roster.epoch + 1;
    out[at + 1] = roster.devices.length;
    roster.devices.forEach((d, i) => writeEntry(out, at + 2 + i * RANK_FLOATS, d));
  }

  readState(from: Float32Array, at: number): void {
    if (from[at] === 0) {
      this.restore(null);
      return;
    }
    const [epochPlusOne, count] = [from[at]!, from[at + 1]!];
    if (!isIntegerIn(epochPlusOne, 1, MAX_OWN_EXAMPLES_PER_DEVICE) || !isIntegerIn(count, 0, MAX_ROOM_MEMBERS)) {
      throw new WebringError('ERR_BAD_DATA', `the hand-over's roster: epoch + 1 = ${epochPlusOne} with ${count} devices is out of range`);
    }
    const devices = Array.from({ length: count }, (_, i) => readPeerEntry(from, at + 2 + i * RANK_FLOATS, `device ${i} of the hand-over's roster`));
    checkRosterTotal(devices, "the hand-over's roster");
    this.restore({ epoch: epochPlusOne - 1, devices });
  }

  // --------------------------------------------------------------------------

  /** Forms epoch `epoch`'s roster from the latest agreed holdings; a class without examples cannot train. */
  private beginEpoch(epoch: number): void {
    const devices = this.holdings.filter((h) => h.examples > 0 && h.key !== SHARED_BLOCK_KEY);
    if (this.shared) devices.unshift({ key: SHARED_BLOCK_KEY, examples: this.shared.trainCount, lastSeq: 0 });
    this.restore({ epoch, devices });
    if (this.trainCount === 0) {
      throw new WebringError('ERR_NO_EXAMPLES', "no device in the class holds an example to train on: collect some on the student page (Collect), then start again");
    }
  }

  /** Takes a roster: a new epoch's, or one from a checkpoint or a hand-over (null: none yet, the next epoch forms one). */
  restore(roster: EpochRoster | null): void {
    this.line = roster ? new EpochLine(roster) : null;
    this.mapRanks();
    this.ownDevice = -1;
    const key = this.store?.key;
    const index = roster && key !== undefined ? roster.devices.findIndex((d) => d.key === key) : -1;
    if (!roster || index < 0 || !this.store) return;
    const mine = roster.devices[index]!;
    const items: number[] = [];
    const parts: number[] = [];
    this.store.examples.forEach((e, i) => {
      if (e.seq > mine.lastSeq || !this.trains(key!, e)) return;
      for (let k = 0, n = this.examplesIn(e); k < n; k++) {
        items.push(i);
        parts.push(k);
      }
    });
    if (items.length !== mine.examples) {
      // The store changed underneath the roster (it was replaced, not cleared): train nothing rather than the wrong examples.
      return;
    }
    this.ownBlock = Uint32Array.from(items);
    this.ownPart = Uint32Array.from(parts);
    this.ownOrder = permutationInto(new Uint32Array(items.length), mixSeed(mixSeed(this.seed, roster.epoch), key!));
    this.ownDevice = index;
  }

  /** Ranks that can train a step: all of them beside the server's dataset, else those whose device is in the epoch's roster. */
  private trainingRanks(worldSize: number): number {
    return ranksThatTrain({ ranks: worldSize, holdingExamples: this.presentDevices(worldSize), digits: this.shared !== null });
  }

  /** Ranks of the ring whose device is in the current roster (before any roster: ranks holding examples). */
  private presentDevices(worldSize: number): number {
    let n = 0;
    for (let r = 0; r < worldSize; r++) {
      if (this.line ? (this.rankDevice[r] ?? -1) >= 0 : (this.holdings[r]?.examples ?? 0) > 0) n++;
    }
    return n;
  }

  /** Each rank's device in the current roster, matched by store key. */
  private mapRanks(): void {
    const devices = this.line?.roster.devices ?? [];
    const taken = new Set<number>();
    this.rankDevice = this.holdings.map((h) => {
      // A rank with no store says key 0, which is the server's dataset' block: not its own.
      if (h.key === SHARED_BLOCK_KEY) return -1;
      const d = devices.findIndex((dev, i) => dev.key === h.key && !taken.has(i));
      if (d >= 0) taken.add(d);
      return d;
    });
  }

  /** This device's training examples so far (tombstones included), counted as the store grows. */
  private countOwn(): { key: number; examples: number; lastSeq: number } {
    const c = this.counted;
    const store = this.store;
    if (!store) return { key: 0, examples: 0, lastSeq: -1 };
    if (c.key !== store.key || c.scanned > store.examples.length) Object.assign(c, { key: store.key, scanned: 0, examples: 0, lastSeq: -1 });
    const list = store.examples;
    for (; c.scanned < list.length; c.scanned++) {
      const e = list[c.scanned]!;
      if (!this.trains(store.key, e)) continue;
      c.examples += this.examplesIn(e);
      c.lastSeq = e.seq;
    }
    return c;
  }

  /** An item this run trains, live or deleted: of one of the run's classes (or the text task's label), and not held out. */
  private trains(key: number, e: OwnExample): boolean {
    return this.labelTarget(e) !== undefined && !(this.holdsOut && isHeldOut(key, e.seq));
  }

  /** The item's label's output index ('classes'), 0 for an item of a text task's label; undefined for an item this run does not train. */
  private labelTarget(e: OwnExample): number | undefined {
    if (this.own.collects === 'text') return e.label === this.own.label ? 0 : undefined;
    return this.classIndex.get(e.label);
  }

  /** The examples an item gives, live or deleted: a tombstone keeps its item's size, so its places stay where they were. */
  private examplesIn(e: OwnExample): number {
    return this.own.examplesIn(e.pixels?.length ?? e.size ?? 0);
  }

  /** This device's live held-out examples of the run's classes, as the evaluation starts. */
  private heldOut(): HeldOutExample[] {
    if (!this.store || !this.holdsOut) return [];
    const key = this.store.key;
    const out: HeldOutExample[] = [];
    for (const e of this.store.examples) {
      const label = this.labelTarget(e);
      if (e.pixels === null || label === undefined || !isHeldOut(key, e.seq)) continue;
      for (let k = 0, n = this.examplesIn(e); k < n; k++) out.push({ item: e.pixels, part: k, label });
    }
    return out;
  }
}
