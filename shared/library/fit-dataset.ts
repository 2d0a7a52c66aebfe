/**
 * fitDataset: MultiWorkerMirroredStrategy's model.fit for a room. Every member calls it
 * with the same model and dataset; the member given the teacher token starts the run once
 * enough members have joined (minMembers), and every member trains its share of each global
 * batch, all-reduces the gradients and applies the same update, joins and leaves included.
 * It resolves, on every member, once the run ends, with the user's model holding the
 * trained weights and a History of the epochs' logs, as tfjs's fitDataset does.
 */
import * as tf from '@tensorflow/tfjs';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';
import { WebringError } from '../protocol/errors';
import type { ProgramRun } from '../protocol/start-config';
import { describeModel, type ProgramModel } from '../compute/program-model';
import { DatasetShards, countElements, isSharded, type EpochDataset, type ShardedDataset } from '../data/dataset-shards';
import { FitCallbacks, type FitCallback } from './fit-callbacks';
import type { StartOptions } from './room-control';
import type { RoomMember } from './room-member';
import { restoreFromBackup } from './backup';
import { tfIoCheckpoints } from '../checkpoints/tfio-checkpoints';
import { LATEST_CHECKPOINT } from '../checkpoints/checkpoint';

/** The classroom's options a program's run takes as they are (docs/recipe.md, docs/library.md). */
type RunOptions = Pick<
  StartOptions,
  'sync' | 'localSteps' | 'outerOptimizer' | 'outerLearningRate' | 'outerMomentum' | 'secureAggregation' | 'wire' | 'allreduce' | 'warmupSteps' | 'seed' | 'saveEverySteps' | 'maxToKeep' | 'resumeFrom' | 'maxSteps' | 'balanceShares'
>;

export interface FitDatasetOptions extends RunOptions {
  /** Passes over the dataset (default 1). */
  epochs?: number;
  /** The global batch: examples one step trains over the whole ring, whatever its size (default 32). */
  batchSize?: number;
  /** Steps in an epoch: required with a dataset of each member's own (datasetFromFunction), whose size no member knows whole; ignored otherwise. */
  stepsPerEpoch?: number;
  /** Scored at every epoch's end, split over the members: its loss is the logs' val_loss. */
  validationData?: EpochDataset;
  callbacks?: FitCallback | FitCallback[];
  /** Module URLs the maths thread imports before it builds the model: those that register custom layers and losses. */
  threadModules?: string[];
  /** The member with the teacher token starts the run once the ring holds this many (default 1). */
  minMembers?: number;
  /** Where the chief saves the trained model when the run ends: any tf.io URL or handler ('indexeddb://…', 'file://…' in Node). The server keeps the run's checkpoints besides. */
  save?: string | tf.io.IOHandler;
  /**
   * BackupAndRestore: a tf.io URL ('indexeddb://…', 'localstorage://…', 'file://…' in Node)
   * where the chief copies every checkpoint (each `saveEverySteps`, the newest `maxToKeep`
   * kept), and from whose newest copy a run started again resumes, at its step, when the
   * server has none as new (backup.ts).
   */
  backup?: string;
}

export const FIT_DEFAULTS = { epochs: 1, batchSize: 32, minMembers: 1 } as const;
/** How often the starting member looks whether enough members have joined. */
const MEMBERS_POLL_MS = 100;

/**
 * One digest of what the members must share: the model's structure (its layers' classes,
 * its weights' shapes in order, its inputs and outputs), its loss and optimizer, and the
 * data's sizes. Not the layers' generated names nor their initializers: two processes that
 * build one model name its layers alike, two models in one process do not, and the chief's
 * initial weights reach everyone in the first hand-over.
 */
export function programFingerprint(program: ProgramModel, run: Omit<ProgramRun, 'fingerprint' | 'outputs'>): string {
  const { modelTopology, weightSpecs, optimizer, losses, inputShapes, outputShapes } = program;
  const layers = ((modelTopology as { config?: { layers?: Array<{ class_name?: string }> } }).config?.layers ?? []).map((l) => l.class_name);
  const weights = weightSpecs.map((w) => [w.dtype, ...w.shape]);
  const text = JSON.stringify({ layers, weights, optimizer, losses, inputShapes, outputShapes, run });
  return bytesToHex(sha256(utf8ToBytes(text))).slice(0, 32);
}

function firstEpoch(dataset: EpochDataset): tf.data.Dataset<tf.TensorContainer> {
  return typeof dataset === 'function' ? dataset(0) : dataset;
}

