/**
 * The outer optimizer of a local-steps run (DiLoCo, Douillard et al. 2023): after a round
 * the class's averaged change in weights, Δ = anchor − local weights, is an "outer
 * gradient", and the weights at the last sync move by Nesterov momentum SGD on it.
 *
 *   m ← μ·m + Δ;   Nesterov: w ← w − η·(Δ + μ·m);   heavy ball ('sgd'): w ← w − η·m
 *
 * With η = 1 and μ = 0 this is federated averaging (McMahan et al. 2017): the weights become
 * the examples-weighted mean of the workers' local weights.
 *
 * Plain float32 arithmetic in the network thread, in one fixed order: every replica applies
 * the same Δ to the same weights and momentum and gets the same bits, whatever its backend.
 * The momentum is part of the run's shared state: the hand-over carries it to joiners, and
 * checkpoints keep it (checkpoint-io.ts).
 */
import type { OuterOptimizerKind, StartConfig } from '../protocol';
import { WebringError } from '../protocol/errors';
import type { LedgerSection } from './ledger';

export class OuterOptimizer {
  /** The momentum buffer, one float per weight; zero before the first round. */
  readonly momentum: Float32Array;
  private readonly kind: OuterOptimizerKind;
  private readonly rate: number;
  private readonly mu: number;

  constructor(config: Pick<StartConfig, 'outerOptimizer' | 'outerLearningRate' | 'outerMomentum'>, parameterCount: number) {
    this.kind = config.outerOptimizer;
    this.rate = config.outerLearningRate;
    this.mu = config.outerMomentum;
    this.momentum = new Float32Array(parameterCount);
  }

  /** Moves `weights` (the weights at the last sync) by the mean change, `delta` × `scale`, in place. */
  step(weights: Float32Array, delta: Float32Array, scale = 1): void {
    const m = this.momentum;
    const { rate, mu } = this;
    const nesterov = this.kind === 'nesterov';
    for (let i = 0; i < m.length; i++) {
      const d = Math.fround(delta[i]! * scale);
      const mi = Math.fround(mu * m[i]! + d);
      m[i] = mi;
      weights[i] = weights[i]! - rate * (nesterov ? d + mu * mi : mi);
    }
  }

  /** Replaces the momentum with a checkpoint's or a hand-over's. */
  restore(momentum: ArrayLike<number> | null): void {
    if (momentum === null) {
      this.momentum.fill(0);
      return;
    }
    if (momentum.length !== this.momentum.length) {
      throw new WebringError('ERR_BAD_DATA', `an outer momentum of ${momentum.length} floats, the model has ${this.momentum.length} weights`);
    }
    this.momentum.set(momentum);
  }

  /** Its section of the hand-over: the momentum, so a joiner's next outer step equals everyone's. */
  readonly section: LedgerSection<unknown> = {
    floats: () => this.momentum.length,
    write: (s) => s.set(this.momentum),
    read: (s) => this.momentum.set(s),
  };
}
