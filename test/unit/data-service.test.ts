/**
 * The data service's parts: the official IDX files and what a damaged one gets, the
 * `ranges` a worker names its examples with, the bounded example cache, the prefetch plan
 * through joins and leaves, and the fetcher's retries. The server's side and a class of
 * tabs streaming the whole of MNIST are in test/server/data-api.test.ts and
 * test/e2e/mnist-60k.spec.ts.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { WebringError } from '../../shared/protocol/errors';
import { parseIdx, parseIdxDigits } from '../../shared/tasks/mnist/idx';
import { MAX_EXAMPLES_PER_REQUEST, decodeRanges, encodeRanges } from '../../shared/data/data-service';
import { ExampleCache } from '../../shared/data/example-cache';
import { httpExampleFetcher, RETRY_FIRST_MS, type ExampleFetcher, type HttpFetcherOptions } from '../../shared/data/example-fetcher';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import { mnistTask } from '../../shared/tasks/mnist/task';
import { MNIST_SUBSET, OFFICIAL_MNIST } from '../../shared/tasks/mnist/datasets';
import type { LoadedDataset } from '../../shared/tasks/task';
import { StreamedDataset, PREFETCH_STEPS } from '../../shared/data/streamed-dataset';
import { advance, cutBatch, shardOf, type DataCursor } from '../../shared/data/batch-plan';
import { EpochPermutation } from '../../shared/data/sharding';
import { loadDataset } from '../../signaling-server/data/datasets';
import { EXAMPLE_BYTES, mnistSubset } from '../support/mnist';
import { mulberry32 } from '../../shared/util/random';

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof WebringError, `expected a WebringError, got ${String(err)}`);
    return `${err.code}: ${err.message}`;
  }
  assert.fail('expected an error');
}

/** An IDX file of unsigned bytes: magic, dimensions, then `data`. */
function idx(dims: number[], data: Uint8Array, magic = 0x0800 | dims.length): Uint8Array {
  const out = new Uint8Array(4 + 4 * dims.length + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, magic, false);
  dims.forEach((d, i) => view.setUint32(4 + 4 * i, d, false));
  out.set(data, 4 + 4 * dims.length);
  return out;
}

test('IDX: the official files parse to 60,000 + 10,000 labelled 28×28 digits', async () => {
  const mnist = await loadDataset(OFFICIAL_MNIST);
  assert.equal(mnist.train.count, 60_000);
  assert.equal(mnist.test.count, 10_000);
  assert.equal(mnist.train.features.length, 60_000 * MNIST_PIXELS);
  // The official files' first labels, as published: 5 0 4 1 9 for training, 7 2 1 0 4 for testing.
  assert.deepEqual([...mnist.train.labels.subarray(0, 5)], [5, 0, 4, 1, 9]);
  assert.deepEqual([...mnist.test.labels.subarray(0, 5)], [7, 2, 1, 0, 4]);
  const perClass = new Array<number>(10).fill(0);
  for (const l of mnist.train.labels) perClass[l]!++;
  assert.ok(perClass.every((c) => c > 5_000), `every digit has thousands of examples: ${perClass}`);
});

