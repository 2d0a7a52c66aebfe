/**
 * A data source's sections of the ledgers (ledger.ts), for a source whose replicas must agree
 * on numbers before they cut a batch (DataAgreement: the class's own data). In the gradient
 * tail each rank writes its numbers into its own slot, and every replica agrees on all of
 * them after the all-reduce; in the hand-over's state the sender's position (an epoch's
 * roster) travels to the joiners.
 */
import type { DataAgreement } from '../data/data-source';
import type { LedgerSection } from './ledger';
import type { StepFacts, TailSection } from './step-ledger';

/** The tail's section: capacity slots of `floatsPerRank`. */
export class DataAgreementTail implements TailSection {
  /** The first N slots, made when the ring changes. */
  private agreed: Float32Array = new Float32Array(0);
  private worldSize = 0;

  constructor(private readonly agreement: DataAgreement) {}

  floats(capacity: number): number {
    return capacity * this.agreement.floatsPerRank;
  }

  bind(view: Float32Array, worldSize: number): void {
    this.worldSize = worldSize;
    this.agreed = view.subarray(0, worldSize * this.agreement.floatsPerRank);
  }

  write(view: Float32Array, facts: StepFacts): void {
    this.agreement.writeOwn(view, facts.rank * this.agreement.floatsPerRank);
  }

  read(): void {
    this.agreement.agree(this.agreed, this.worldSize);
  }
}

/** The hand-over state's section: the position the agreement makes. */
export function dataAgreementState(agreement: DataAgreement): LedgerSection<unknown> {
  return {
    floats: () => agreement.stateFloats,
    write: (view) => agreement.writeState(view, 0),
    read: (view) => agreement.readState(view, 0),
  };
}
