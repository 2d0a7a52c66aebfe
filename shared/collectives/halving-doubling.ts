/**
 * The schedule of a recursive halving-doubling all-reduce (Rabenseifner's algorithm, as
 * MPICH and NCCL's "tree"-class latency-optimal collectives use): 2·log2(P) exchanges
 * between partners instead of the ring's 2(N-1) hops, while each rank still sends only
 * 2(P-1)/P of the buffer.
 *
 * With P the largest power of two ≤ N, the N-P "extra" ranks r ≥ P first hand their whole
 * buffer to rank r-P (stage PRE) and get the finished sum back at the end (stage POST),
 * two more hops; the P ranks in between run the halving-doubling proper:
 *
 *   reduce-scatter, distance d = P/2, P/4, …, 1: partner r XOR d; both halve their current
 *     range, send the half the partner keeps and add the half it sends them. The rank with
 *     the d bit clear keeps the lower half.
 *   all-gather, distance d = 1, 2, …, P/2: partner r XOR d; each sends the range it owns
 *     and copies the partner's, doubling the range.
 *
 * Every element is summed by exactly one rank, its owner after the reduce-scatter, and
 * float addition is commutative, so both partners of an exchange would compute the same
 * value anyway; the all-gather and POST only copy. Every replica ends bit-identical.
 *
 * Pure: the schedule depends only on (rank, N, length), so every rank derives the same
 * plan without talking.
 */

/** One stage of the schedule as seen by one rank. A -1 partner means nothing that way. */
export interface ExchangeStage {
  sendTo: number;
  sendStart: number;
  sendEnd: number;
  recvFrom: number;
  recvStart: number;
  recvEnd: number;
  /** Received values are added (reduce stages) or copied (gather stages). */
  add: boolean;
}

export interface HalvingDoublingPlan {
  /** Largest power of two ≤ N: the ranks that run the halving-doubling proper. */
  core: number;
  /** log2(core): the exchanges of each of the two halves. */
  levels: number;
  /** PRE, `levels` reduce-scatter stages, `levels` all-gather stages, POST. */
  stages: ExchangeStage[];
  /** The range this rank owns after the reduce-scatter (empty for an extra rank). */
  ownedStart: number;
  ownedEnd: number;
  /** Index of the last reduce-scatter stage: once it completes, the owned range is final. */
  lastReduceStage: number;
}

/** Largest power of two ≤ n (n ≥ 1). */
export function corePowerOfTwo(n: number): number {
  let p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

export function log2Exact(p: number): number {
  let levels = 0;
  while (1 << levels < p) levels++;
  return levels;
}

/**
 * Sequential hops of one all-reduce: what a latency-bound buffer pays α for. The ring's
 * pipelining lets its hops overlap transfers; the count is still 2(N-1) for one message.
 */
export function halvingDoublingHops(n: number): number {
  if (n <= 1) return 0;
  const core = corePowerOfTwo(n);
  return 2 * log2Exact(core) + (core < n ? 2 : 0);
}

export function ringHops(n: number): number {
  return n <= 1 ? 0 : 2 * (n - 1);
}

const none = (): ExchangeStage => ({ sendTo: -1, sendStart: 0, sendEnd: 0, recvFrom: -1, recvStart: 0, recvEnd: 0, add: false });

export function halvingDoublingPlan(rank: number, n: number, length: number): HalvingDoublingPlan {
  const core = corePowerOfTwo(n);
  const levels = log2Exact(core);
  const extras = n - core;
  const stages: ExchangeStage[] = [];

  const pre = none();
  if (rank >= core) {
    pre.sendTo = rank - core;
    pre.sendEnd = length;
  } else if (rank < extras) {
    pre.recvFrom = rank + core;
    pre.recvEnd = length;
    pre.add = true;
  }
  stages.push(pre);

  // The range this rank holds before each reduce-scatter level, and after the last.
  const kept: Array<[number, number]> = [[0, length]];
  for (let level = 0; level < levels; level++) {
    const stage = none();
    const [lo, hi] = kept[level]!;
    if (rank < core) {
      const d = core >> (level + 1);
      const mid = lo + Math.floor((hi - lo) / 2);
      const lower = (rank & d) === 0;
      stage.sendTo = rank ^ d;
      stage.recvFrom = rank ^ d;
      stage.sendStart = lower ? mid : lo;
      stage.sendEnd = lower ? hi : mid;
      stage.recvStart = lower ? lo : mid;
      stage.recvEnd = lower ? mid : hi;
      stage.add = true;
      kept.push([stage.recvStart, stage.recvEnd]);
    } else {
      kept.push([0, 0]);
    }
    stages.push(stage);
  }
  for (let level = 0; level < levels; level++) {
    const stage = none();
    if (rank < core) {
      const d = 1 << level;
      // Send what this rank holds now; receive the other half of the range one level up.
      const [mine0, mine1] = kept[levels - level]!;
      const [up0, up1] = kept[levels - level - 1]!;
      stage.sendTo = rank ^ d;
      stage.recvFrom = rank ^ d;
      stage.sendStart = mine0;
      stage.sendEnd = mine1;
      stage.recvStart = mine0 === up0 ? mine1 : up0;
      stage.recvEnd = mine0 === up0 ? up1 : mine0;
    }
    stages.push(stage);
  }
  const post = none();
  if (rank < extras) {
    post.sendTo = rank + core;
    post.sendEnd = length;
  } else if (rank >= core) {
    post.recvFrom = rank - core;
    post.recvEnd = length;
  }
  stages.push(post);

  const [ownedStart, ownedEnd] = kept[levels]!;
  return { core, levels, stages, ownedStart, ownedEnd, lastReduceStage: levels };
}
