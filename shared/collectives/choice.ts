/**
 * Chooses the all-reduce algorithm for a buffer from measured link models, as NCCL picks
 * between ring and tree from its latency and bandwidth tables: the α-β (Hockney) model,
 * time = hops · α + bytes each link carries / β.
 *
 *   ring:              2(N-1) · α + 2(N-1)/N · B / β
 *   halving-doubling:  2·log2(P) · α + 2(P-1)/P · B / β,  P = largest power of two ≤ N,
 *                      plus 2 · (α + B / β) when N is not a power of two (the extra ranks
 *                      hand their whole buffer in and get the sum back)
 *   hub:               2 · α + 2 · B / β   (every rank's link carries B up and B down; β is
 *                      what one rank's link to the hub carries while all of them are busy)
 *
 * Which wins depends on the network, and the measurements see it without being told:
 *   - one shared medium (a Wi-Fi access point): every peer-to-peer frame crosses the air
 *     twice, so the ring's links, all busy at once, share the air 2N ways (β_ring ≈ air/2N)
 *     while the hub's uploads and downloads cross it once (β_hub ≈ air/N on a wired hub):
 *     the hub moves half the ring's airtime and wins by up to 2×;
 *   - independent full-duplex ports (a switched lab): every ring link runs at the port
 *     rate, while the hub's one port carries N·B each way (β_hub ≈ port/N): the ring wins
 *     by about N/2;
 *   - the internet: whatever the site uplinks and the server's link make of it.
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
  hub: LinkModel | null;
}

/** The links each algorithm needs, open on every replica (as voted in the gradient tail). */
export interface LinkReadiness {
  /** Every halving-doubling partner link. */
  mesh: boolean;
  /** Every rank's link to the room's hub (false when the room has none). */
  hub: boolean;
}

/** Sequential hops of one all-reduce: what a latency-bound buffer pays α for. */
export function hopsOf(algorithm: Algorithm, n: number): number {
  if (algorithm === 'hub') return 2;
  return algorithm === 'ring' ? ringHops(n) : halvingDoublingHops(n);
}

