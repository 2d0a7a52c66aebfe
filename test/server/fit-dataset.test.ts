/**
 * fitDataset through the real server and real WebRTC between three members in this process:
 * a user's functional model with two inputs and mean squared error, built separately by each
 * member (different initial weights: the chief's are handed over), trains on a synthetic
 * tf.data dataset with a global batch; every member gets the same History (loss and
 * val_loss per epoch) and its callbacks the batch logs, the loss falls, and every member's
 * model ends with the same trained weights, which the chief saved with file://. Early
 * stopping stops the run for everyone. Then: N = 1 against plain tfjs, resume, the
 * classroom's options, BackupAndRestore to file:// across two servers, RMSProp's state in
 * checkpoints, and the hub collective through a real hub process.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startServer, type EmbeddedServer } from '../../signaling-server/library';
import { datasetFromFunction, fitDataset, joinRoom, WebringError, type RoomMember } from '../../node-worker/library';

let server: EmbeddedServer;
const members: RoomMember[] = [];
after(async () => {
  // One at a time: @roamhq/wrtc has crashed closing many connections of one process at once.
  for (const m of members) await m.leave();
  await server?.close();
});

const ROOM = 'fit-room';
const ELEMENTS = 240;
const BATCH = 24;

function buildModel(seed: number): tf.LayersModel {
  const a = tf.input({ shape: [3], name: 'a' });
  const b = tf.input({ shape: [2], name: 'b' });
  const joined = tf.layers.concatenate().apply([a, b]) as tf.SymbolicTensor;
  const hidden = tf.layers.dense({ units: 8, activation: 'tanh', kernelInitializer: tf.initializers.glorotUniform({ seed }) }).apply(joined) as tf.SymbolicTensor;
  const out = tf.layers.dense({ units: 1, name: 'y', kernelInitializer: tf.initializers.glorotUniform({ seed: seed + 1 }) }).apply(hidden) as tf.SymbolicTensor;
  const model = tf.model({ inputs: [a, b], outputs: out });
  model.compile({ optimizer: tf.train.sgd(0.1), loss: 'meanSquaredError' });
  return model;
}

/** y = 0.5·a0 − 0.3·a1 + 0.2·(b0 + b1): elements as a dict by the model's input names. */
function synthetic(count: number, offset: number): tf.data.Dataset<tf.TensorContainer> {
  return elementsAt(tf.data.array(Array.from({ length: count }, (_, i) => i + offset)));
}

/** The elements of the indices `indices` gives, in its order. */
function elementsAt(indices: tf.data.Dataset<number>): tf.data.Dataset<tf.TensorContainer> {
  return indices.map((i) => {
    const x = Array.from({ length: 5 }, (_, k) => Math.sin((i as number) * 1.7 + k * 0.9));
    return { xs: { a: tf.tensor1d(x.slice(0, 3)), b: tf.tensor1d(x.slice(3)) }, ys: tf.tensor1d([0.5 * x[0]! - 0.3 * x[1]! + 0.2 * (x[3]! + x[4]!)]) };
  });
}

const saved = path.join(os.tmpdir(), `webring-fit-${process.pid}`);

