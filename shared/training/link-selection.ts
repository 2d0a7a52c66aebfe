/**
 * Which collective the next step's gradients take, agreed in the step before it.
 *
 * Every step's tail carries each replica's link measurements (α and β of the ring, of
 * halving-doubling and of the hub; summed, so their means once divided by N) and its
 * votes that its halving-doubling partner links and its link to the hub are open. Every
 * replica reads the same sums, so every replica picks the same algorithm (choice.ts) with
 * no message of its own. The hand-over's state carries the sender's measurements, so a
 * joiner appended to measured links takes them instead of the whole class probing again.
 */
import type { Algorithm, StartConfig } from '../protocol';
import type { Collective } from '../collectives/collective';
import { chooseAlgorithm, createProbeBuffers, explainChoice, measureLinkModels, type LinkModel, type LinkModels, type LinkReadiness, type ProbeBuffers } from '../collectives/choice';
import type { LedgerSection } from './ledger';
import type { StepFacts, TailSection } from './step-ledger';

/** α and β of the ring, of halving-doubling, then of the hub. */
const MODEL_FLOATS = 6;
/** The tail: the models, then the two readiness votes. */
const TAIL_MESH_READY = MODEL_FLOATS;
const TAIL_HUB_READY = MODEL_FLOATS + 1;

/** The numbers the teacher's sentence depends on: algorithm, world size, bytes, votes, and each model's α and β. */
const REASON_INPUTS = 11;
const ALGORITHM_CODES: Record<Algorithm, number> = { ring: 0, 'halving-doubling': 1, hub: 2 };

export class LinkSelection implements TailSection {
  /** What the next gradient all-reduce uses; every replica derives the same from the tail. */
  next: Algorithm = 'ring';
  /** Each algorithm's mean measurements as agreed in the last step (null before any). */
  models: LinkModels | null = null;
  /** Why `next` was picked, for the teacher (choice.ts explainChoice). */
  reason = '';
  /**
   * Set when every replica's partner links were open in the last step and the links of
   * this generation are not measured yet (or the hub's link opened since): the worker then
   * measures before the next step. Derived from the agreed tail, so the same on every replica.
   */
  measureDue = false;
  /** The hand-over state's section: the sender's measurements, -1 for one not measured. */
  readonly state: LedgerSection<unknown>;
  /** This replica's measurements in this generation; null until measured. */
  private measured: LinkModels | null = null;
  /** Which algorithms' links were open on every replica in the last step: the agreed vote. */
  private ready: LinkReadiness = { mesh: false, hub: false };
  /** Allocated on the first measurement (a ring of one never measures), then reused. */
  private probes: ProbeBuffers | null = null;
  /** The gradient buffer: its floats (the probes' size), its bytes on the wire. */
  private bufferFloats = 0;
  private wireBytes = 0;
  /** The inputs the last sentence was for: it is rebuilt only when they change, not every step. */
  private readonly reasonInputs = new Float64Array(REASON_INPUTS);
  private readonly reasonScratch = new Float64Array(REASON_INPUTS);

  constructor(private readonly config: Pick<StartConfig, 'allreduce' | 'wire'>) {
    this.state = {
      floats: () => MODEL_FLOATS,
      write: (view) => writeModels(view, this.measured, -1),
      read: (view) => {
        this.measured = readStateModels(view);
      },
    };
  }

  /** The gradient buffer the choice is for: its parameters travel in the configured format, its tail as float32. */
  sizeFor(parameterCount: number, tailFloats: number): void {
    this.bufferFloats = parameterCount + tailFloats;
    this.wireBytes = parameterCount * (this.config.wire === 'fp16' ? 2 : 4) + tailFloats * 4;
  }

  /** A new generation starts on the ring until its links are voted open; `keepModels` keeps the measurements (same hub: training-run.ts adoptLatestRing). */
  reset(keepModels: boolean): void {
    this.next = 'ring';
    if (!keepModels) this.measured = null;
    this.ready = { mesh: false, hub: false };
    this.measureDue = false;
  }

