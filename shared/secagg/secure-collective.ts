/**
 * Secure aggregation over any collective (Bonawitz et al. 2017, with SecAgg+'s sparse
 * partners): a rank's gradients leave it only as fixed-point words plus pairwise masks
 * that cancel in the class's sum. The ring's neighbours, halving-doubling's partners and
 * the hub each receive uniformly random words; only the sum of all N is the class's sum.
 *
 * It wraps the generation's collective, so the trainer, the ring, halving-doubling and the
 * hub stay as they are: the gradient collective (COLLECTIVE_TAG.gradients, PowerSGD's
 * second sum, COLLECTIVE_TAG.gradientFactors, and a quantized sum's scales) travels on the
 * 'u32' wire, whose words every algorithm adds modulo 2^32, exactly and in any order, so the
 * replicas stay bit-identical. A quantized sum's words (collectives/quantized-sum.ts) arrive
 * as words already: they are masked as they are and keep their 'u16' or 'u8' wire, so
 * secure aggregation keeps the saving. Everything else passes through unmasked: the state hand-over
 * (the weights are the class's anyway), evaluations and link probes, and the gradient
 * buffer's tail (per-rank counts, loss, times and votes: not secret, docs/privacy.md).
 *
 * The buffer is [head words][check word][tail floats]. Every rank adds 1 to the masked check
 * word, so the sum must read exactly N: masks that did not cancel (a rank with other keys,
 * a different attempt) fail the step with ERR_SECAGG_MISMATCH instead of applying noise.
 *
 * Dropouts: a member lost mid-step fails the collective as any loss does; the step is
 * redone on the next generation, with that generation's fresh keys, so no mask is ever
 * revealed and none is used twice. A step retried on the same collective counts as a new
 * attempt, with new masks.
 */
import { COLLECTIVE_TAG, GRADIENT_SUM_TAGS, passOptions, type BroadcastChain, type Collective, type CollectiveOptions, type CollectiveTag } from '../collectives/collective';
import { wordsOf } from '../collectives/words';
import { WebringError } from '../protocol/errors';
import { MIN_SECURE_MEMBERS } from '../protocol';
import type { Clock } from '../util/clock';
import { CLIP_BOUND, decodeSum, encodeMasked } from './fixed-point';
import type { KeyDirectory } from './key-directory';
import { graphSeed, maskPartners } from './mask-graph';
import { pairMask } from './pair-keys';

export { MIN_SECURE_MEMBERS };

/** `dst[i] = src[i] + mask[i]` modulo 2^32 for i < length: a quantized sum's words, masked. */
function addWords(src: Uint32Array, mask: Uint32Array, dst: Uint32Array, length: number): void {
  for (let i = 0; i < length; i++) dst[i] = src[i]! + mask[i]!;
}

/** What a run's secure sums cost and did, for the status and the bench. */
export interface SecureStats {
  /** Gradient sums taken securely. */
  sums: number;
  /** Values clipped to the fixed-point bound, over the run (0 for any sane model). */
  clipped: number;
  /** Time to derive and combine the last step's masks, ms (mostly hidden behind the compute). */
  lastMaskMs: number;
  /** How long the last secure step waited for its masks, ms (0 when they were ready). */
  lastMaskWaitMs: number;
  /** Mask partners of this rank in the current generation. */
  partners: number;
}

/** Buffers and counters shared by a run's secure collectives, one generation after another. */
export class SecureAggregation {
  readonly stats: SecureStats = { sums: 0, clipped: 0, lastMaskMs: 0, lastMaskWaitMs: 0, partners: 0 };
  /** The words travel here: [head words][check word][tail floats]. */
  scratch = new Float32Array(0);
  /** Two mask buffers: this step's, and the next step's being made. */
  masks: [Uint32Array, Uint32Array] = [new Uint32Array(0), new Uint32Array(0)];

  constructor(
    readonly keys: KeyDirectory,
    readonly clock: Clock,
    readonly log: (message: string) => void = () => undefined,
  ) {}

