/**
 * Names: the class invents first names. A character-level language model (Bengio et al.
 * 2003: an embedding of the last few characters and an MLP) learns which letter comes next
 * in 7,580 English first names, and is scored on 842 names it never saw, in nats per
 * character. Nothing here is shared with the digits: examples are symbol indices, the target
 * is the next symbol, the score a held-out loss. The try panel (page/) completes a prefix
 * and, on the teacher's page, lists names the model invents.
 */
import type { Task } from '../task';
import { CONTEXT, SYMBOLS } from './names-text';
import { FIRST_NAMES } from './datasets';
import { OWN_NAMES } from './own-names';

export const namesTask: Task = {
  id: 'names',
  title: 'Invent first names (a character-level language model)',
  summary: 'The class trains a model of which letter comes next in a name, then it invents names of its own.',
  target: 'next-symbol',
  // Symbol indices, taken as they are (the embedding reads them).
  example: { shape: [CONTEXT], byteScale: 1 },
  outputs: SYMBOLS,
  // Names the students type, kept on their devices (docs/own-data.md).
  own: OWN_NAMES,
  models: [{ id: 'char-mlp', title: `embedding and MLP over the last ${CONTEXT} characters`, parameters: 89_276 }],
  datasets: [FIRST_NAMES],
  // docs/tasks.md: 3 × 64 a step, Adam at 0.005 after a 50-step warm-up; 6 epochs reach 1.99
  // nats per character held out in-process, against 2.11 for the 4-gram (bench/names.md).
  // Local steps keep the run's Adam: plain SGD is measured on the digits only (docs/local-steps.md).
  recipe: { optimizer: 'adam', learningRate: 0.005, warmupSteps: 50, batchSizePerWorker: 64, epochs: 6, localOptimizer: 'adam', localLearningRate: 0.005 },
};