test('IDX: a bad magic number, a truncated file, a wrong count or a label past 9 is ERR_BAD_DATA naming the file', () => {
  const pixels = new Uint8Array(2 * MNIST_PIXELS).fill(7);
  const images = idx([2, 28, 28], pixels);
  const labels = idx([2], Uint8Array.of(3, 9));
  const ok = parseIdxDigits({ bytes: images, name: 'img' }, { bytes: labels, name: 'lab' }, 2, 10);
  assert.deepEqual([...ok.labels], [3, 9]);
  assert.equal(ok.pixels.length, 2 * MNIST_PIXELS);

  assert.match(codeOf(() => parseIdx(idx([2], Uint8Array.of(1, 2), 0x0000_0803), 1, 'train-labels-idx1-ubyte')), /^ERR_BAD_DATA: train-labels-idx1-ubyte: magic number 0x00000803, expected 0x00000801/);
  assert.match(codeOf(() => parseIdx(images.subarray(0, images.length - 1), 3, 'train-images-idx3-ubyte')), /^ERR_BAD_DATA: train-images-idx3-ubyte: 1583 B, but its header \(2×28×28\) says 1584 B/);
  assert.match(codeOf(() => parseIdx(images.subarray(0, 6), 3, 'short')), /^ERR_BAD_DATA: short: 6 B is shorter than an IDX header/);
  assert.match(codeOf(() => parseIdxDigits({ bytes: images, name: 'img' }, { bytes: labels, name: 'lab' }, 3, 10)), /^ERR_BAD_DATA: img: 2 images, expected 3/);
  assert.match(codeOf(() => parseIdxDigits({ bytes: images, name: 'img' }, { bytes: idx([1], Uint8Array.of(1)), name: 'lab' }, 2, 10)), /^ERR_BAD_DATA: lab: 1 labels for 2 images/);
  assert.match(codeOf(() => parseIdxDigits({ bytes: images, name: 'img' }, { bytes: idx([2], Uint8Array.of(1, 10)), name: 'lab' }, 2, 10)), /^ERR_BAD_DATA: lab: label 10 at 1/);
  assert.match(codeOf(() => parseIdxDigits({ bytes: idx([2, 27, 28], new Uint8Array(2 * 27 * 28)), name: 'img' }, { bytes: labels, name: 'lab' }, 2, 10)), /^ERR_BAD_DATA: img: 27×28 images/);
});

