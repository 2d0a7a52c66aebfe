// A page of the user's own: a small CNN learns to tell horizontal bars from vertical ones,
// trained by every tab that opens it (serve.mjs prints the links; the first carries the token).
import * as tf from '@tensorflow/tfjs';
import { fitDataset, joinRoom } from 'webring';

const params = new URLSearchParams(location.search);
const log = document.querySelector('#log')!;
const say = (line: string) => void (log.textContent += `${line}\n`);

// The user's own data: 8×8 images of one bar, horizontal (class 0) or vertical (class 1), with noise.
function image(i: number): { pixels: number[]; label: number } {
  const label = i % 2;
  const line = (i * 7) % 8;
  const pixels = Array.from({ length: 64 }, (_, p) => {
    const onBar = label === 0 ? Math.floor(p / 8) === line : p % 8 === line;
    return (onBar ? 0.8 : 0) + 0.2 * Math.abs(Math.sin(i * 13.7 + p));
  });
  return { pixels, label };
}
const examples = (from: number, count: number) =>
  tf.data.array(Array.from({ length: count }, (_, i) => from + i)).map((i) => {
    const { pixels, label } = image(i as number);
    return { xs: tf.tensor3d(pixels, [8, 8, 1]), ys: tf.oneHot(label, 2) };
  });

// The user's own model.
const model = tf.sequential({
  layers: [
    tf.layers.conv2d({ inputShape: [8, 8, 1], filters: 4, kernelSize: 3, activation: 'relu' }),
    tf.layers.maxPooling2d({ poolSize: 2 }),
    tf.layers.flatten(),
    tf.layers.dense({ units: 2, activation: 'softmax' }),
  ],
});
model.compile({ optimizer: tf.train.adam(0.02), loss: 'categoricalCrossentropy' });

const token = params.get('token');
const member = await joinRoom({ url: location.origin, room: params.get('room') ?? 'bars', code: params.get('code') ?? '', name: params.get('name') ?? 'tab', ...(token ? { teacherToken: token } : {}), log: (m) => console.debug(m) });
member.on('membership', (m) => say(`rank ${m.rank} of ${m.size}${m.isChief ? ' (chief)' : ''}`));
const history = await fitDataset(member, model, examples(0, 640), {
  epochs: 3,
  batchSize: 32,
  validationData: examples(10_000, 128),
  minMembers: Number(params.get('members') ?? 3),
  callbacks: { onEpochEnd: (epoch, logs) => say(`epoch ${epoch}: loss ${logs?.loss?.toFixed(4)}, val_loss ${logs?.val_loss?.toFixed(4)}`) },
});
// The trained model is the user's model: it predicts in this tab as any tfjs model does.
const probe = image(20_001);
const sure = (model.predict(tf.tensor4d(probe.pixels, [1, 8, 8, 1])) as tf.Tensor).dataSync()[probe.label]!;
say(`a ${probe.label ? 'vertical' : 'horizontal'} bar: ${(100 * sure).toFixed(0)}% sure; history ${JSON.stringify(history.history)}`);
(window as unknown as { webringHistory: unknown }).webringHistory = history.history;