test('three members fit one functional model with a global batch: the same History everywhere, the loss falls, the models agree', async () => {
  server = await startServer({ host: '127.0.0.1', logLevel: 'silent' });
  for (const [i, name] of ['fit-a', 'fit-b', 'fit-c'].entries()) {
    members.push(await joinRoom({ url: server.url, room: ROOM, code: server.joinCode(ROOM), name, backend: 'cpu', compute: 'main', ...(i === 0 ? { teacherToken: server.teacherToken } : {}) }));
  }
  const models = members.map((_, i) => buildModel(10 + i));
  const batches = members.map(() => [] as Array<{ batch: number; loss: number }>);
  const histories = await Promise.all(
    members.map((m, i) =>
      fitDataset(m, models[i]!, synthetic(ELEMENTS, 0), {
        epochs: 3,
        batchSize: BATCH,
        validationData: synthetic(48, 10_000),
        minMembers: 3,
        save: `file://${saved}`,
        callbacks: { onBatchEnd: async (batch: number, logs?: Record<string, number>) => void batches[i]!.push({ batch, loss: logs!.loss! }) },
      }),
    ),
  );
  for (const h of histories) {
    assert.deepEqual(h.epoch, [0, 1, 2]);
    assert.equal(h.history.loss!.length, 3);
    assert.equal(h.history.val_loss!.length, 3);
  }
  assert.equal(new Set(histories.map((h) => JSON.stringify(h.history))).size, 1, 'every member has the same History');
  const [first, , last] = histories[0]!.history.loss as number[];
  assert.ok(last! < first! * 0.7, `the loss falls: ${first} -> ${last}`);
  // An epoch is 10 global batches; the first has one more, as the members that took the
  // chief's initial weights sit its first step out (the rest of that batch opens the next).
  const starts = batches[0]!.flatMap((b, k) => (b.batch === 0 ? [k] : []));
  assert.equal(starts.length, 3, 'batch numbers start again at every epoch');
  assert.ok(batches[0]!.length >= 3 * (ELEMENTS / BATCH) && batches[0]!.length <= 3 * (ELEMENTS / BATCH) + 1, `one onBatchEnd per step: ${batches[0]!.length}`);
  assert.deepEqual(batches[1], batches[0], 'every member\'s callbacks hear the same batches');
  const weights = await Promise.all(models.map(async (m) => Array.from((await Promise.all(m.getWeights().map((w) => w.data()))).flatMap((d) => Array.from(d)))));
  assert.deepEqual(weights[1], weights[0], 'every member ends with the same model');
  assert.deepEqual(weights[2], weights[0]);
  // The chief saved the trained model with file://, as tfjs-node would; it loads and predicts alike.
  const loaded = await tf.loadLayersModel(`file://${saved}/model.json`);
  const probe = [tf.tensor2d([[0.1, -0.2, 0.3]]), tf.tensor2d([[0.4, -0.5]])];
  assert.deepEqual(await (loaded.predict(probe) as tf.Tensor).data(), await (models[0]!.predict(probe) as tf.Tensor).data());
  await rm(saved, { recursive: true, force: true });
});

test('tf.callbacks.earlyStopping on val_loss stops the run for every member, after the epoch that did not improve', async () => {
  const room = 'fit-early';
  const early: RoomMember[] = [];
  for (const [i, name] of ['early-a', 'early-b'].entries()) {
    early.push(await joinRoom({ url: server.url, room, code: server.joinCode(room), name, backend: 'cpu', compute: 'main', ...(i === 0 ? { teacherToken: server.teacherToken } : {}) }));
  }
  members.push(...early);
  const models = early.map((_, i) => buildModel(30 + i));
  // minDelta so large that no epoch after the first counts as better: patience 1 stops after epoch 2.
  const histories = await Promise.all(
    early.map((m, i) => fitDataset(m, models[i]!, synthetic(ELEMENTS, 0), { epochs: 20, batchSize: BATCH, validationData: synthetic(48, 10_000), minMembers: 2, callbacks: tf.callbacks.earlyStopping({ monitor: 'val_loss', minDelta: 10, patience: 1 }) })),
  );
  for (const h of histories) assert.deepEqual(h.epoch, [0, 1], 'stopped after the second epoch, as one worker would');
  assert.equal((await server.control.status(room)).state, 'done');
});

