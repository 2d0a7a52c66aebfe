/**
 * MNIST: tell handwritten digits apart, on the official split or a 10,000-digit subset,
 * or on drawings the class makes of its own classes (docs/own-data.md). The student page's
 * try panel is the digit pad (page/digit-pad.ts), which prepares a drawing the way MNIST's
 * digits were prepared (digit-preprocess.ts).
 */
import { ownClassExamples, type ExampleFormat, type Task } from '../task';
import { DIGIT_CLASSES, MNIST_COLS, MNIST_ROWS } from './format';
import { MNIST_SUBSET, OFFICIAL_MNIST } from './datasets';

/** Pixels travel as bytes 0..255; the models take 0..1. */
const PIXEL_SCALE = 1 / 255;

const DIGIT_FORMAT: ExampleFormat = { shape: [MNIST_ROWS, MNIST_COLS, 1], byteScale: PIXEL_SCALE };

export const mnistTask: Task = {
  id: 'mnist',
  title: 'Handwritten digits (MNIST)',
  summary: 'Tell handwritten digits 0–9 apart, or drawings of the classes your class names.',
  target: 'class',
  example: DIGIT_FORMAT,
  outputs: DIGIT_CLASSES,
  // Drawings of the lesson's classes, each an example as the digit pad prepares it.
  own: ownClassExamples(DIGIT_FORMAT),
  models: [
    { id: 'mlp', title: 'MLP (784-128-10)', parameters: 101_770 },
    { id: 'cnn', title: 'small CNN', parameters: 5_994 },
  ],
  datasets: [OFFICIAL_MNIST, MNIST_SUBSET],
  // docs/recipe.md: the MLP visibly learns within a few dozen steps; one epoch of the CNN on the official MNIST scores above 98 %.
  recipe: { optimizer: 'adam', learningRate: 0.003, warmupSteps: 50, batchSizePerWorker: 32, epochs: 2 },
};
