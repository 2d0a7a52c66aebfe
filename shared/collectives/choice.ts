/**
 * Chooses the all-reduce algorithm for a buffer from measured link models, as NCCL picks
 * between ring and tree from its latency and bandwidth tables: the α-β (Hockney) model,
 * time = hops · α + bytes each link carries / β.
 *
 *   ring:              2(N-1) · α + 2(N-1)/N · B / β
 *   halving-doubling:  2·log2(P) · α + 2(P-1)/P · B / β,  P = largest power of two ≤ N,
 *                      plus 2 · (α + B / β) when N is not a power of two (the extra ranks
 *                      hand their whole buffer in and get the sum back)
 *
 * On paper halving-doubling never loses at a power of two. In practice its exchanges wait
 * for whole stages and use links beyond the ring, so each algorithm gets its own α and β,
 * measured on its own links by probes every rank runs together (measureLinkModels), and
 * the choice compares the two predictions. Ties go to the ring, which needs no links
 * beyond the two neighbours.
 *
 * Every replica calls chooseAlgorithm with the same agreed inputs (the means all-reduced
 * in the gradient tail), so every replica picks the same algorithm without another message.
 */
import { corePowerOfTwo, halvingDoublingHops, ringHops } from './halving-doubling';
import type { Algorithm, AllReduceChoice, WireFormat } from '../protocol';
import { COLLECTIVE_TAG, type Collective, type CollectiveOptions, type CollectiveTag } from './collective';

export interface LinkModel {
  /** Per-hop latency of one small message, in ms. */
  alphaMs: number;
  /** Bytes per ms one link carries while every link is busy. */
  betaBytesPerMs: number;
}

/** Each algorithm's model, measured on its own links; null where not measured. */
export interface LinkModels {
  ring: LinkModel | null;
  halvingDoubling: LinkModel | null;
}

/** Sequential hops of one all-reduce: what a latency-bound buffer pays α for. */
export function hopsOf(algorithm: Algorithm, n: number): number {
  return algorithm === 'ring' ? ringHops(n) : halvingDoublingHops(n);
}

/** Bytes each link carries per byte of the buffer (the ring's 2(N-1)/N). */
export function linkBytesFactor(algorithm: Algorithm, n: number): number {
  if (n <= 1) return 0;
  if (algorithm === 'ring') return (2 * (n - 1)) / n;
  const core = corePowerOfTwo(n);
  return (2 * (core - 1)) / core + (core < n ? 2 : 0);
}

export function predictAllReduceMs(algorithm: Algorithm, n: number, bytes: number, link: LinkModel): number {
  if (n <= 1) return 0;
  return hopsOf(algorithm, n) * link.alphaMs + linkBytesFactor(algorithm, n) * (bytes / link.betaBytesPerMs);
}

/** A model worth trusting: both numbers measured, finite and positive. */
export function isUsable(link: LinkModel | null): link is LinkModel {
  return link !== null && Number.isFinite(link.alphaMs) && link.alphaMs > 0 && Number.isFinite(link.betaBytesPerMs) && link.betaBytesPerMs > 0;
}

/**
 * The algorithm for an all-reduce of `bytes` (as they travel) among `n` ranks. Without
 * usable models for both, or while some rank's halving-doubling links are not open
 * (`meshReady` false), the ring; a fixed choice in the config is honoured once the links
 * are open.
 */
export function chooseAlgorithm(choice: AllReduceChoice, n: number, bytes: number, models: LinkModels | null, meshReady: boolean): Algorithm {
  if (n <= 1 || !meshReady || choice === 'ring') return 'ring';
  if (choice === 'halving-doubling') return choice;
  if (!models || !isUsable(models.ring) || !isUsable(models.halvingDoubling)) return 'ring';
  const ring = predictAllReduceMs('ring', n, bytes, models.ring);
  const hd = predictAllReduceMs('halving-doubling', n, bytes, models.halvingDoubling);
  return hd < ring ? 'halving-doubling' : 'ring';
}

/** The part of a collective the measurement needs: a tab's ring, a unit test's memory mesh. */
export type MeasurableCollective = Pick<Collective, 'worldSize' | 'allReduce'>;

