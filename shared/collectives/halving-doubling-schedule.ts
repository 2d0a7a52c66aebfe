/**
 * The engine-facing part of halving-doubling: runs the plan of halving-doubling.ts stage
 * by stage. A message must come from its stage's partner and fit the range the plan says.
 * A message of a later stage than the one in progress waits (a partner two stages on may
 * be faster, and addition order decides the bits); a stage completes when all of its
 * messages have arrived, and starts the next stage's sends.
 */
import { roundToHalves } from './fp16';
import { flagsSaturated } from './admission';
import { halvingDoublingPlan, type HalvingDoublingPlan } from './halving-doubling';
import { noteOverflows, type ActiveCollective, type EngineParts, type Schedule } from './schedule';
import { MAX_MESSAGE_BYTES, PHASE_EXCHANGE, WIRE_FP16, readHeader, type ChunkHeader } from './wire';
import type { RingLink } from './collective';

/** A run uses two or three buffer lengths; more plans than this are a different run's. */
const MAX_CACHED_PLANS = 8;

interface Deferred {
  stage: number;
  bytes: Uint8Array;
}

export class HalvingDoublingSchedule implements Schedule {
  private plan: HalvingDoublingPlan | null = null;
  private stage = 0;
  private stageReceived = 0;
  /** Chunks per stage in the arrival marks: the most any stage's range can hold. */
  private seenStride = 0;
  private readonly plans = new Map<number, HalvingDoublingPlan>();
  /** Messages of later stages, copied into pooled 64 KiB buffers: early messages allocate nothing after warm-up. */
  private deferred: Deferred[] = [];
  private readonly deferPool: Uint8Array[] = [];
  private readonly deferredHeader: ChunkHeader = { phase: 0, ringStep: 0, tag: 0, wire: 0, flags: 0, generation: 0, run: 0, step: 0, chunk: 0 };

  constructor(
    private readonly parts: EngineParts,
    private readonly peer: ((rank: number) => RingLink | null) | null,
    private readonly maxDeferredBytes: number,
  ) {}

  start(c: ActiveCollective): void {
    const { layout, admission } = this.parts;
    const plan = this.planFor(c.buf.length);
    this.plan = plan;
    this.stage = 0;
    this.stageReceived = 0;
    this.seenStride = layout.rangeChunks(0, c.buf.length);
    admission.resetSeen(plan.stages.length * this.seenStride);
    this.queueStageSends();
  }

  resume(c: ActiveCollective): void {
    this.advanceStages(c);
  }

  receive(c: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, from: number): void {
    const plan = this.plan!;
    const { layout, admission } = this.parts;
    if (!admission.phase(h, from, PHASE_EXCHANGE, PHASE_EXCHANGE, plan.stages.length)) return;
    const st = plan.stages[h.ringStep]!;
    if (!admission.partner(h, from, st.recvFrom)) return;
    if (!admission.wire(h, from, layout.wire)) return;
    if (h.chunk >= this.seenStride || !layout.locateInRange(st.recvStart, st.recvEnd, h.chunk)) {
      admission.malformed(from, `chunk ${h.chunk}, beyond the range of stage ${h.ringStep}`);
      return;
    }
    // A stage before the one in progress is complete: every message of it has been seen.
    if (!admission.chunk(h, bytes, from, layout.place, h.ringStep * this.seenStride + h.chunk)) return;
    if (flagsSaturated(h)) c.saturated = true;
    if (h.ringStep > this.stage) {
      this.defer(h.ringStep, bytes);
      return;
    }
    this.parts.payload.addOrCopy(bytes, c.buf, layout.place, st.add);
    this.stageReceived++;
    this.advanceStages(c);
  }

  linkFor(_phase: number, stage: number): RingLink | null {
    return this.peer?.(this.plan!.stages[stage]!.sendTo) ?? null;
  }

  missingLinkDetail(_phase: number, stage: number): string {
    return `no link to rank ${this.plan!.stages[stage]!.sendTo}`;
  }

  locateSend(_phase: number, stage: number, chunk: number): void {
    const st = this.plan!.stages[stage]!;
    this.parts.layout.locateInRange(st.sendStart, st.sendEnd, chunk);
  }

  isDone(): boolean {
    return this.stage === this.plan!.stages.length;
  }

  owedBy(_from: number): number {
    return 0;
  }

  stop(): void {
    for (const d of this.deferred) this.deferPool.push(d.bytes);
    this.deferred = [];
  }

  private planFor(length: number): HalvingDoublingPlan {
    let plan = this.plans.get(length);
    if (!plan) {
      if (this.plans.size >= MAX_CACHED_PLANS) this.plans.clear();
      plan = halvingDoublingPlan(this.parts.rank, this.parts.worldSize, length);
      this.plans.set(length, plan);
    }
    return plan;
  }

  private defer(stage: number, bytes: Uint8Array): void {
    if ((this.deferred.length + 1) * MAX_MESSAGE_BYTES > this.maxDeferredBytes) {
      this.parts.stats.droppedOverflow++;
      return;
    }
    const copy = this.deferPool.pop() ?? new Uint8Array(MAX_MESSAGE_BYTES);
    copy.set(bytes);
    this.deferred.push({ stage, bytes: copy });
  }

  /** Moves through every stage whose messages have all arrived, starting each next stage's sends. */
  private advanceStages(c: ActiveCollective): void {
    const plan = this.plan!;
    const { layout } = this.parts;
    while (this.parts.isActive(c) && this.stage < plan.stages.length) {
      const st = plan.stages[this.stage]!;
      if (this.stageReceived < layout.rangeChunks(st.recvStart, st.recvEnd)) break;
      if (this.stage === plan.lastReduceStage && layout.wire === WIRE_FP16) {
        // The owner keeps what it will send, so that it ends equal to every other rank.
        const end = Math.min(plan.ownedEnd, layout.split);
        if (end > plan.ownedStart) noteOverflows(this.parts.stats, c, roundToHalves(c.buf, plan.ownedStart, end - plan.ownedStart));
      }
      this.stage++;
      this.stageReceived = 0;
      if (this.stage < plan.stages.length) {
        this.queueStageSends();
        this.applyDeferred(c);
      }
    }
    this.parts.pump();
  }

  private queueStageSends(): void {
    const st = this.plan!.stages[this.stage]!;
    if (st.sendTo < 0) return;
    const chunks = this.parts.layout.rangeChunks(st.sendStart, st.sendEnd);
    for (let c = 0; c < chunks; c++) this.parts.queue.push(PHASE_EXCHANGE, this.stage, c);
  }

  /** Sums the deferred messages of the stage now in progress, already admitted, in arrival order. */
  private applyDeferred(c: ActiveCollective): void {
    if (this.deferred.length === 0) return;
    const st = this.plan!.stages[this.stage]!;
    const { layout, payload } = this.parts;
    const h = this.deferredHeader;
    const waiting: Deferred[] = [];
    for (const d of this.deferred) {
      if (d.stage !== this.stage) {
        waiting.push(d);
        continue;
      }
      readHeader(d.bytes, h);
      layout.locateInRange(st.recvStart, st.recvEnd, h.chunk);
      payload.addOrCopy(d.bytes, c.buf, layout.place, st.add);
      this.stageReceived++;
      this.deferPool.push(d.bytes);
    }
    this.deferred = waiting;
  }
}
