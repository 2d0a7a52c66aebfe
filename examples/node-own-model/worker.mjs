// One worker of examples/node-own-model: a model built for one machine, trained by many.
// Started by launch.mjs with WEBRING_URL, WEBRING_ROOM, WEBRING_CODE (and, for the one that
// starts the run, WEBRING_TOKEN). Prints one line: HISTORY {...} when its fit ends.
import * as tf from '@tensorflow/tfjs';
import { joinRoom, fitDataset } from 'webring/node';

const { WEBRING_URL: url, WEBRING_ROOM: room, WEBRING_CODE: code, WEBRING_TOKEN: teacherToken, WORKER_NAME: name, SAVE_TO: saveTo, WEBRING_BACKEND: backend } = process.env;

// The user's own model: two inputs (a reading of 4 sensors, and 3 settings), one output, mean squared error.
const sensors = tf.input({ shape: [4], name: 'sensors' });
const settings = tf.input({ shape: [3], name: 'settings' });
const joined = tf.layers.concatenate().apply([sensors, settings]);
const hidden = tf.layers.dense({ units: 16, activation: 'relu' }).apply(joined);
const output = tf.layers.dense({ units: 1, name: 'power' }).apply(hidden);
const model = tf.model({ inputs: [sensors, settings], outputs: output });
model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });

// The user's own data, the same on every worker: 4,000 synthetic readings, shuffled with a fixed seed.
const reading = (i) => Array.from({ length: 7 }, (_, k) => Math.sin(i * 0.37 + k * 1.3) * Math.cos(i * 0.011 * (k + 1)));
const power = (x) => 0.8 * x[0] - 0.5 * x[1] + 0.3 * x[2] * x[4] + 0.2 * (x[5] + x[6]);
const examples = (from, count) =>
  tf.data.array(Array.from({ length: count }, (_, i) => from + i)).map((i) => {
    const x = reading(i);
    return { xs: { sensors: tf.tensor1d(x.slice(0, 4)), settings: tf.tensor1d(x.slice(4)) }, ys: tf.tensor1d([power(x)]) };
  });
const train = examples(0, 4000).shuffle(4000, 'webring-example', false);
const validation = examples(100_000, 400);

// The maths runs in a thread of its own, on WebGPU through Dawn where a GPU is (WEBRING_BACKEND=cpu: the CPU).
const member = await joinRoom({ url, room, code, name, backend: backend === 'cpu' ? 'cpu' : null, ...(teacherToken ? { teacherToken } : {}) });
member.on('membership', (m) => console.log(`${name}: rank ${m.rank} of ${m.size}${m.isChief ? ' (chief)' : ''}`));
const history = await fitDataset(member, model, train, {
  epochs: 4,
  batchSize: 64,
  validationData: validation,
  minMembers: 3,
  save: `file://${saveTo}`,
  callbacks: { onEpochEnd: (epoch, logs) => console.log(`${name}: epoch ${epoch} loss ${logs.loss.toFixed(5)} val_loss ${logs.val_loss?.toFixed(5)}`) },
});
console.log(`HISTORY ${JSON.stringify({ name, epochs: history.epoch, loss: history.history.loss, val_loss: history.history.val_loss })}`);
await member.leave();