/**
 * The default bandwidth probe: big enough that transfer time dominates one hop's latency on
 * a LAN (256 KiB, four 64 KiB messages per link at N = 2). The trainer probes with its own
 * gradient buffer's size instead: on a loaded machine the algorithms' throughput depends on
 * the size (halving-doubling's half-buffer stages suffer more from contention than the
 * ring's pipelined chunks), so β is measured where the choice is made.
 */
export const PROBE_BANDWIDTH_FLOATS = 64 * 1024;

/** Reusable probe buffers, so measuring again allocates nothing. */
export interface ProbeBuffers {
  latency: Float32Array;
  bandwidth: Float32Array;
}

export const createProbeBuffers = (bandwidthFloats = PROBE_BANDWIDTH_FLOATS): ProbeBuffers => ({
  latency: new Float32Array(1),
  bandwidth: new Float32Array(bandwidthFloats),
});

const PROBE_TAGS: Record<Algorithm, { latency: CollectiveTag; bandwidth: [CollectiveTag, CollectiveTag] }> = {
  ring: { latency: COLLECTIVE_TAG.probeRingLatency, bandwidth: [COLLECTIVE_TAG.probeRingBandwidth, COLLECTIVE_TAG.probeRingBandwidthAgain] },
  'halving-doubling': { latency: COLLECTIVE_TAG.probeHdLatency, bandwidth: [COLLECTIVE_TAG.probeHdBandwidth, COLLECTIVE_TAG.probeHdBandwidthAgain] },
};

async function timed(collective: MeasurableCollective, buf: Float32Array, keyStep: number, tag: CollectiveTag, options: CollectiveOptions): Promise<number> {
  const t0 = performance.now();
  await collective.allReduce(buf, keyStep, tag, options);
  return performance.now() - t0;
}

/**
 * Measures the ring, and halving-doubling when `withHalvingDoubling` (every rank must pass
 * the same: its partner links must be open everywhere), with all-reduces every rank runs
 * together, keyed at `keyStep`:
 *
 * - a one-float ring all-reduce as a barrier, so that no rank's time includes waiting for
 *   a rank still busy with what came before;
 * - one float per algorithm: its hops of pure latency give α;
 * - the bandwidth probe per algorithm, twice, alternating, keeping the faster: the first
 *   large burst on a link that sat idle pays for transport slow start (SCTP's congestion
 *   window), which a training step's regular traffic does not. The time beyond the
 *   latency is the bytes each link carried over β, counted as they travel in `wire`.
 *
 * Null models for a ring of one.
 */
export async function measureLinkModels(
  collective: MeasurableCollective,
  keyStep: number,
  probes: ProbeBuffers,
  withHalvingDoubling: boolean,
  wire: WireFormat = 'fp32',
): Promise<LinkModels> {
  const n = collective.worldSize;
  if (n <= 1) return { ring: null, halvingDoubling: null };
  const algorithms: Algorithm[] = withHalvingDoubling ? ['ring', 'halving-doubling'] : ['ring'];
  await collective.allReduce(probes.latency, keyStep, COLLECTIVE_TAG.probeBarrier);
  const latencyMs = new Map<Algorithm, number>();
  for (const a of algorithms) latencyMs.set(a, await timed(collective, probes.latency, keyStep, PROBE_TAGS[a].latency, { algorithm: a }));
  const bandwidthMs = new Map<Algorithm, number>();
  for (const round of [0, 1] as const) {
    for (const a of algorithms) {
      const ms = await timed(collective, probes.bandwidth, keyStep, PROBE_TAGS[a].bandwidth[round], { algorithm: a, wire });
      bandwidthMs.set(a, Math.min(ms, bandwidthMs.get(a) ?? Infinity));
    }
  }
  const model = (a: Algorithm): LinkModel => {
    const latency = latencyMs.get(a)!;
    const total = bandwidthMs.get(a)!;
    // Timer resolution can leave almost nothing beyond the latency; never let β become infinite.
    const transferMs = Math.max(total - latency, 0.05 * total, 0.01);
    const wireBytes = probes.bandwidth.length * (wire === 'fp16' ? 2 : 4);
    return { alphaMs: latency / hopsOf(a, n), betaBytesPerMs: (linkBytesFactor(a, n) * wireBytes) / transferMs };
  };
  return { ring: model('ring'), halvingDoubling: withHalvingDoubling ? model('halving-doubling') : null };
}
