/**
 * A training run's part in secure aggregation (shared/secagg/): the collective its trainer
 * sums over, which is the generation's engine with the gradients masked, and the hold of a
 * secure ring of two, whose sum would tell each member the other's gradient.
 */
import type { Collective, CollectiveEngine } from '../collectives/collective';
import { MIN_SECURE_MEMBERS, type SecureAggregation } from '../secagg/secure-collective';
import { WebringError } from '../protocol/errors';
import type { TrainStart } from '../protocol';
import type { RingView } from './generation-tracker';
import type { RunControl, RunGenerations } from './run-ports';
import type { WorkerStatusView } from './worker-status';
import type { Trainer } from './trainer';

/** A secure run that holds for a third member looks again this often for a joiner whose links opened. */
const SECURE_HOLD_RECHECK_MS = 250;

export interface SecureRunOptions {
  start: TrainStart;
  network: RingView;
  generations: RunGenerations;
  control: RunControl;
  status: WorkerStatusView;
  /** The run's masks; required when start.config.secureAggregation is on. */
  secure?: SecureAggregation;
  log(message: string): void;
}

export class SecureRun {
  constructor(private readonly options: SecureRunOptions) {
    if (options.start.config.secureAggregation && !options.secure) {
      throw new WebringError('ERR_BAD_STATE', 'a secure run needs this worker to mask its gradients, and it was given no keys');
    }
  }

  /** What the trainer sums over: the generation's collective, masked in a secure run. */
  over(engine: CollectiveEngine): Collective {
    const { secure, network, start, log } = this.options;
    if (!secure) return engine;
    const g = network.generation;
    if (g?.generation !== engine.generation || g.members.length !== engine.worldSize) {
      throw new WebringError('ERR_STALE_GENERATION', `no member list for generation ${engine.generation}: its masks cannot be made`);
    }
    const collective = secure.over(engine, start.run, engine.generation, g.members.map((m) => m.id), g.maskSeed ?? 0);
    if (engine.worldSize >= MIN_SECURE_MEMBERS) log(`secure aggregation, generation ${engine.generation}: masks with ${collective.partners.length} of ${engine.worldSize - 1} classmates`);
    return collective;
  }

  /**
   * A secure ring of two holds: the sum would tell each the other's gradient (one alone
   * sends nothing, and trains). So does a ring of more seats from two clients (two tabs of
   * one student and one classmate: issue 38), by the server's count of distinct clients,
   * the same on every replica. Nobody steps, so nobody votes; a joiner is let in as soon as
   * this replica's links to it are open (every replica holds, so none is mid-step).
   * True while held.
   */
  async hold(worldSize: number, trainer: Trainer): Promise<boolean> {
    const { secure, network, generations, control, status, log } = this.options;
    const clients = Math.min(worldSize, network.generation?.clients ?? worldSize);
    if (!secure || worldSize === 1 || clients >= MIN_SECURE_MEMBERS) {
      if (status.current.secureWait !== null) status.update({ secureWait: null });
      return false;
    }
    if (control.stopRequested) {
      // Nobody steps to vote the stop: every replica holds at the same step and stops there
      // (the next turn finds the run finished).
      trainer.stopWithoutVote();
      return true;
    }
    const pending = generations.pending;
    if (pending && network.isReadyFor(pending)) {
      log(`secure aggregation: generation ${pending.generation} has ${pending.members.length} members; switching to it now`);
      network.applyGeneration(pending);
      generations.admitted(pending);
      return true;
    }
    if (status.current.secureWait === null) {
      // Members count by network address unless the teacher vouched for a class behind one NAT (signaling-server/rooms/secure-count.ts).
      const addresses = `${clients} network address${clients === 1 ? '' : 'es'}`;
      const seats = clients < worldSize ? ` (${worldSize} seats on ${addresses}: one address counts once unless the teacher vouches that they are different devices)` : '';
      const wait = `secure aggregation needs ${MIN_SECURE_MEMBERS} members and the ring has ${clients}${seats}: with two, each would learn the other's gradient from the sum`;
      log(`holding: ${wait}`);
      status.update({ secureWait: wait });
    }
    await generations.nextChange(SECURE_HOLD_RECHECK_MS);
    return true;
  }
}