  /** The secure collective over `inner`, for generation `generation` of run `run` whose ranks are `members` (ids), its mask graph drawn from `maskSeed` (Generation.maskSeed). */
  over(inner: Collective, run: number, generation: number, members: readonly string[], maskSeed = 0): SecureCollective {
    this.keys.forgetBefore({ run, generation });
    return new SecureCollective(inner, this, run, generation, members, maskSeed);
  }

  sized(words: number, total: number): void {
    if (this.scratch.length !== total) this.scratch = new Float32Array(total);
    if (this.masks[0].length !== words) this.masks = [new Uint32Array(words), new Uint32Array(words)];
  }
}

interface PreparedMask {
  step: number;
  attempt: number;
  slot: 0 | 1;
  ready: Promise<void>;
}

export class SecureCollective implements Collective {
  readonly rank: number;
  readonly worldSize: number;
  /** Mask partners (ranks), ascending. */
  readonly partners: readonly number[];
  private secrets: Promise<CryptoKey[]> | null = null;
  /** The step last summed here and how many times it was tried: a retry of it is a new attempt, with new masks. */
  private lastStep = -1;
  private attempt = 0;
  /** The inner collective's options, the same object every step: words, and the caller's tail and algorithm. */
  private readonly wordOptions: CollectiveOptions = { wire: 'u32', exactTail: 0 };
  private prepared: PreparedMask | null = null;
  private nextSlot: 0 | 1 = 0;
  /** Secure sums taken on this generation. */
  private sums = 0;

  constructor(
    private readonly inner: Collective,
    private readonly shared: SecureAggregation,
    private readonly run: number,
    readonly generation: number,
    private readonly members: readonly string[],
    maskSeed: number,
  ) {
    this.rank = inner.rank;
    this.worldSize = inner.worldSize;
    this.partners = this.worldSize > 1 ? maskPartners(this.rank, this.worldSize, graphSeed(run, generation, maskSeed)) : [];
    shared.stats.partners = this.partners.length;
    // The keys are made as soon as the generation is in use: the first step need not wait.
    // A generation replaced before its first step never awaits them: its failure is nobody's.
    if (this.worldSize >= MIN_SECURE_MEMBERS) {
      this.secrets = this.fetchSecrets();
      this.secrets.catch(() => undefined);
    }
  }

  allReduce(buf: Float32Array, step: number, tag: CollectiveTag, options: CollectiveOptions = {}): Promise<void> {
    // Alone, nothing leaves the device: there is nobody to mask against. PowerSGD's factors
    // (gradientFactors, the step's second sum) and a quantized sum's scales are a rank's
    // gradient too: masked alike, each as a further attempt of the step, so with masks of their own.
    if (!GRADIENT_SUM_TAGS.has(tag) || this.worldSize === 1) return this.inner.allReduce(buf, step, tag, options);
    return this.secureSum(buf, step, tag, options);
  }

  broadcast(buf: Float32Array, step: number, tag: CollectiveTag, chain: BroadcastChain): Promise<void> {
    return this.inner.broadcast(buf, step, tag, chain);
  }

  private fetchSecrets(): Promise<CryptoKey[]> {
    const ids = this.partners.map((r) => this.members[r]!);
    return this.shared.keys.secrets({ run: this.run, generation: this.generation }, ids);
  }

