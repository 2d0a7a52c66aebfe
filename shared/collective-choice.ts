/**
 * Chooses the all-reduce algorithm for a buffer from the measured link model, as NCCL
 * picks between ring and tree from its latency and bandwidth tables: the α-β (Hockney)
 * model, time = hops · α + bytes each link carries / β.
 *
 *   ring:              2(N-1) · α + 2(N-1)/N · B / β
 *   halving-doubling:  2·log2(P) · α + 2(P-1)/P · B / β,  P = largest power of two ≤ N,
 *                      plus 2 · (α + B / β) when N is not a power of two (the extra ranks
 *                      hand their whole buffer in and get the sum back)
 *
 * So for a power of two the latency-optimal algorithm never loses on paper, and for other
 * N it wins below B ≈ α·β · (hop savings) / (extra bandwidth). Ties go to the ring, the
 * algorithm that needs no links beyond the two neighbours.
 *
 * Every replica calls this with the same agreed inputs (the means all-reduced in the
 * gradient tail), so every replica picks the same algorithm without another message.
 */
import { corePowerOfTwo, halvingDoublingHops, ringHops } from './halving-doubling';
import type { Algorithm, AllReduceChoice } from './protocol';
import { COLLECTIVE_TAG, type CollectiveOptions, type CollectiveTag } from './ring-allreduce';

/** The part of a collective the measurement needs: a tab's ring, a unit test's memory ring. */
export interface MeasurableCollective {
  readonly worldSize: number;
  allReduce(buf: Float32Array, step: number, tag: CollectiveTag, options?: CollectiveOptions): Promise<void>;
}

/**
 * The bandwidth probe: big enough that transfer time dominates one hop's latency on a LAN
 * (256 KiB, four 64 KiB messages per link at N = 2), small enough to cost a class a few
 * tens of ms at the start of a generation.
 */
export const PROBE_BANDWIDTH_FLOATS = 64 * 1024;

/** Reusable probe buffers, so measuring again allocates nothing. */
export interface ProbeBuffers {
  latency: Float32Array;
  bandwidth: Float32Array;
}

export const createProbeBuffers = (): ProbeBuffers => ({ latency: new Float32Array(1), bandwidth: new Float32Array(PROBE_BANDWIDTH_FLOATS) });

/**
 * Measures the links with two ring all-reduces every rank runs together, keyed at
 * `keyStep`: one float, whose time is 2(N-1) hops of pure latency (α), then the bandwidth
 * probe, whose time beyond those hops is the bytes each link carried over β. Null for a
 * ring of one.
 */
export async function measureLinkModel(collective: MeasurableCollective, keyStep: number, probes: ProbeBuffers): Promise<LinkModel | null> {
  const n = collective.worldSize;
  if (n <= 1) return null;
  const hops = ringHops(n);
  const t0 = performance.now();
  await collective.allReduce(probes.latency, keyStep, COLLECTIVE_TAG.probeLatency);
  const t1 = performance.now();
  await collective.allReduce(probes.bandwidth, keyStep, COLLECTIVE_TAG.probeBandwidth);
  const t2 = performance.now();
  const alphaMs = (t1 - t0) / hops;
  const perLinkBytes = ((2 * (n - 1)) / n) * probes.bandwidth.byteLength;
  // Timer resolution can leave almost nothing after the hops; never let β become infinite.
  const transferMs = Math.max(t2 - t1 - hops * alphaMs, 0.05 * (t2 - t1), 0.01);
  return { alphaMs, betaBytesPerMs: perLinkBytes / transferMs };
}

export interface LinkModel {
  /** Per-hop latency of one small message, in ms. */
  alphaMs: number;
  /** Bytes per ms one link carries while every link is busy. */
  betaBytesPerMs: number;
}

export function predictAllReduceMs(algorithm: Algorithm, n: number, bytes: number, link: LinkModel): number {
  if (n <= 1) return 0;
  const { alphaMs, betaBytesPerMs } = link;
  if (algorithm === 'ring') return ringHops(n) * alphaMs + ((2 * (n - 1)) / n) * (bytes / betaBytesPerMs);
  const core = corePowerOfTwo(n);
  const fold = core < n ? 2 * (bytes / betaBytesPerMs) : 0;
  return halvingDoublingHops(n) * alphaMs + ((2 * (core - 1)) / core) * (bytes / betaBytesPerMs) + fold;
}

/** A model worth trusting: both numbers measured, finite and positive. */
export function isUsable(link: LinkModel | null): link is LinkModel {
  return link !== null && Number.isFinite(link.alphaMs) && link.alphaMs > 0 && Number.isFinite(link.betaBytesPerMs) && link.betaBytesPerMs > 0;
}

/**
 * The algorithm for an all-reduce of `bytes` (as they travel) among `n` ranks. Without a
 * usable model, or while some rank's halving-doubling links are not open (`meshReady`
 * false), the ring; a fixed choice in the config is honoured once the links are open.
 */
export function chooseAlgorithm(choice: AllReduceChoice, n: number, bytes: number, link: LinkModel | null, meshReady: boolean): Algorithm {
  if (n <= 1 || !meshReady || choice === 'ring') return 'ring';
  if (choice === 'halving-doubling') return choice;
  if (!isUsable(link)) return 'ring';
  return predictAllReduceMs('halving-doubling', n, bytes, link) < predictAllReduceMs('ring', n, bytes, link) ? 'halving-doubling' : 'ring';
}