/** Bytes each link carries per byte of the buffer (the ring's 2(N-1)/N; the hub's B up and B down). */
export function linkBytesFactor(algorithm: Algorithm, n: number): number {
  if (n <= 1) return 0;
  if (algorithm === 'ring') return (2 * (n - 1)) / n;
  if (algorithm === 'hub') return 2;
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
 * The algorithm for an all-reduce of `bytes` (as they travel) among `n` ranks: of the ring
 * and each algorithm whose links are open on every replica (`ready`) and whose model is
 * usable, the one predicted fastest; ties go to the ring, which needs no other links. A
 * fixed choice in the config is honoured once its links are open, and the ring runs until
 * then.
 */
export function chooseAlgorithm(choice: AllReduceChoice, n: number, bytes: number, models: LinkModels | null, ready: LinkReadiness): Algorithm {
  if (n <= 1 || choice === 'ring') return 'ring';
  if (choice === 'halving-doubling') return ready.mesh ? choice : 'ring';
  if (choice === 'hub') return ready.hub ? choice : 'ring';
  if (!models || !isUsable(models.ring)) return 'ring';
  let best: Algorithm = 'ring';
  let bestMs = predictAllReduceMs('ring', n, bytes, models.ring);
  const candidates: Array<[Algorithm, LinkModel | null, boolean]> = [
    ['halving-doubling', models.halvingDoubling, ready.mesh],
    ['hub', models.hub, ready.hub],
  ];
  for (const [algorithm, model, open] of candidates) {
    if (!open || !isUsable(model)) continue;
    const ms = predictAllReduceMs(algorithm, n, bytes, model);
    if (ms < bestMs) {
      best = algorithm;
      bestMs = ms;
    }
  }
  return best;
}

const LABELS: Record<Algorithm, string> = { ring: 'the ring', 'halving-doubling': 'halving-doubling', hub: 'the hub' };

/** What the measurements say the class's network is, from peer-to-peer against peer-to-hub. */
export type NetworkShape = 'shared-medium' | 'independent-links' | 'mixed';

/**
 * One shared medium gives the hub twice the ring's β (each ring frame crosses the air twice,
 * each hub frame once); independent ports give it 2/N of the ring's (its one port carries
 * everyone's bytes). Halfway between, on a log scale, the measurement says neither.
 */
export function networkShape(models: LinkModels, n: number): NetworkShape | null {
  if (!isUsable(models.ring) || !isUsable(models.hub) || n < 2) return null;
  const ratio = models.hub.betaBytesPerMs / models.ring.betaBytesPerMs;
  if (ratio >= 2 / Math.SQRT2) return 'shared-medium';
  if (ratio <= (2 / n) * Math.SQRT2) return 'independent-links';
  return 'mixed';
}

const SHAPE_TEXT: Record<NetworkShape, string> = {
  'shared-medium': 'one shared medium, like a single Wi-Fi access point',
  'independent-links': 'independent links, like a switched computer lab',
  mixed: 'links of different rates, like sites on the internet',
};

const ms = (v: number): string => `${v < 10 ? v.toFixed(1) : v.toFixed(0)} ms`;

/**
 * One sentence for the teacher page: which algorithm the next step takes and why, from
 * the same agreed inputs chooseAlgorithm used ("one shared medium, like a single Wi-Fi
 * access point: the hub moves half the airtime of the ring (predicted 410 ms against
 * 790 ms)").
 */
export function explainChoice(choice: AllReduceChoice, chosen: Algorithm, n: number, bytes: number, models: LinkModels | null, ready: LinkReadiness): string {
  if (n <= 1) return 'One worker: nothing travels.';
  if (choice !== 'auto') {
    return chosen === choice ? `Set in the config (allreduce: '${choice}').` : `Set to ${LABELS[choice]} in the config, whose links are not open on every worker yet: the ring runs until they are.`;
  }
  if (!models || !isUsable(models.ring)) return 'Measuring the links first: the ring runs until every worker has.';
  const predicted = new Map<Algorithm, number>([['ring', predictAllReduceMs('ring', n, bytes, models.ring)]]);
  if (ready.mesh && isUsable(models.halvingDoubling)) predicted.set('halving-doubling', predictAllReduceMs('halving-doubling', n, bytes, models.halvingDoubling));
  if (ready.hub && isUsable(models.hub)) predicted.set('hub', predictAllReduceMs('hub', n, bytes, models.hub));
  const others = [...predicted].filter(([a]) => a !== chosen).map(([a, t]) => `${ms(t)} for ${LABELS[a]}`);
  const against = others.length > 0 ? ` (predicted ${ms(predicted.get(chosen) ?? 0)} against ${others.join(', ')})` : '';
  const shape = networkShape(models, n);
  if (shape === null) {
    const hubNote = ready.hub ? '' : ' No hub is linked to every worker.';
    return `${LABELS[chosen][0]!.toUpperCase()}${LABELS[chosen].slice(1)} is predicted fastest from the measured links${against}.${hubNote}`;
  }
  let why: string;
  if (chosen === 'hub') why = shape === 'shared-medium' ? 'the hub moves half the airtime of the ring' : 'the hub\'s link is fast enough to carry everyone\'s gradients';
  else if (chosen === 'ring') why = shape === 'independent-links' ? `every ring link carries ${(n / 2).toFixed(1)}× less than the hub's one link` : 'the ring still beats the hub here';
  else why = `halving-doubling needs ${hopsOf('halving-doubling', n)} hops instead of the ring's ${hopsOf('ring', n)} for this small buffer`;
  return `${SHAPE_TEXT[shape][0]!.toUpperCase()}${SHAPE_TEXT[shape].slice(1)}: ${why}${against}.`;
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
  hub: { latency: COLLECTIVE_TAG.probeHubLatency, bandwidth: [COLLECTIVE_TAG.probeHubBandwidth, COLLECTIVE_TAG.probeHubBandwidthAgain] },
};

async function timed(collective: MeasurableCollective, buf: Float32Array, keyStep: number, tag: CollectiveTag, options: CollectiveOptions): Promise<number> {
  const t0 = performance.now();
  await collective.allReduce(buf, keyStep, tag, options);
  return performance.now() - t0;
}

/**
 * Measures the ring, and halving-doubling and the hub where `ready` says their links are
 * open (every rank must pass the same: the vote of the gradient tail), with all-reduces
 * every rank runs together, keyed at `keyStep`:
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
  ready: LinkReadiness,
  wire: WireFormat = 'fp32',
): Promise<LinkModels> {
  const n = collective.worldSize;
  if (n <= 1) return { ring: null, halvingDoubling: null, hub: null };
  const algorithms: Algorithm[] = ['ring'];
  if (ready.mesh) algorithms.push('halving-doubling');
  if (ready.hub) algorithms.push('hub');
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
  return { ring: model('ring'), halvingDoubling: ready.mesh ? model('halving-doubling') : null, hub: ready.hub ? model('hub') : null };
}
