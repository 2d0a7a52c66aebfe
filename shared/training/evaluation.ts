/**
 * The held-out score, evaluated data-parallel: each rank scores its shard of the test set,
 * one tiny all-reduce sums the counts and the losses.
 */
import { COLLECTIVE_TAG, type Collective } from '../collectives/collective';
import { yieldToEventLoop } from '../util/yield';
import type { DataSource } from '../data/data-source';
import type { Replica } from '../compute/replica';

/**
 * Test examples scored per forward pass. Between passes the evaluation yields to the event
 * loop, so a slow device scoring 10,000 examples still answers the server's heartbeats: 100
 * examples of a small convolutional model take about 0.25 s on one CPU core.
 */
const EVAL_BATCH = 100;

/** What an evaluation found over the class's held-out examples. */
export interface Scores {
  /** The share predicted right (the argmax is the target). */
  accuracy: number;
  /** The mean loss per example in nats: cross-entropy per example, per symbol for text. */
  loss: number;
  examples: number;
}

export class Evaluation {
  /** Allocated on the first evaluation, then reused: they cross to the replica and come back. */
  private features: Float32Array | null = null;
  private labels: Int32Array | null = null;
  private readonly sums = new Float32Array(3);

  /** `perExample`: numbers in one example (the task's F). */
  constructor(private readonly perExample: number) {}

  /**
   * Held-out accuracy and loss, evaluated data-parallel: each rank scores its shard, one
   * tiny all-reduce sums. Null when the class holds no test example (own data, none held out yet).
   */
  async run(replica: Replica, data: DataSource, collective: Collective, keyStep: number): Promise<Scores | null> {
    const { rank, worldSize } = collective;
    const shard = data.testShard(rank, worldSize);
    const from = shard.start;
    const to = shard.start + shard.count;
    let features = (this.features ??= new Float32Array(EVAL_BATCH * this.perExample));
    let labels = (this.labels ??= new Int32Array(EVAL_BATCH));
    let correct = 0;
    let loss = 0;
    for (let start = from; start < to; start += EVAL_BATCH) {
      const n = Math.min(EVAL_BATCH, to - start);
      await data.readTest(start, n, features, labels);
      const scored = await replica.score({ features, labels, n });
      correct += scored.correct;
      loss += scored.loss;
      features = this.features = scored.features;
      labels = this.labels = scored.labels;
      // In-process, the CPU backend's data() resolves as a microtask: without this, the whole test set is one blocking task.
      await yieldToEventLoop();
    }
    this.sums[0] = correct;
    this.sums[1] = to - from;
    this.sums[2] = loss;
    await collective.allReduce(this.sums, keyStep, COLLECTIVE_TAG.evaluation);
    const examples = this.sums[1]!;
    return examples > 0 ? { accuracy: this.sums[0]! / examples, loss: this.sums[2]! / examples, examples } : null;
  }
}