test('ranges: runs compress, decode back exactly, and anything out of order, out of bounds or too long is refused', () => {
  const indices = Uint32Array.of(0, 1, 2, 5, 9, 10, 59_999);
  const ranges = encodeRanges(indices);
  assert.equal(ranges, '0-2,5,9-10,59999');
  assert.deepEqual([...decodeRanges(ranges, 60_000)], [...indices]);
  for (const [bad, why] of [
    ['', /empty/],
    ['5,3', /ascend/],
    ['1-4,4', /ascend/],
    ['4-1', /backwards/],
    ['60000', /past the split's 60000/],
    ['1;2', /not an index/],
    ['-1', /not an index/],
    [`0-${MAX_EXAMPLES_PER_REQUEST}`, /more than 1024/],
  ] as const) {
    assert.match(codeOf(() => decodeRanges(bad, 60_000)), new RegExp(`^ERR_BAD_REQUEST: ranges: .*${why.source}`), bad);
  }
});

test('the example cache never holds more than its capacity, and drops the oldest first', () => {
  const cache = new ExampleCache(FORMAT, 50, 1_000);
  const pixels = new Uint8Array(MNIST_PIXELS);
  const rand = mulberry32(3);
  const inserted: number[] = [];
  for (let i = 0; i < 2_000; i++) {
    const index = Math.floor(rand() * 1_000);
    pixels.fill(index % 256);
    cache.put(index, index % 10, pixels, 0);
    if (!inserted.includes(index) || !cache.has(index)) inserted.push(index);
    assert.ok(cache.size <= 50, `holds ${cache.size}`);
  }
  assert.equal(cache.size, 50);
  // The newest distinct 50 insertions are the ones held, with their own pixels and labels.
  const images = new Float32Array(MNIST_PIXELS);
  const labels = new Int32Array(1);
  let held = 0;
  for (let i = 0; i < 1_000; i++) {
    if (!cache.has(i)) continue;
    held++;
    cache.read(i, images, labels, 0);
    assert.equal(labels[0], i % 10);
    assert.equal(Math.round(images[400]! * 255), i % 256);
  }
  assert.equal(held, 50);
});

test('the example cache never evicts what the current step pinned, however many other examples arrive; unpinned, they age out as any other', () => {
  const cache = new ExampleCache(FORMAT, 10, 1_000, 4);
  const pixels = new Uint8Array(MNIST_PIXELS);
  const put = (index: number): void => {
    pixels.fill(index % 256);
    cache.put(index, index % 10, pixels, 0);
  };
  for (let i = 0; i < 10; i++) put(i);
  // The step holds three examples already here and one still on its way.
  const step = [0, 5, 9, 700];
  for (const index of step) cache.pin(index);
  for (let i = 0; i < 500; i++) {
    put(100 + i);
    if (i === 250) put(700);
    assert.ok(cache.size <= 10, `holds ${cache.size}`);
    for (const index of step) if (index !== 700 || i >= 250) assert.ok(cache.has(index), `pinned ${index} evicted by the burst at ${i}`);
  }
  const images = new Float32Array(MNIST_PIXELS);
  const labels = new Int32Array(1);
  for (const index of step) {
    cache.read(index, images, labels, 0);
    assert.equal(labels[0], index % 10);
    assert.equal(Math.round(images[400]! * 255), index % 256);
  }
  cache.unpinAll();
  for (let i = 0; i < 10; i++) put(600 + i);
  for (const index of step) assert.ok(!cache.has(index), `${index} outlived its step`);
  // The bound: a step pins at most maxPinned, which leaves the cache room for new examples.
  for (const index of step) cache.pin(index);
  assert.throws(() => cache.pin(1), (err: unknown) => err instanceof WebringError && err.code === 'ERR_INTERNAL');
  assert.throws(() => new ExampleCache(FORMAT, 10, 1_000, 10), (err: unknown) => err instanceof WebringError && err.code === 'ERR_INTERNAL');
  assert.doesNotThrow(() => new ExampleCache(FORMAT, 1_000, 1_000, 1_000), 'a cache of the whole split never evicts');
});

/** The 10k subset as a data service in memory, recording what each fetch asked for. */
let subset: LoadedDataset;

before(() => {
  subset = mnistSubset();
});

function memoryService(log: Array<{ split: string; indices: number[] }>): ExampleFetcher {
  return async (split, indices, count) => {
    log.push({ split, indices: [...indices.subarray(0, count)] });
    const reply = replyOf(split, indices, count);
    // A reply arrives later, never within the call.
    await new Promise((resolve) => setImmediate(resolve));
    return reply;
  };
}

/** The subset's examples `indices[0, count)` of `split`, as the service sends them. */
function replyOf(split: 'train' | 'test', indices: ArrayLike<number>, count: number): { labels: Uint8Array; features: Uint8Array } {
  const data = subset[split];
  const labels = new Uint8Array(count);
  const features = new Uint8Array(count * MNIST_PIXELS);
  for (let i = 0; i < count; i++) {
    labels[i] = data.labels[indices[i]!]!;
    features.set(data.features.subarray(indices[i]! * MNIST_PIXELS, (indices[i]! + 1) * MNIST_PIXELS), i * MNIST_PIXELS);
  }
  return { labels, features };
}

/** What one MNIST example is to a cache or a stream. */
const FORMAT = { features: MNIST_PIXELS, byteScale: mnistTask.example.byteScale };

test('the prefetch plan: a steady class fetches exactly what each rank will train, ahead of time; through joins and leaves every example arrives, once per epoch', async () => {
  const PER_WORKER = 16;
  const SEED = 77;
  const STEADY_STEPS = 100;
  const MAX_WORLD = 5;
  const permutation = new EpochPermutation(8_000, SEED);
  const logs = Array.from({ length: MAX_WORLD }, () => [] as Array<{ split: string; indices: number[] }>);
  const sources = logs.map((log) => new StreamedDataset({ dataset: MNIST_SUBSET, format: FORMAT, perWorker: PER_WORKER, seed: SEED, fetcher: memoryService(log) }));
  const asked = (rank: number): number[] => logs[rank]!.filter((l) => l.split === 'train').flatMap((l) => l.indices);
  const images = new Float32Array(PER_WORKER * MNIST_PIXELS);
  const labels = new Int32Array(PER_WORKER);
  const want = new Uint32Array(PER_WORKER);
  const rand = mulberry32(5);
  let cursor: DataCursor = { epoch: 0, offset: 0 };
  let world = 4;
  let changes = 0;
  let trainedTotal = 0;
  const seenThisEpoch = new Set<number>();
  // What each of four steady ranks trains in the steady steps and the prefetch window after them.
  const steadyPlan = Array.from({ length: 4 }, () => new Set<number>());
  for (let step = 0, c: DataCursor = { epoch: 0, offset: 0 }; step < STEADY_STEPS + PREFETCH_STEPS; step++) {
    const batch = sources[0]!.nextBatch(c, 4);
    for (let rank = 0; rank < 4; rank++) for (const index of permutation.sliceInto(want, batch, rank)) steadyPlan[rank]!.add(index);
    c = advance(batch, 8_000);
  }
  for (let step = 0; step < 400; step++) {
    if (step >= STEADY_STEPS && rand() < 0.1) {
      world = 1 + Math.floor(rand() * MAX_WORLD);
      changes++;
    }
    const batch = sources[0]!.nextBatch(cursor, world);
    for (let rank = 0; rank < world; rank++) {
      const source = sources[rank]!;
      const before = new Set(asked(rank));
      const n = await source.readShard(batch, rank, images, labels);
      assert.equal(n, batch.slices[rank]);
      const indices = permutation.sliceInto(want, batch, rank);
      for (let i = 0; i < n; i++) {
        const index = indices[i]!;
        assert.equal(labels[i], subset.train.labels[index], `step ${step} rank ${rank} example ${i}`);
        assert.equal(Math.round(images[i * MNIST_PIXELS + 300]! * 255), subset.train.features[index * MNIST_PIXELS + 300]);
        assert.ok(!seenThisEpoch.has(index), `index ${index} trained twice in epoch ${batch.epoch}`);
        seenThisEpoch.add(index);
        // Ahead of time: after its first step, a steady rank had asked for this example before the step began.
        if (step > 0 && step < STEADY_STEPS) assert.ok(before.has(index), `step ${step} rank ${rank}: example ${index} was not prefetched`);
      }
      trainedTotal += n;
      assert.ok(source.cachedExamples <= source.cacheCapacity);
    }
    cursor = advance(batch, 8_000);
    if (cursor.offset === 0) {
      assert.equal(seenThisEpoch.size, 8_000, 'every example of the epoch, once');
      seenThisEpoch.clear();
    }
    if (step === STEADY_STEPS - 1) {
      // Exactly: what a steady rank asked for is what it trains in these steps and the prefetch window after them, nothing twice.
      for (let rank = 0; rank < 4; rank++) {
        const list = asked(rank);
        assert.equal(new Set(list).size, list.length, `rank ${rank} asked for an example twice`);
        for (const index of list) assert.ok(steadyPlan[rank]!.has(index), `rank ${rank} fetched ${index}, which it does not train`);
        assert.ok(list.length >= STEADY_STEPS * PER_WORKER);
      }
    }
  }
  assert.ok(changes > 10, `the class changed ${changes} times`);
  // Joins and leaves move shard boundaries: some prefetched examples go unused. The waste stays within one window per rank per change.
  const travelled = [0, 1, 2, 3, 4].reduce((sum, r) => sum + asked(r).length, 0);
  assert.ok(travelled >= trainedTotal);
  assert.ok(travelled <= trainedTotal + changes * MAX_WORLD * PREFETCH_STEPS * PER_WORKER, `travelled ${travelled}, trained ${trainedTotal}, ${changes} changes`);
});

/** The fetcher of a member of room `class` reading `mnist-60k`, with `options` over those. */
const fetcherOf = (options: Partial<HttpFetcherOptions>) =>
  httpExampleFetcher({ baseUrl: '', room: 'class', dataset: 'mnist-60k', features: MNIST_PIXELS, memberToken: () => 'a1'.repeat(24), ...options });

test('the fetcher: a server that cannot answer is retried with backoff and the wait is said; a refusal ends at once; a short reply is never trained on', async () => {
  const reply = new Uint8Array(2 * EXAMPLE_BYTES).fill(9);
  const answers: Array<() => Response> = [
    () => new Response(JSON.stringify({ ok: false, error: { code: 'ERR_RATE_LIMITED', message: 'too many requests' } }), { status: 429 }),
    () => {
      throw new TypeError('fetch failed');
    },
    () => new Response(reply.subarray(0, EXAMPLE_BYTES), { status: 200 }),
    () => new Response(reply, { status: 200 }),
  ];
  const urls: string[] = [];
  const waits: Array<string | null> = [];
  const t0 = performance.now();
  const fetcher = fetcherOf({
    baseUrl: 'http://server',
    onWait: (why) => waits.push(why),
    fetch: async (url, init) => {
      const headers = init?.headers as Record<string, string>;
      // A worker reads as a member: a lockout of its address for wrong join codes never touches it.
      assert.deepEqual(Object.keys(headers), ['Authorization'], 'no join code travels with a member\'s read');
      urls.push(`${String(url)} ${headers.Authorization}`);
      return answers.shift()!();
    },
  });
  const got = await fetcher('train', Uint32Array.of(4, 5), 2);
  assert.deepEqual([...got.labels], [9, 9]);
  assert.equal(got.features.length, 2 * MNIST_PIXELS);
  assert.equal(urls.length, 4);
  assert.equal(urls[0], `http://server/api/rooms/class/data/mnist-60k/train?ranges=4-5 Bearer ${'a1'.repeat(24)}`);
  assert.equal(waits.length, 4, JSON.stringify(waits));
  assert.match(waits[0]!, /waiting for the data service \(HTTP 429: too many requests\); trying again in 0\.3 s/);
  assert.match(waits[1]!, /fetch failed.*trying again in 0\.5 s/);
  assert.match(waits[2]!, /sent 785 B for 2 examples, expected 1570 B.*trying again in 1\.0 s/);
  assert.equal(waits[3], null, 'data flows again');
  assert.ok(performance.now() - t0 >= 3.5 * RETRY_FIRST_MS, 'it backed off: 250 + 500 + 1000 ms');

  const refusing = fetcherOf({
    memberToken: () => 'b2'.repeat(24),
    fetch: async () => new Response(JSON.stringify({ ok: false, error: { code: 'ERR_UNAUTHORIZED', message: 'reading room class needs a member token' } }), { status: 401 }),
  });
  await assert.rejects(refusing('test', Uint32Array.of(1), 1), (err: unknown) => err instanceof WebringError && err.code === 'ERR_UNAUTHORIZED');

  // A fresh join after a drop replaces the token while a request is out: the 401 for the old one is asked again with the new one.
  let token = 'c3'.repeat(24);
  const sent: string[] = [];
  const rejoined = fetcherOf({
    memberToken: () => token,
    fetch: async (_url, init) => {
      const used = (init?.headers as Record<string, string>).Authorization!;
      sent.push(used);
      if (used.endsWith('c3'.repeat(24))) {
        token = 'd4'.repeat(24);
        return new Response(JSON.stringify({ ok: false, error: { code: 'ERR_UNAUTHORIZED', message: 'not a member' } }), { status: 401 });
      }
      return new Response(new Uint8Array(EXAMPLE_BYTES), { status: 200 });
    },
  });
  assert.equal((await rejoined('train', Uint32Array.of(3), 1)).labels.length, 1);
  assert.deepEqual(sent, [`Bearer ${'c3'.repeat(24)}`, `Bearer ${'d4'.repeat(24)}`]);

  const ended = new AbortController();
  const down = fetcherOf({ signal: ended.signal, fetch: async () => new Response('bad gateway', { status: 502 }) });
  const pending = down('train', Uint32Array.of(1), 1);
  setTimeout(() => ended.abort(), 100);
  await assert.rejects(pending, (err: unknown) => err instanceof WebringError && err.code === 'ERR_ABORTED');

  // A run the server ended as stalled (training/run-stop.ts) stops a worker waiting on a data service that keeps refusing it, with that code.
  const stalled = new AbortController();
  const refused = fetcherOf({
    signal: stalled.signal,
    fetch: async () => new Response(JSON.stringify({ ok: false, error: { code: 'ERR_DATA_BUDGET', message: 'room class took 11.6 MiB of its 11.3 MiB' } }), { status: 429, headers: { 'retry-after': '0' } }),
  });
  const waiting = refused('train', Uint32Array.of(1), 1);
  setTimeout(() => stalled.abort(new WebringError('ERR_RUN_STALLED', 'the server ended the run')), 100);
  await assert.rejects(waiting, (err: unknown) => err instanceof WebringError && err.code === 'ERR_RUN_STALLED');
});

test('a streamed source whose service refuses fails the step with the coded error, never with zeros', async () => {
  const source = new StreamedDataset({
    dataset: MNIST_SUBSET, format: FORMAT,
    perWorker: 8,
    seed: 1,
    fetcher: async () => {
      throw new WebringError('ERR_UNAUTHORIZED', 'reading room class needs its join code');
    },
  });
  const batch = source.nextBatch({ epoch: 0, offset: 0 }, 2);
  await assert.rejects(source.readShard(batch, 1, new Float32Array(8 * MNIST_PIXELS), new Int32Array(8)), (err: unknown) => err instanceof WebringError && err.code === 'ERR_UNAUTHORIZED');
});

test('digits cut elsewhere (mnist+own): without its own plan a source fetches only its step and what the planner names, so a drifting guess never floods the cache', async () => {
  const log: Array<{ split: string; indices: number[] }> = [];
  const source = new StreamedDataset({ dataset: MNIST_SUBSET, format: FORMAT, perWorker: 32, seed: 5, fetcher: memoryService(log), planAhead: false });
  const permutation = new EpochPermutation(8_000, 5);
  // The digits of a step beside the class's own: 69 of a 96-place window, cut among 3 ranks.
  const step = (offset: number) => cutBatch({ epoch: 0, offset }, 69, 3);
  source.fetchAhead([step(69), step(138)], 1);
  const images = new Float32Array(32 * MNIST_PIXELS);
  const labels = new Int32Array(32);
  assert.equal(await source.readShard(step(0), 1, images, labels), 23);
  await new Promise((r) => setImmediate(r));
  const fetched = new Set(log.filter((l) => l.split === 'train').flatMap((l) => l.indices));
  const wanted = new Set([0, 69, 138].flatMap((o) => Array.from({ length: 23 }, (_, i) => permutation.forEpoch(0)[o + 23 + i]!)));
  assert.deepEqual([...fetched].sort((a, b) => a - b), [...wanted].sort((a, b) => a - b), 'rank 1\'s slices of the three named steps, nothing more');
  assert.equal(source.stepsAhead, PREFETCH_STEPS);
});

test('the mnist+own livelock cannot come back: a plan drifting ahead by more than the cache, its replies landing while a step waits, never evicts the step\'s examples', async () => {
  // A service whose replies the test hands out one at a time, in the order that livelocked the workers.
  const pending: Array<{ indices: number[]; reply: () => void }> = [];
  const fetched: number[] = [];
  const fetcher: ExampleFetcher = (split, indices, count) =>
    new Promise((resolve) => {
      const list = [...indices.subarray(0, count)];
      if (split === 'train') fetched.push(...list);
      pending.push({ indices: list, reply: () => resolve(replyOf(split, list, count)) });
    });
  const flush = () => new Promise((r) => setImmediate(r));
  const deliver = async (at: number): Promise<void> => {
    pending.splice(at, 1)[0]!.reply();
    await flush();
  };
  const source = new StreamedDataset({ dataset: MNIST_SUBSET, format: FORMAT, perWorker: 4, seed: 9, fetcher, prefetchSteps: 2, planAhead: false });
  const capacity = source.cacheCapacity;
  assert.equal(capacity, 28);
  const permutation = new EpochPermutation(8_000, 9).forEpoch(0);
  const step = cutBatch({ epoch: 0, offset: 0 }, 4, 1);
  const mine = new Set([0, 1, 2, 3].map((p) => permutation[p]!));
  // Half the step comes in an earlier request (the planner's), half in the step's own.
  source.fetchAhead([cutBatch({ epoch: 0, offset: 0 }, 2, 1)], 0);
  const images = new Float32Array(4 * MNIST_PIXELS);
  const labels = new Int32Array(4);
  let read = false;
  const reading = source.readShard(step, 0, images, labels).then((n) => {
    read = true;
    return n;
  });
  let rounds = 0;
  for (; rounds < 12 && !read; rounds++) {
    // One reply with the step's examples lands...
    const forStep = pending.findIndex((p) => p.indices.some((i) => mine.has(i)));
    assert.ok(forStep >= 0, `round ${rounds}: the step waits for nothing`);
    await deliver(forStep);
    if (read) break;
    // ...then the drifted plan's: 32 other digits, further ahead than the cache holds, before the step's next.
    source.fetchAhead(Array.from({ length: 8 }, (_, b) => cutBatch({ epoch: 0, offset: capacity + 4 + rounds * 32 + b * 4 }, 4, 1)), 0);
    for (let at = pending.findIndex((p) => !p.indices.some((i) => mine.has(i))); at >= 0; at = pending.findIndex((p) => !p.indices.some((i) => mine.has(i)))) await deliver(at);
    assert.ok(source.cachedExamples <= capacity);
  }
  assert.ok(read, `the step still waits after ${rounds} rounds: its examples were evicted and fetched again`);
  assert.equal(await reading, 4);
  assert.ok(rounds <= 1, `the step completed as soon as its last reply landed, not after ${rounds} rounds`);
  assert.equal(fetched.filter((i) => mine.has(i)).length, 4, 'each of the step\'s examples travelled once');
  [0, 1, 2, 3].forEach((p, i) => assert.equal(labels[i], subset.train.labels[permutation[p]!]));
});

test("a prefetch that reaches across an epoch's end asks for an example in both epochs once: the service's no-repeats rule never fails a rank", async () => {
  // As the server does: the indices travel as ranges, and a repeat is refused (ERR_BAD_REQUEST).
  const strictService = (log: Array<{ split: string; indices: number[] }>): ExampleFetcher => async (split, indices, count) => {
    const checked = decodeRanges(encodeRanges(indices, count), 8_000);
    log.push({ split, indices: [...checked] });
    await new Promise((resolve) => setImmediate(resolve));
    return replyOf(split, checked, checked.length);
  };
  // The class the lab found failing: N = 8, 32 a device, seed 1234 on mnist-10k (8,000 to train:
  // an epoch ends inside step 31, within the prefetch's reach from step 25 on).
  const N = 8;
  const PER_WORKER = 32;
  const images = new Float32Array(PER_WORKER * MNIST_PIXELS);
  const labels = new Int32Array(PER_WORKER);
  for (let rank = 0; rank < N; rank++) {
    const log: Array<{ split: string; indices: number[] }> = [];
    const source = new StreamedDataset({ dataset: MNIST_SUBSET, format: FORMAT, perWorker: PER_WORKER, seed: 1234, fetcher: strictService(log) });
    let cursor: DataCursor = { epoch: 0, offset: 0 };
    for (let step = 0; step < 40; step++) {
      const batch = source.nextBatch(cursor, N);
      assert.equal(await source.readShard(batch, rank, images, labels), shardOf(batch, rank).count, `rank ${rank}, step ${step}`);
      cursor = advance(batch, 8_000);
    }
    for (const { indices } of log) assert.equal(new Set(indices).size, indices.length);
  }
});