test('at N = 1, fitDataset trains exactly as plain model.fitDataset on the same batches with SGD', async () => {
  const room = 'fit-alone';
  const alone = await joinRoom({ url: server.url, room, code: server.joinCode(room), name: 'alone', backend: 'cpu', compute: 'main', teacherToken: server.teacherToken });
  members.push(alone);
  const [ours, plain] = [buildModel(50), buildModel(50)];
  const logs: Array<Array<[number, number]>> = [[], []];
  const recorder = (into: Array<[number, number]>) => ({ onBatchEnd: async (batch: number, l?: Record<string, number>) => void into.push([batch, l!.loss!]) });
  const history = await fitDataset(alone, ours, synthetic(ELEMENTS, 0), { epochs: 2, batchSize: BATCH, resumeFrom: 'none', callbacks: recorder(logs[0]!) });
  const reference = await plain.fitDataset(synthetic(ELEMENTS, 0).batch(BATCH) as unknown as tf.data.Dataset<tf.TensorContainerObject>, { epochs: 2, verbose: 0, callbacks: recorder(logs[1]!) });
  // The callbacks hear what tfjs's own would on one worker: each batch's number and loss.
  assert.deepEqual(logs[0]!.map(([b]) => b), logs[1]!.map(([b]) => b));
  logs[0]!.forEach(([, loss], k) => assert.ok(Math.abs(loss - logs[1]![k]![1]) <= 1e-5 * Math.max(1, loss), `batch log ${k}`));
  const [a, b] = [history.history.loss as number[], reference.history.loss as number[]];
  assert.equal(a.length, 2);
  for (let e = 0; e < 2; e++) assert.ok(Math.abs(a[e]! - b[e]!) <= 1e-5 * Math.max(1, b[e]!), `epoch ${e}: ${a[e]} vs tfjs's ${b[e]}`);
  const [mine, theirs] = await Promise.all([ours, plain].map(async (m) => (await Promise.all(m.getWeights().map((w) => w.data()))).flatMap((d) => Array.from(d))));
  mine!.forEach((v, i) => assert.ok(Math.abs(v - theirs![i]!) <= 1e-5, `weight ${i}`));
});

