/**
 * The hand-over: makes every replica's whole state (its position, the learning-rate ramp,
 * the link measurements, the replica's weights, optimizer state and iterations, and on own
 * data the epoch's roster) equal to rank 0's, at the start of every generation and after
 * a weights-hash mismatch.
 *
 * First a small all-reduce gives every replica every replica's fingerprint (hand-over.ts);
 * survivors of a leave usually agree, and then nothing more is sent. Otherwise the state
 * travels as a pipelined chain broadcast along the ring, from the rank just before the
 * first replica that differs, to the last one: a joiner at the end of the ring takes it
 * from its left neighbour over one link, while the rest of the class only waits, instead
 * of all-reducing the state against zeros over every link.
 */
import { COLLECTIVE_TAG, type Collective } from '../collectives/collective';
import { chainPosition } from '../collectives/chain-broadcast-schedule';
import { MAX_ROOM_MEMBERS } from '../protocol';
import type { Replica } from '../compute/replica';
import type { DataSource } from '../data/data-source';
import type { DataCursor, GlobalBatch } from '../data/batch-plan';
import { FINGERPRINT_FLOATS, fingerprintCursor, handOverChain, ranksBehind, sitOutFrom, writeFingerprint } from './hand-over';
import { Ledger, type LedgerSection } from './ledger';
import { dataAgreementState } from './data-sections';
import type { RunPosition } from './run-position';

/** What the replica's section takes: on the sender the state read from the replica before the ledger is written; on a receiver the state it took. */
interface Carried {
  state: Float32Array | null;
}

/** What a hand-over found. */
export interface SyncOutcome {
  /** How many replicas took the state (0: they already agreed). */
  took: number;
  /** The first rank that sits the next step out (the ranks that took the state, and their sender), or null. */
  sitOutFrom: number | null;
}

export class StateSync {
  private readonly ledger: Ledger<Carried>;
  /** Allocated on the first hand-over: joins and resyncs are rare. */
  private stateBuffer: Float32Array | null = null;
  /** Every replica's fingerprint, sized for the largest ring so far. */
  private agreeBuffer = new Float32Array(0);
  /** Set by a rehearsal: this replica's optimizer state is its own until a hand-over (hand-over.ts ownState). */
  private ownState = false;

  /** `sections` are the other participants' sections of the state, in order after the position and before the replica's. */
  constructor(
    private readonly position: RunPosition,
    private readonly replica: Replica,
    private readonly data: DataSource,
    sections: ReadonlyArray<LedgerSection<unknown>>,
  ) {
    const all: Array<LedgerSection<Carried>> = [position.section, ...sections, this.replicaSection()];
    if (data.agreement) all.push(dataAgreementState(data.agreement));
    this.ledger = new Ledger(all, MAX_ROOM_MEMBERS);
  }

  /** The replica rehearsed a step: its optimizer state is its own until the next hand-over. */
  rehearsed(): void {
    this.ownState = true;
  }

  /** Floats of the whole state. */
  get length(): number {
    return this.ledger.length;
  }

  /**
   * One hand-over over `collective`, keyed at `keyStep` (0 first in every generation: a
   * joiner does not know the step yet; it learns it from the state). `batchFrom` gives the
   * global batch from a cursor, so a receiver fetches its first examples while the state travels.
   */
  async sync(collective: Collective, keyStep: number, batchFrom: (cursor: DataCursor) => GlobalBatch): Promise<SyncOutcome> {
    const n = collective.worldSize;
    // The fingerprints, then the data source's per-rank numbers: a new ring agrees on them before its first step.
    const agreement = this.data.agreement;
    const dataFloats = agreement ? n * agreement.floatsPerRank : 0;
    const length = n * FINGERPRINT_FLOATS + dataFloats;
    if (this.agreeBuffer.length < length) this.agreeBuffer = new Float32Array(length);
    const buffer = this.agreeBuffer.subarray(0, length);
    buffer.fill(0);
    const check = buffer.subarray(0, n * FINGERPRINT_FLOATS);
    const dataValues = buffer.subarray(n * FINGERPRINT_FLOATS);
    if (agreement) agreement.writeOwn(dataValues, collective.rank * agreement.floatsPerRank);
    const { step, cursor, pendingEvaluation, stopped, finishing } = this.position;
    const weightsHash = await this.replica.weightsHash();
    writeFingerprint(check, collective.rank, { step, epoch: cursor.epoch, offset: cursor.offset, pendingEvaluation, stopped, ownState: this.ownState, finishingSteps: finishing?.steps ?? 0, weightsHash });
    await collective.allReduce(buffer, keyStep, COLLECTIVE_TAG.agree);
    if (agreement) agreement.agree(dataValues, n);
    const behind = ranksBehind(check, n);
    const chain = handOverChain(behind);
    const outcome = { took: behind.length, sitOutFrom: sitOutFrom(behind, n) };
    if (!chain) {
      this.ownState = false;
      return { took: 0, sitOutFrom: outcome.sitOutFrom };
    }

    const state = this.stateBufferFor(n);
    const carried: Carried = { state: null };
    const { at, hops } = chainPosition(collective.rank, n, chain);
    const receives = at >= 1 && at <= hops;
    // The agreement round told us where rank 0 is: fetch the first examples while the state travels.
    if (receives && this.data.prefetch) this.data.prefetch(batchFrom(fingerprintCursor(check, 0)), collective.rank);
    if (at === 0) {
      carried.state = await this.replica.readState();
      this.ledger.write(carried);
    }
    await collective.broadcast(state, keyStep, COLLECTIVE_TAG.sync, chain);
    if (receives) {
      this.ledger.read(carried);
      await this.replica.writeState(carried.state!);
    }
    // Every replica now holds the class's state (a sender's own was the class's to begin with).
    this.ownState = false;
    return outcome;
  }

  /** The state's buffer, laid out by its ledger on the first hand-over. */
  private stateBufferFor(worldSize: number): Float32Array {
    if (this.stateBuffer) return this.stateBuffer;
    this.stateBuffer = new Float32Array(this.ledger.length);
    this.ledger.attach(this.stateBuffer, 0, worldSize);
    return this.stateBuffer;
  }

  /** The replica's section: its weights, optimizer slots and iterations (Replica.readState). */
  private replicaSection(): LedgerSection<Carried> {
    return {
      floats: () => this.replica.stateLength,
      write: (s, carried) => s.set(carried.state!),
      // A copy: the state buffer is reused, and the replica's thread may take what it is given.
      read: (s, carried) => {
        carried.state = s.slice();
      },
    };
  }
}
