/**
 * What a run trains, decided from its config: a task's model and examples (the classroom's),
 * or a program's own model and dataset (the library's fitDataset), which the member holds in
 * its program slot. A member asked to train a program's run without the same program fails
 * with a coded error, and the class sheds it as failed, instead of training something else.
 */
import { WebringError } from '../protocol/errors';
import { replicaRecipe, type StartConfig } from '../protocol';
import type { ReplicaSpec } from '../compute/replica';
import type { ProgramModel } from '../compute/program-model';
import type { DataFactory } from '../data/data-source';

/** A program this member trains when a run of its fingerprint starts (shared/library/fit-dataset.ts). */
export interface ProgramBinding {
  program: ProgramModel;
  /** Of the model's description and the dataset's sizes and batch (program-fingerprint.ts). */
  fingerprint: string;
  data: DataFactory;
}

/** The member's program, set by fitDataset while it waits for and trains its run. */
export interface ProgramSlot {
  current: ProgramBinding | null;
}

function bindingFor(config: StartConfig, slot: ProgramSlot | null): ProgramBinding {
  const binding = slot?.current ?? null;
  if (!binding) throw new WebringError('ERR_BAD_STATE', "this run trains a program's model, and this member has none: call fitDataset on it before the run starts");
  if (binding.fingerprint !== config.program!.fingerprint) {
    throw new WebringError('ERR_BAD_STATE', `this member's model or dataset (${binding.fingerprint.slice(0, 8)}) differs from the run's (${config.program!.fingerprint.slice(0, 8)}): every member must fit the same model on the same dataset`);
  }
  return binding;
}

/** The replica the run's config asks for. */
export function replicaSpecFor(config: StartConfig, slot: ProgramSlot | null, busyComputeMs: number | undefined): ReplicaSpec {
  const busy = busyComputeMs ? { busyComputeMs } : {};
  return config.program ? { program: bindingFor(config, slot).program, ...busy } : { config: replicaRecipe(config), ...busy };
}

/** The program's data factory for a program's run; null for a task's. */
export function programDataFor(config: StartConfig, slot: ProgramSlot | null): DataFactory | null {
  return config.program ? bindingFor(config, slot).data : null;
}