test('a program start config is checked at the edge: a wrong field is a 400 naming it, and the room is untouched', async () => {
  const room = 'fit-config';
  const probe = await joinRoom({ url: server.url, room, code: server.joinCode(room), name: 'probe', backend: 'cpu', compute: 'main' });
  members.push(probe);
  const program = { fingerprint: 'ab'.repeat(16), trainCount: 100, validationCount: 0, batchSize: 10, outputs: ['y'] };
  for (const [body, field] of [
    [{ program: { ...program, fingerprint: 'xyz' } }, 'program.fingerprint'],
    [{ program: { ...program, batchSize: 0 } }, 'program.batchSize'],
    [{ program: { ...program, extra: 1 } }, 'program'],
    [{ program, task: 'mnist' }, 'task'],
    [{ program, classes: ['a', 'b'] }, 'classes'],
    [{ program, data: 'own' }, 'data'],
  ] as const) {
    await assert.rejects(server.control.start(room, body as never), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST' && e.field === field, JSON.stringify(body));
  }
  assert.deepEqual([(await server.control.status(room)).state, (await server.control.status(room)).run], ['idle', 0]);
});

test('a program run resumes from the chief\'s last checkpoint at its step (BackupAndRestore); another model does not', async () => {
  const room = 'fit-resume';
  const member = await joinRoom({ url: server.url, room, code: server.joinCode(room), name: 'resumer', backend: 'cpu', compute: 'main', teacherToken: server.teacherToken });
  members.push(member);
  const first = buildModel(60);
  await fitDataset(member, first, synthetic(ELEMENTS, 0), { epochs: 3, batchSize: BATCH, maxSteps: 7, saveEverySteps: 5, resumeFrom: 'none' });
  const saved = (await (await fetch(`${server.url}/api/rooms/${room}/checkpoints`, { headers: { authorization: `Bearer ${server.teacherToken}` } })).json()) as Array<{ step: number; task: string }>;
  assert.deepEqual(saved.map((c) => [c.step, c.task]).sort(), [[5, 'program'], [7, 'program']]);
  const hashAfterFirst = member.status!.weightsHash;

  // The same program again: it goes on from step 7 with the weights the first run ended with.
  const again = buildModel(61);
  const steps: number[] = [];
  // The steps it trained: each status with a loss (a run's first status comes before the restore, at 0).
  const off = member.on('status', (s) => void (s.state === 'training' && s.loss !== null && steps.push(s.step)));
  const history = await fitDataset(member, again, synthetic(ELEMENTS, 0), { epochs: 3, batchSize: BATCH, maxSteps: 9 });
  off();
  assert.match(member.status!.resumedFrom ?? '', /^ckpt-/);
  assert.equal(Math.min(...steps), 8, 'the run resumed after step 7');
  assert.equal(member.status!.step, 9);
  assert.ok(history.history.loss!.length >= 1);
  assert.equal(member.status!.resumedHash, hashAfterFirst, 'restored to the weights the first run ended with, not the new model\'s');

  // A different model (one more hidden unit) starts afresh: the checkpoint is not of its kind.
  const other = tf.sequential({ layers: [tf.layers.dense({ inputShape: [5], units: 1 })] });
  other.compile({ optimizer: tf.train.sgd(0.1), loss: 'meanSquaredError' });
  const flat = tf.data.array(Array.from({ length: 48 }, (_, i) => i)).map((i) => ({ xs: tf.tensor1d([i as number, 0, 0, 0, 0]), ys: tf.tensor1d([1]) }));
  const restarts: number[] = [];
  const off2 = member.on('status', (s) => void (s.state === 'training' && s.loss !== null && restarts.push(s.step)));
  await fitDataset(member, other, flat, { epochs: 1, batchSize: 8 });
  off2();
  assert.equal(Math.min(...restarts), 1, 'another model starts afresh');
  assert.equal(member.status!.resumedFrom, null);
});

test('the classroom options carry over: a program trains with secure aggregation, and with local steps on the fp16 wire', async () => {
  const room = 'fit-options';
  const trio: RoomMember[] = [];
  for (const [i, name] of ['opt-a', 'opt-b', 'opt-c'].entries()) {
    trio.push(await joinRoom({ url: server.url, room, code: server.joinCode(room), name, backend: 'cpu', compute: 'main', ...(i === 0 ? { teacherToken: server.teacherToken } : {}) }));
  }
  members.push(...trio);
  for (const options of [
    { secureAggregation: true, allreduce: 'ring' as const },
    { sync: 'local-steps' as const, localSteps: 4, wire: 'fp16' as const },
  ]) {
    const models = trio.map((_, i) => buildModel(70 + i));
    const histories = await Promise.all(trio.map((m, i) => fitDataset(m, models[i]!, synthetic(ELEMENTS, 0), { epochs: 2, batchSize: BATCH, minMembers: 3, resumeFrom: 'none', ...options })));
    const room_ = await server.control.status(room);
    assert.equal(room_.config?.secureAggregation, options.secureAggregation ?? false, JSON.stringify(options));
    assert.equal(room_.config?.sync, options.sync ?? 'every-step');
    assert.equal(new Set(histories.map((h) => JSON.stringify(h.history))).size, 1, `the same History on every member: ${JSON.stringify(options)}`);
    const loss = histories[0]!.history.loss as number[];
    assert.ok(loss[1]! < loss[0]!, `the loss falls with ${JSON.stringify(options)}: ${loss.join(', ')}`);
    const weights = await Promise.all(models.map(async (m) => (await Promise.all(m.getWeights().map((w) => w.data()))).flatMap((d) => Array.from(d))));
    assert.deepEqual(weights[1], weights[0]);
    assert.deepEqual(weights[2], weights[0]);
  }
});

test('backup: the chief copies its checkpoints to file:// (the newest maxToKeep), and on a new server with no checkpoint the run resumes from the newest copy at its step', async () => {
  const room = 'fit-backup';
  const dir = path.join(os.tmpdir(), `webring-backup-${process.pid}`);
  const backup = `file://${dir}`;
  const member = await joinRoom({ url: server.url, room, code: server.joinCode(room), name: 'backed-up', backend: 'cpu', compute: 'main', teacherToken: server.teacherToken });
  members.push(member);
  await assert.rejects(fitDataset(member, buildModel(70), synthetic(ELEMENTS, 0), { backup: 'http://example.invalid/backup' }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST' && e.field === 'backup');
  const first = buildModel(70);
  await fitDataset(member, first, synthetic(ELEMENTS, 0), { epochs: 2, batchSize: BATCH, maxSteps: 12, saveEverySteps: 3, maxToKeep: 2, resumeFrom: 'none', backup });
  const hashAfterFirst = member.status!.weightsHash;
  const { readdir } = await import('node:fs/promises');
  const kept = (await readdir(path.join(dir, room))).sort();
  assert.equal(kept.length, 2, `the newest two copies (maxToKeep), by step: ${kept.join(', ')}`);
  assert.equal(kept[1], '0000000012', 'the last is the run\'s last step');
  // Each copy is a model tf.loadLayersModel reads; the newest holds the trained weights.
  const copy = await tf.loadLayersModel(`file://${path.join(dir, room, '0000000012')}/model.json`);
  const probe = [tf.tensor2d([[0.1, -0.2, 0.3]]), tf.tensor2d([[0.4, -0.5]])];
  assert.deepEqual(await (copy.predict(probe) as tf.Tensor).data(), await (first.predict(probe) as tf.Tensor).data());

  // Another server, with an empty data folder: the class moved, or the server lost its disk.
  const elsewhere = await startServer({ host: '127.0.0.1', logLevel: 'silent' });
  const moved = await joinRoom({ url: elsewhere.url, room, code: elsewhere.joinCode(room), name: 'moved', backend: 'cpu', compute: 'main', teacherToken: elsewhere.teacherToken });
  try {
    assert.deepEqual(await elsewhere.control.checkpoints(room), []);
    const steps: number[] = [];
    const off = moved.on('status', (s) => void (s.state === 'training' && s.loss !== null && steps.push(s.step)));
    await fitDataset(moved, buildModel(71), synthetic(ELEMENTS, 0), { epochs: 2, batchSize: BATCH, maxSteps: 15, saveEverySteps: 3, maxToKeep: 2, backup });
    off();
    assert.match(moved.status!.resumedFrom ?? '', /^ckpt-0000000012-/);
    assert.equal(moved.status!.resumedHash, hashAfterFirst, 'restored to the weights the first server\'s run ended with');
    assert.equal(Math.min(...steps), 13, 'the run resumed after step 12');
    assert.equal(moved.status!.step, 15);
    const imported = (await elsewhere.control.checkpoints(room)).find((c) => c.id === moved.status!.resumedFrom);
    assert.equal(imported?.writer, 'imported by the teacher');
    const keptAfter = (await readdir(path.join(dir, room))).sort();
    assert.equal(keptAfter.length, 2, `the new run went on copying, pruning the oldest: ${keptAfter.join(', ')}`);
    assert.equal(keptAfter[1], '0000000015');

    // The import is checked as a chief's upload is, and only the teacher may make one.
    const { tfIoCheckpoints, checkpointFiles } = await import('../../shared/checkpoints/tfio-checkpoints');
    const files = checkpointFiles(await tfIoCheckpoints(backup).load(`${backup}/${room}/0000000015`));
    const before = await elsewhere.control.checkpoints(room);
    const tampered = { ...files, 'model.weights.bin': new Blob([new Uint8Array(await files['model.weights.bin'].arrayBuffer()).map((b) => b ^ 1)]) };
    await assert.rejects(elsewhere.control.importCheckpoint(room, tampered), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST' && e.field === 'weightsSha256');
    const { RoomControl } = await import('../../node-worker/library');
    await assert.rejects(new RoomControl({ url: elsewhere.url, teacherToken: 'not-the-token' }).importCheckpoint(room, files), (e: unknown) => e instanceof WebringError && e.code === 'ERR_UNAUTHORIZED');
    await assert.rejects(elsewhere.control.importCheckpoint('nobody-here', files), (e: unknown) => e instanceof WebringError && e.code === 'ERR_UNKNOWN_ROOM');
    assert.deepEqual(await elsewhere.control.checkpoints(room), before, 'refused imports leave the stored checkpoints untouched');
  } finally {
    await moved.leave();
    await elsewhere.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('a model with RMSProp checkpoints mid-run, and 6 steps then a resume for 2 more end exactly where 8 steps straight do', async () => {
  const rmsprop = (seed: number) => {
    const model = buildModel(seed);
    model.compile({ optimizer: tf.train.rmsprop(0.01, 0.9, 0.5), loss: 'meanSquaredError' });
    return model;
  };
  const alone = async (room: string) => {
    const member = await joinRoom({ url: server.url, room, code: server.joinCode(room), name: room, backend: 'cpu', compute: 'main', teacherToken: server.teacherToken });
    members.push(member);
    return member;
  };
  const common = { epochs: 2, batchSize: BATCH, warmupSteps: 0, saveEverySteps: 3 } as const;
  const straight = rmsprop(80);
  await fitDataset(await alone('fit-rms-straight'), straight, synthetic(ELEMENTS, 0), { ...common, maxSteps: 8, resumeFrom: 'none' });

  const interrupted = await alone('fit-rms-resumed');
  await fitDataset(interrupted, rmsprop(80), synthetic(ELEMENTS, 0), { ...common, maxSteps: 6, resumeFrom: 'none' });
  const saved = await server.control.checkpoints('fit-rms-resumed');
  assert.ok(saved.some((c) => c.step === 6), `RMSProp's state was checkpointed: steps ${saved.map((c) => c.step).join(', ')}`);
  const resumed = rmsprop(81);
  await fitDataset(interrupted, resumed, synthetic(ELEMENTS, 0), { ...common, maxSteps: 8 });
  assert.match(interrupted.status!.resumedFrom ?? '', /^ckpt-0000000006-/);
  const flat = async (m: tf.LayersModel) => (await Promise.all(m.getWeights().map((w) => w.data()))).flatMap((d) => Array.from(d));
  assert.deepEqual(await flat(resumed), await flat(straight), 'the weights and the optimizer\'s accumulators came back exactly');
});

test('a program trains through the hub collective: a hub process joins with the hub key RoomControl reads, the members hear of it, and the sums go through it', async () => {
  const room = 'fit-hub';
  const { spawn } = await import('node:child_process');
  const hubKey = await server.control.hubKey(room);
  assert.match(hubKey, /^[0-9a-f]{64}$/);
  const trio: RoomMember[] = [];
  for (const [i, name] of ['hubbed-a', 'hubbed-b', 'hubbed-c'].entries()) {
    trio.push(await joinRoom({ url: server.url, room, code: server.joinCode(room), name, backend: 'cpu', compute: 'main', ...(i === 0 ? { teacherToken: server.teacherToken } : {}) }));
  }
  members.push(...trio);
  const heardHub: Array<string | null> = [];
  trio[0]!.on('hub', (h) => heardHub.push(h?.name ?? null));
  const hub = spawn(process.execPath, ['--import', 'tsx', 'node-worker/hub.ts', '--url', server.url, '--room', room, '--name', 'lib-hub'], {
    cwd: path.resolve(import.meta.dirname, '../..'),
    env: { ...process.env, JOIN_CODE: server.joinCode(room), HUB_KEY: hubKey },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const hubOutput: string[] = [];
  hub.stdout.on('data', (d: Buffer) => hubOutput.push(d.toString()));
  hub.stderr.on('data', (d: Buffer) => hubOutput.push(d.toString()));
  try {
    const deadline = Date.now() + 30_000;
    while ((await server.control.status(room)).hub?.name !== 'lib-hub' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.equal((await server.control.status(room)).hub?.name, 'lib-hub', hubOutput.join(''));
    const algorithms = new Set<string>();
    let training = true;
    const watch = (async () => {
      while (training) {
        for (const m of (await server.control.status(room)).members) if (m.collective) algorithms.add(m.collective.algorithm);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const models = trio.map((_, i) => buildModel(90 + i));
    const histories = await Promise.all(trio.map((m, i) => fitDataset(m, models[i]!, synthetic(ELEMENTS, 0), { epochs: 6, batchSize: BATCH, minMembers: 3, resumeFrom: 'none', allreduce: 'hub' })));
    training = false;
    await watch;
    assert.ok(algorithms.has('hub'), `the members summed at the hub: ${[...algorithms].join(', ')}; hub said: ${hubOutput.join('')}`);
    assert.ok(heardHub.includes('lib-hub'), `the member's 'hub' event named the hub: ${heardHub.join(', ')}`);
    assert.equal(new Set(histories.map((h) => JSON.stringify(h.history))).size, 1, 'the same History on every member');
    const loss = histories[0]!.history.loss as number[];
    assert.ok(loss.at(-1)! < loss[0]!, `the loss falls: ${loss.join(' → ')}`);
  } finally {
    hub.kill('SIGTERM');
  }
});

test("each member reads its own shard (datasetFromFunction, as distribute_datasets_from_function): the same History and weights everywhere, and the loss falls", async () => {
  const room = 'fit-own-shards';
  const trio: RoomMember[] = [];
  for (const [i, name] of ['shard-a', 'shard-b', 'shard-c'].entries()) {
    trio.push(await joinRoom({ url: server.url, room, code: server.joinCode(room), name, backend: 'cpu', compute: 'main', ...(i === 0 ? { teacherToken: server.teacherToken } : {}) }));
  }
  members.push(...trio);
  const asked: string[][] = trio.map(() => []);
  // Member m's pipeline: the elements whose index falls to its shard, in an order of its own.
  const ownShards = (m: number) =>
    datasetFromFunction(({ shardIndex, shardCount, epoch }) => {
      asked[m]!.push(`${shardIndex}/${shardCount}`);
      const mine = Array.from({ length: ELEMENTS }, (_, i) => i).filter((i) => i % shardCount === shardIndex);
      return elementsAt(tf.data.array(mine).shuffle(mine.length, `member-${m}-epoch-${epoch}`, false));
    });
  await assert.rejects(fitDataset(trio[0]!, buildModel(100), ownShards(0), { batchSize: BATCH }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST' && e.field === 'stepsPerEpoch');
  const models = trio.map((_, i) => buildModel(100 + i));
  const histories = await Promise.all(trio.map((m, i) => fitDataset(m, models[i]!, ownShards(i), { epochs: 3, batchSize: BATCH, stepsPerEpoch: ELEMENTS / BATCH, validationData: synthetic(48, 10_000), minMembers: 3, resumeFrom: 'none' })));
  for (const h of histories) assert.deepEqual(h.epoch, [0, 1, 2]);
  assert.equal(new Set(histories.map((h) => JSON.stringify(h.history))).size, 1, 'every member has the same History');
  const loss = histories[0]!.history.loss as number[];
  assert.ok(loss.at(-1)! < loss[0]! * 0.7, `the loss falls: ${loss.join(' → ')}`);
  const weights = await Promise.all(models.map(async (m) => (await Promise.all(m.getWeights().map((w) => w.data()))).flatMap((d) => Array.from(d))));
  assert.deepEqual(weights[1], weights[0], 'every member ends with the same model');
  assert.deepEqual(weights[2], weights[0]);
  assert.deepEqual(asked.map((a) => new Set(a).size === 1 ? a[0] : a.join(',')).sort(), ['0/3', '1/3', '2/3'], 'each member was told its own shard of three');
});