/** Examples in an epoch: the dataset's elements, or for each member's own shards, the epoch's steps × the global batch. */
async function trainingCount(dataset: EpochDataset | ShardedDataset, batchSize: number, stepsPerEpoch: number | undefined): Promise<number> {
  if (isSharded(dataset)) {
    if (stepsPerEpoch === undefined || !Number.isInteger(stepsPerEpoch) || stepsPerEpoch < 1) {
      throw new WebringError('ERR_BAD_REQUEST', `fitDataset: a dataset of each member's own (datasetFromFunction) needs stepsPerEpoch, a whole number from 1; got ${stepsPerEpoch}`, 'stepsPerEpoch');
    }
    return stepsPerEpoch * batchSize;
  }
  const count = await countElements(firstEpoch(dataset));
  if (count === 0) throw new WebringError('ERR_NO_EXAMPLES', 'fitDataset: the dataset has no element');
  return count;
}

export async function fitDataset(member: RoomMember, model: tf.LayersModel, dataset: EpochDataset | ShardedDataset, options: FitDatasetOptions = {}): Promise<tf.History> {
  const { epochs = FIT_DEFAULTS.epochs, batchSize = FIT_DEFAULTS.batchSize, minMembers = FIT_DEFAULTS.minMembers, stepsPerEpoch, validationData, callbacks, threadModules, save, backup, ...run } = options;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new WebringError('ERR_BAD_REQUEST', `fitDataset: batchSize must be a whole number of examples, got ${batchSize}`, 'batchSize');
  if (!Number.isInteger(epochs) || epochs < 1) throw new WebringError('ERR_BAD_REQUEST', `fitDataset: epochs must be a whole number from 1, got ${epochs}`, 'epochs');
  if (member.programSlot.current) throw new WebringError('ERR_BAD_STATE', 'fitDataset: this member already fits a model');
  const room = member.room;
  if (room === null) throw new WebringError('ERR_BAD_STATE', 'fitDataset: the member has joined no room yet (member.join)');
  const backupStore = backup === undefined ? null : tfIoCheckpoints(backup);
  const program = await describeModel(model, threadModules);
  const trainCount = await trainingCount(dataset, batchSize, stepsPerEpoch);
  const validationCount = validationData ? await countElements(firstEpoch(validationData)) : 0;
  const sizes = { trainCount, validationCount, batchSize };
  const fingerprint = programFingerprint(program, sizes);
  const layout = program;
  member.programSlot.current = {
    program,
    fingerprint,
    data: () => new DatasetShards({ train: dataset, trainCount, validation: validationData ?? null, validationCount, batchSize, layout }),
  };
  const control = member.control;
  const stopRequested = (stop: boolean) => {
    if (stop && control) void control.stop(room);
  };
  const steps = Math.ceil(trainCount / batchSize);
  const feed = new FitCallbacks(model, callbacks, { epochs, steps, validation: validationCount > 0 }, stopRequested);
  const learningRate = (program.optimizer.config as { learningRate?: unknown }).learningRate;
  // The member tells its status before it tells that the run is done: the feed sees the last step first.
  const stopFeeding = member.on('status', (s) => feed.status(s));
  member.backup = backupStore;
  try {
    const ended = member.whenDone();
    if (control) {
      while (member.size < minMembers) await new Promise((r) => setTimeout(r, MEMBERS_POLL_MS));
      const restored = backupStore && (run.resumeFrom ?? LATEST_CHECKPOINT) === LATEST_CHECKPOINT ? await restoreFromBackup(backupStore, control, room, fingerprint, member.log) : null;
      await control.start(room, {
        ...run,
        ...(restored ? { resumeFrom: restored } : {}),
        program: { fingerprint, ...sizes, outputs: program.outputNames },
        epochs,
        optimizer: program.optimizer.className === 'Adam' ? 'adam' : 'sgd',
        ...(typeof learningRate === 'number' ? { learningRate } : {}),
      });
    }
    const final = await ended;
    await copyTrainedWeights(member, model);
    // The chief of the run's last step saves: by the time this runs, others may be leaving.
    if (save && final.chief) await model.save(save);
    return await feed.end(final);
  } finally {
    stopFeeding();
    member.programSlot.current = null;
    member.backup = null;
  }
}

/** The run's weights into the user's model, so that model.predict and model.save use them. */
async function copyTrainedWeights(member: RoomMember, model: tf.LayersModel): Promise<void> {
  const flat = await member.trainedWeights();
  if (!flat) throw new WebringError('ERR_BAD_STATE', 'the run ended without a replica on this member');
  let at = 0;
  tf.tidy(() => {
    for (const w of model.trainableWeights) {
      const { size, shape } = w.read();
      w.write(tf.tensor(flat.slice(at, at + size), shape, 'float32'));
      at += size;
    }
  });
  if (at !== flat.length) throw new WebringError('ERR_INTERNAL', `the run's replica has ${flat.length} weights, the model ${at}`);
}
