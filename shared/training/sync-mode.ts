/**
 * How the class sums its work: the trainer's one place for it. A turn of the trainer is one
 * all-reduce of the buffer (what travels, then the tail) and everything around it (the votes,
 * the shares, the hash check, the hand-over, deadlines, checkpoints); what a replica puts
 * into the buffer before it, and what it does with the class's mean after, is the mode's.
 *
 *   every-step   one global batch: the sum of this rank's gradients; the mean goes to the
 *                replica's optimizer (MultiWorkerMirroredStrategy).
 *   local-steps  a round of up to `localSteps` global batches, each rank training its own
 *                slice of each alone: its change in weights times its examples; the mean
 *                moves the weights at the last sync through the outer optimizer (DiLoCo;
 *                local-rounds.ts).
 *
 * Everything the turn's machinery judges per turn (straggler deadlines, shares, the hash
 * check, a lost member) is then judged per round in local-steps mode, with nothing more.
 */
import { advance } from '../data/batch-plan';
import type { StartConfig } from '../protocol';
import type { LedgerSection } from './ledger';
import { LocalRounds } from './local-rounds';
import type { SyncModeRun, TurnHost, TurnWork } from './sync-mode-run';

// The trainer takes the contract from here, with the table that picks the mode.
export type { SyncModeRun, TurnHost, TurnWork } from './sync-mode-run';

/**
 * MultiWorkerMirroredStrategy: every step's gradients summed, the mean applied by each
 * replica's optimizer.
 *
 * A step whose all-reduce failed is redone by the next generation on the same weights and
 * cursor, except in a secure run: there its global batch is skipped (every rank sends
 * zeros, the cursor moves past it). A redo sums a subset of the same examples at the same
 * weights, so the first attempt's sum (which the hub, or a rank that spoiled the check
 * word, may have seen) minus the redo's would be the missing ranks' exact gradient.
 */
export class EveryStep implements SyncModeRun {
  readonly hashEveryTurn = false;
  readonly stateSections: ReadonlyArray<LedgerSection<unknown>> = [];
  readonly outer = null;

  constructor(
    private readonly host: TurnHost,
    private readonly config: Pick<StartConfig, 'secureAggregation'>,
  ) {}

  async contribute(rank: number): Promise<TurnWork> {
    const { host } = this;
    const { position } = host;
    const batch = host.nextBatch(position.cursor);
    host.endSitOut();
    const skipped = position.finishing;
    if (skipped) return { first: batch, end: skipped.end, steps: skipped.steps, trained: 0, finishing: true };
    const trained = batch.slices[rank]! > 0 ? await host.computeGradients(batch, rank) : 0;
    const end = advance(batch, host.data.trainCount);
    // Marked before the sum: if it fails, the next generation skips this batch (above).
    if (this.config.secureAggregation) position.finishing = { end, steps: 1 };
    return { first: batch, end, steps: 1, trained, finishing: false };
  }

  patienceMs(): undefined {
    return undefined;
  }

  async apply(step: number, worldSize: number, examples: number): Promise<number> {
    const { host } = this;
    // Every replica is at the same step, world and ramp, so every replica applies the same rate.
    const learningRate = host.rateAt(step, worldSize);
    if (examples > 0) await host.buffers.apply(host.replica, learningRate);
    host.position.finishing = null;
    return learningRate;
  }
}

/** The way of syncing the config names; a new way joins here and in the `sync` vocabulary. */
export function syncModeFor(config: StartConfig, host: TurnHost): SyncModeRun {
  switch (config.sync) {
    case 'every-step':
      return new EveryStep(host, config);
    case 'local-steps':
      return new LocalRounds(host, config);
  }
}
