/**
 * Local steps' drift correction: SCAFFOLD's control variates (Karimireddy et al. 2020) in
 * the space of updates, for no extra bytes.
 *
 * A device whose data is not the class's (own data split by class, say) drifts in its local
 * steps towards its own optimum, and the rounds' average then swings (76.9 % on the lab's digits by
 * class at H = 20 uncorrected). SCAFFOLD corrects each local gradient by (c − cᵢ): the
 * class's mean gradient minus the device's own. Here the correction is made to the update
 * instead, so that it holds for any inner optimizer (Adam normalises a gradient's
 * correction away): after every local step the device adds
 *
 *     (dᵢ − Δ) / Kᵢ
 *
 * to its weights, where dᵢ is its own change in the last round (weights at the sync − its
 * local weights, over Kᵢ local steps) and Δ the class's mean change that the round's
 * all-reduce brought (before the outer optimizer). A device that moves as it moved last
 * round then moves as the class moved. Both are already at hand: dᵢ is this device's own,
 * Δ every replica's; nothing more travels, and nothing more is seen by anyone (a secure
 * run's sum is Δ itself).
 *
 * The state (dᵢ, Δ, Kᵢ) is this device's alone, like an inner optimizer's in DiLoCo: the
 * class's weights stay bit-identical after every outer step, which the hash checks. A
 * joiner, a resumed run and a device that trained nothing last round have no dᵢ: they run
 * their first round uncorrected (SCAFFOLD's control variates start at zero).
 */
export class DriftCorrection {
  /** dᵢ while its round's sum is on its way; then the drift itself, (dᵢ − Δ) / Kᵢ. */
  private readonly values: Float32Array;
  /** Kᵢ: the local steps of the round whose sum is on its way; 0 when none is. */
  private pendingSteps = 0;
  /** Whether `values` holds a drift (a pair dᵢ, Δ from one round). */
  private ready = false;

  constructor(parameterCount: number) {
    this.values = new Float32Array(parameterCount);
  }

  /** This device trained `steps` local steps from `anchor` to `local` in the round whose sum comes next. */
  trained(anchor: ArrayLike<number>, local: ArrayLike<number>, steps: number): void {
    const own = this.values;
    for (let i = 0; i < own.length; i++) own[i] = anchor[i]! - local[i]!;
    this.pendingSteps = steps;
    this.ready = false;
  }

  /** The class's mean change of that round: `meanChange` × `scale`. Without a trained round of this device before it, there is no pair. */
  summed(meanChange: ArrayLike<number>, scale: number): void {
    this.ready = this.pendingSteps > 0;
    if (!this.ready) return;
    const v = this.values;
    const k = this.pendingSteps;
    for (let i = 0; i < v.length; i++) v[i] = (v[i]! - Math.fround(meanChange[i]! * scale)) / k;
    this.pendingSteps = 0;
  }

  /** A round that trained nothing here, or a new run: forget the pair. */
  reset(): void {
    this.ready = false;
    this.pendingSteps = 0;
  }

  /** The drift to add after each local step of the next round, (dᵢ − Δ) / Kᵢ, in a new array (the replica keeps it); null when there is no pair. */
  drift(): Float32Array | null {
    return this.ready ? this.values.slice() : null;
  }
}
