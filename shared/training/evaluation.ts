/**
 * Test-set accuracy, evaluated data-parallel: each rank scores its shard of the test set,
 * one tiny all-reduce sums the counts.
 */
import { COLLECTIVE_TAG, type Collective } from '../collectives/collective';
import { MNIST_PIXELS } from '../data/mnist-format';
import { yieldToEventLoop } from '../util/yield';
import type { DataSource } from '../data/data-source';
import type { Replica } from '../compute/replica';

/**
 * Test examples scored per forward pass. Between passes the evaluation yields to the event
 * loop, so a slow device scoring 10,000 digits still answers the server's heartbeats: 100
 * CNN examples take about 0.25 s on one CPU core.
 */
const EVAL_BATCH = 100;

export class Evaluation {
  /** Allocated on the first evaluation, then reused: they cross to the replica and come back. */
  private images: Float32Array | null = null;
  private labels: Int32Array | null = null;
  private readonly sums = new Float32Array(2);

  /**
   * Test-set accuracy, evaluated data-parallel: each rank scores its shard, one tiny
   * all-reduce sums. Null when the class holds no test example (own data, none held out yet).
   */
  async run(replica: Replica, data: DataSource, collective: Collective, keyStep: number): Promise<number | null> {
    const { rank, worldSize } = collective;
    const shard = data.testShard(rank, worldSize);
    const from = shard.start;
    const to = shard.start + shard.count;
    let images = (this.images ??= new Float32Array(EVAL_BATCH * MNIST_PIXELS));
    let labels = (this.labels ??= new Int32Array(EVAL_BATCH));
    let correct = 0;
    for (let start = from; start < to; start += EVAL_BATCH) {
      const n = Math.min(EVAL_BATCH, to - start);
      await data.readTest(start, n, images, labels);
      const scored = await replica.score({ images, labels, n });
      correct += scored.correct;
      images = this.images = scored.images;
      labels = this.labels = scored.labels;
      // In-process, the CPU backend's data() resolves as a microtask: without this, the whole test set is one blocking task.
      await yieldToEventLoop();
    }
    this.sums[0] = correct;
    this.sums[1] = to - from;
    await collective.allReduce(this.sums, keyStep, COLLECTIVE_TAG.evaluation);
    return this.sums[1]! > 0 ? this.sums[0]! / this.sums[1]! : null;
  }
}