  private async secureSum(buf: Float32Array, step: number, tag: CollectiveTag, options: CollectiveOptions): Promise<void> {
    const n = this.worldSize;
    if (n < MIN_SECURE_MEMBERS) {
      throw new WebringError('ERR_BAD_STATE', `secure aggregation needs ${MIN_SECURE_MEMBERS} members: with ${n}, the sum would reveal a classmate's gradient`);
    }
    const wire = options.wire ?? 'fp32';
    // Floats become fixed-point 32-bit words; a quantized sum's narrow words are masked as they are.
    const narrow = wire === 'u16' || wire === 'u8';
    if (!narrow && wire !== 'fp32') throw new WebringError('ERR_BAD_REQUEST', `secure aggregation masks float32 values or narrow words: the '${wire}' wire cannot carry them`);
    const tail = options.exactTail ?? 0;
    const head = buf.length - tail;
    const words = head + 1;
    const shared = this.shared;
    shared.sized(words, words + tail);
    this.attempt = step === this.lastStep ? this.attempt + 1 : 0;
    this.lastStep = step;
    const attempt = this.attempt;
    const t0 = shared.clock.now();
    const mask = await this.maskFor(step, attempt, words);
    shared.stats.lastMaskWaitMs = shared.clock.now() - t0;
    const scratch = shared.scratch;
    const w = wordsOf(scratch);
    if (narrow) {
      addWords(wordsOf(buf), mask, w, head);
    } else {
      const clipped = encodeMasked(buf, mask, w, head);
      if (clipped > 0) shared.log(`secure aggregation, step ${step}: ${clipped} gradient value(s) beyond ±${CLIP_BOUND} clipped (a model diverging?)`);
      shared.stats.clipped += clipped;
    }
    w[head] = 1 + mask[head]!;
    scratch.set(buf.subarray(head), words);
    this.wordOptions.wire = narrow ? wire : 'u32';
    await this.inner.allReduce(scratch, step, tag, passOptions(this.wordOptions, options, tail));
    // A narrow sum is only its low bits (wire.ts): so is its check word, and N ≤ 32 fits in 8.
    const check = wire === 'u8' ? w[head]! & 0xff : wire === 'u16' ? w[head]! & 0xffff : w[head];
    if (check !== n) {
      throw new WebringError('ERR_SECAGG_MISMATCH', `step ${step}: the masks did not cancel (check word ${check}, not ${n}): a rank summed with other keys; the class re-forms with fresh ones`);
    }
    if (narrow) wordsOf(buf).set(w.subarray(0, head));
    else decodeSum(w, buf, head);
    buf.set(scratch.subarray(words), head);
    if (this.sums++ === 0) {
      shared.log(`secure aggregation, generation ${this.generation}: a step's masks took ${shared.stats.lastMaskMs.toFixed(1)} ms to make, and the step waited ${shared.stats.lastMaskWaitMs.toFixed(1)} ms for them`);
    }
    shared.stats.sums++;
    // The next step's masks are made while it computes its gradients.
    this.prepare(step + 1, 0);
  }

  /** This step's combined mask: the one prepared for it, or made now. */
  private async maskFor(step: number, attempt: number, words: number): Promise<Uint32Array> {
    const p = this.prepared;
    this.prepared = null;
    if (p && p.step === step && p.attempt === attempt && this.shared.masks[p.slot].length === words) {
      await p.ready;
      return this.shared.masks[p.slot];
    }
    if (p) await p.ready.catch(() => undefined); // its buffer is about to be reused; its failure is this step's below
    const slot = this.takeSlot();
    await this.combine(step, attempt, this.shared.masks[slot]);
    return this.shared.masks[slot];
  }

  private takeSlot(): 0 | 1 {
    const slot = this.nextSlot;
    this.nextSlot = slot === 0 ? 1 : 0;
    return slot;
  }

  private prepare(step: number, attempt: number): void {
    const slot = this.takeSlot();
    const ready = this.combine(step, attempt, this.shared.masks[slot]);
    // A failure (keys gone, WebCrypto refused) is the next step's to report, when it awaits this.
    ready.catch(() => undefined);
    this.prepared = { step, attempt, slot, ready };
  }

  /** out = Σ over partners p of ±mask(p): + where this rank is the lower of the pair, − where it is the higher. */
  private async combine(step: number, attempt: number, out: Uint32Array): Promise<void> {
    const t0 = this.shared.clock.now();
    const secrets = await (this.secrets ??= this.fetchSecrets());
    const label = { run: this.run, generation: this.generation, step, tag: COLLECTIVE_TAG.gradients, attempt };
    const masks = await Promise.all(
      this.partners.map((p, i) => pairMask(secrets[i]!, { ...label, low: Math.min(this.rank, p), high: Math.max(this.rank, p) }, out.length)),
    );
    out.fill(0);
    this.partners.forEach((p, i) => {
      const m = masks[i]!;
      if (this.rank < p) for (let j = 0; j < out.length; j++) out[j]! += m[j]!;
      else for (let j = 0; j < out.length; j++) out[j]! -= m[j]!;
    });
    this.shared.stats.lastMaskMs = this.shared.clock.now() - t0;
  }
}
