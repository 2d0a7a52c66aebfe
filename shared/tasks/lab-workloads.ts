/**
 * The workloads the lab (lab/, `npm run lab`, `npm run leak`) and the benchmarks
 * (test/bench/) measure, named by the part they play there, not by what they learn:
 *
 * - `dense`: a model of few layers and many parameters (a large gradient, light compute):
 *   what the collectives, secure aggregation, local steps, joins and faults are measured on;
 * - `conv`: a model of few parameters and heavy compute (a small gradient, slow steps):
 *   the scaling target, the mixed class and time to accuracy.
 *
 * The lab speaks of "the dense model" and "the conv workload" and reads everything about
 * them from here: which task and model a run starts, the parameters its gradient carries,
 * the datasets it trains and is scored on, the example's shape (through the task), and the
 * words its reports use. The ids these produce end up in bench/*.json (a row's `net`, the
 * `<model>-scaling-n8` target, a local-steps plan's `data`), so they stay what they were.
 * Pointing a role at another task's model is a change here alone.
 */
import { findTask } from './registry';
import type { Task, TaskDataset } from './task';

/** What a workload is to the lab. */
export type WorkloadRole = 'dense' | 'conv';

/** The datasets the lab trains on, both of the workloads' task. */
export interface LabDatasets {
  /** The task's full dataset: time to accuracy, the local-steps accuracy runs, the checkpoint scorer. */
  readonly full: TaskDataset;
  /** A small one, whose epoch fits a lesson: secure aggregation's accuracy runs, the leak demo. */
  readonly small: TaskDataset;
}

/** How the reports name the data in their sentences. */
export interface LabDataWords {
  /** The data's name in prose. */
  readonly name: string;
  /** The full dataset's held-out split, in a sentence: "scored on <fullTest>". */
  readonly fullTest: string;
  /** What the literature predicts for local steps on non-IID shares of this data, in its own terms (lab/local-steps-report.ts). */
  readonly nonIidLiterature: readonly string[];
}

export interface LabWorkload<T extends string = string, M extends string = string> {
  readonly role: WorkloadRole;
  /** The task the model learns; its `example.shape` is what one example is. */
  readonly task: Task & { readonly id: T };
  /** The model's id in the task: the start config's `model`, and a report row's `net`. */
  readonly model: M;
  /** The model in the reports' sentences and headings ("trains the <name>"). */
  readonly name: string;
  /** The task's own title of the model. */
  readonly title: string;
  /** Floats of its weights, so of its gradient (a unit test checks them against the built model). */
  readonly parameters: number;
  /**
   * For a model whose first layer is dense on the example's features: that layer's units
   * (its weights come first: a features × units kernel, then units biases). The leak demo
   * (lab/leak/) reads examples back from that layer's gradient.
   */
  readonly denseUnits?: number;
  readonly datasets: LabDatasets;
  /** The start-config fields that pick it. */
  readonly config: { readonly task: T; readonly model: M };
}

interface WorkloadSpec {
  name: string;
  parameters: number;
  denseUnits?: number;
  datasets: { full: string; small: string };
}

function labWorkload<const T extends string, const M extends string>(role: WorkloadRole, taskId: T, model: M, spec: WorkloadSpec): LabWorkload<T, M> {
  const task = findTask(taskId);
  if (!task) throw new Error(`lab workload ${role}: no task ${taskId}`);
  const info = task.models.find((m) => m.id === model);
  if (!info) throw new Error(`lab workload ${role}: the task ${taskId} has no model ${model}`);
  const dataset = (id: string): TaskDataset => {
    const found = task.datasets.find((d) => d.id === id);
    if (!found) throw new Error(`lab workload ${role}: the task ${taskId} has no dataset ${id}`);
    return found;
  };
  return {
    role,
    task: task as Task & { readonly id: T },
    model,
    name: spec.name,
    title: info.title,
    parameters: spec.parameters,
    ...(spec.denseUnits !== undefined ? { denseUnits: spec.denseUnits } : {}),
    datasets: { full: dataset(spec.datasets.full), small: dataset(spec.datasets.small) },
    config: { task: taskId, model },
  };
}

const TASK = 'mnist';
const DATASETS = { full: 'mnist-60k', small: 'mnist-10k' };

export const LAB_WORKLOADS = {
  /** The MLP, 784-128-10. */
  dense: labWorkload('dense', TASK, 'mlp', { name: 'MLP', parameters: 101_770, denseUnits: 128, datasets: DATASETS }),
  /** The small CNN: conv 5×5×8, pool, conv 5×5×16, pool, dense. */
  conv: labWorkload('conv', TASK, 'cnn', { name: 'CNN', parameters: 5_994, datasets: DATASETS }),
};

/** A lab workload's model id: a report row's `net`. */
export type LabModel = (typeof LAB_WORKLOADS)[WorkloadRole]['model'];
/** The task both workloads learn. */
export type LabTaskId = (typeof LAB_WORKLOADS)[WorkloadRole]['task']['id'];

/** Every workload, dense first: the order the lab's tables list them in. */
export const LAB_WORKLOAD_LIST: readonly LabWorkload<LabTaskId, LabModel>[] = [LAB_WORKLOADS.dense, LAB_WORKLOADS.conv];

/** The task both workloads learn, and the datasets the lab trains it on. */
export const LAB_TASK: Task & { readonly id: LabTaskId } = LAB_WORKLOADS.dense.task;
export const LAB_DATASETS: LabDatasets = LAB_WORKLOADS.dense.datasets;

export const LAB_DATA_WORDS: LabDataWords = {
  name: 'MNIST',
  fullTest: 'the official MNIST test set',
  nonIidLiterature: [
    'McMahan et al. 2017 (FedAvg; MNIST 2NN, the target 97 %, 100 clients, the "pathological" split of two digit classes per client): FedAvg still needs far fewer rounds than FedSGD (every step) on non-IID data, but its lead shrinks from one to two orders of magnitude (IID) to a few times (non-IID), because FedAvg needs several times more rounds on the non-IID split than on the IID one while FedSGD needs only a little more (Table 2).',
    'Zhao et al. 2018 ("Federated Learning with Non-IID Data"): FedAvg\'s accuracy falls with how skewed each client\'s classes are, by up to 55 % (keyword spotting) with one class per client, MNIST the least affected of their datasets; the loss follows the weight divergence, which grows with the earth mover\'s distance between a client\'s class distribution and the population\'s, and with more local steps between averages.',
  ],
};

/** The workload whose model is `model`; throws for a model the lab does not measure. */
export function labWorkloadOf(model: string): LabWorkload<LabTaskId, LabModel> {
  const found = LAB_WORKLOAD_LIST.find((w) => w.model === model);
  if (!found) throw new Error(`the lab measures no model ${model}; it measures ${LAB_WORKLOAD_LIST.map((w) => w.model).join(', ')}`);
  return found;
}