  /** Measures the links (choice.ts) at the gradient buffer's own size and format: β where the choice is made. */
  async measure(collective: Collective, keyStep: number): Promise<LinkModels> {
    this.measureDue = false;
    this.probes ??= createProbeBuffers(this.bufferFloats);
    this.measured = await measureLinkModels(collective, keyStep, this.probes, this.ready, this.config.wire);
    return this.measured;
  }

  floats(): number {
    return MODEL_FLOATS + 2;
  }

  write(view: Float32Array, facts: StepFacts): void {
    // Zeros when not measured: they then sum to zero.
    writeModels(view, this.measured, 0);
    view[TAIL_MESH_READY] = facts.options.meshReady ? 1 : 0;
    view[TAIL_HUB_READY] = facts.options.hubReady ? 1 : 0;
  }

  read(view: Float32Array, facts: StepFacts): void {
    const n = facts.worldSize;
    const models = readModels(view, n);
    const ready: LinkReadiness = { mesh: view[TAIL_MESH_READY] === n, hub: view[TAIL_HUB_READY] === n };
    this.ready = ready;
    this.models = models;
    this.next = chooseAlgorithm(this.config.allreduce, n, this.wireBytes, models, ready);
    this.reason = this.explain(n, models, ready);
    // Measure once the partner links are open, and again when the hub's links open later.
    this.measureDue = n > 1 && ready.mesh && (this.measured === null || (ready.hub && this.measured.hub === null));
  }

  /** Why the next step takes `next`, in one sentence; the same sentence as long as its inputs stay the same. */
  private explain(worldSize: number, models: LinkModels | null, ready: LinkReadiness): string {
    const next = this.reasonScratch;
    next[0] = ALGORITHM_CODES[this.next];
    next[1] = worldSize;
    next[2] = this.wireBytes;
    next[3] = ready.mesh ? 1 : 0;
    next[4] = ready.hub ? 1 : 0;
    next[5] = models?.ring?.alphaMs ?? -1;
    next[6] = models?.ring?.betaBytesPerMs ?? -1;
    next[7] = models?.halvingDoubling?.alphaMs ?? -1;
    next[8] = models?.halvingDoubling?.betaBytesPerMs ?? -1;
    next[9] = models?.hub?.alphaMs ?? -1;
    next[10] = models?.hub?.betaBytesPerMs ?? -1;
    let changed = this.reason === '';
    for (let i = 0; i < REASON_INPUTS; i++) {
      if (this.reasonInputs[i] !== next[i]) changed = true;
      this.reasonInputs[i] = next[i]!;
    }
    if (changed) this.reason = explainChoice(this.config.allreduce, this.next, worldSize, this.wireBytes, models, ready);
    return this.reason;
  }
}

/** The ring's mean measurements; null when nobody has measured in this generation. */
function readModels(view: Float32Array, n: number): LinkModels | null {
  const model = (i: number): LinkModel | null => (view[2 * i]! > 0 ? { alphaMs: view[2 * i]! / n, betaBytesPerMs: view[2 * i + 1]! / n } : null);
  const ring = model(0);
  const halvingDoubling = model(1);
  const hub = model(2);
  return ring || halvingDoubling || hub ? { ring, halvingDoubling, hub } : null;
}

/** α and β per algorithm into `view`, `none` for each one not measured. */
function writeModels(view: Float32Array, models: LinkModels | null, none: number): void {
  writeModel(view, 0, models?.ring ?? null, none);
  writeModel(view, 2, models?.halvingDoubling ?? null, none);
  writeModel(view, 4, models?.hub ?? null, none);
}

function writeModel(view: Float32Array, at: number, model: LinkModel | null, none: number): void {
  view[at] = model ? model.alphaMs : none;
  view[at + 1] = model ? model.betaBytesPerMs : none;
}

function readStateModels(view: Float32Array): LinkModels | null {
  const one = (i: number): LinkModel | null => (view[2 * i]! < 0 ? null : { alphaMs: view[2 * i]!, betaBytesPerMs: view[2 * i + 1]! });
  const ring = one(0);
  return ring ? { ring, halvingDoubling: one(1), hub: one(2) } : null;
}
