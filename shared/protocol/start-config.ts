/**
 * A run's recipe (POST /api/rooms/:room/start, the teacher's form, train:start): the
 * defaults a teacher gets without touching the form, the schema that validates every field
 * at the edge, and the defaults that follow from other fields (the wire, masking).
 */
import { z } from 'zod';
import { classesSchema, outputsSchema, sameClasses, workloadIdSchema } from './messages';
import { ALLREDUCE_CHOICES, DATA_KINDS, type OwnDataKind, OPTIMIZER_KINDS, WIRE_FORMATS, SYNC_MODES, OUTER_OPTIMIZERS, LOCAL_CORRECTIONS, MIN_LOCAL_STEPS, MAX_LOCAL_STEPS, SUM_WORD_BITS, type SumWordBits, type DataKind, type OptimizerKind, type SyncMode, type WireFormat } from './vocabulary';
/**
 * The recipe a teacher gets without touching the form (docs/recipe.md), where the task
 * names none of its own (shared/tasks/task.ts TaskRecipe): Adam at 0.003 after a 50-step
 * warm-up, 32 examples per worker. The task, its model and dataset come from the task
 * registry (shared/tasks/registry.ts), never from here: the protocol names no workload.
 */
export const RECIPE_DEFAULTS = {
  optimizer: 'adam',
  learningRate: 0.003,
  warmupSteps: 50,
  scaleLearningRate: false,
  referenceBatch: 32,
  // On: the lab's mixed class trains 3.4× faster with it, and four equal laptops stay
  // near equal shares (the 15% hysteresis; docs/lab.md).
  balanceShares: true,
  batchSizePerWorker: 32,
  epochs: 2,
  seed: 1234,
  saveEverySteps: 50,
  maxToKeep: 3,
  resumeFrom: 'latest',
  wire: 'fp32',
  allreduce: 'auto',
  data: 'dataset',
  // What secureByDefault gives the default data, the server's dataset: no secret to keep.
  secureAggregation: false,
  sync: 'every-step',
  // DiLoCo's outer step (Douillard et al. 2023): Nesterov at 0.7 with momentum 0.9. H = 10:
  // on data split by class H = 20 ended near 92 %, H = 10 near 95 % (bench/local-steps-candidates.md).
  localSteps: 10,
  outerOptimizer: 'nesterov',
  outerLearningRate: 0.7,
  outerMomentum: 0.9,
  // Each device's local steps: plain SGD (docs/local-steps.md, "The inner optimizer"). Adam
  // restarted every round takes sign-sized steps on every weight; on data split by class
  // they push the classes a device lacks away, and the class ended at 77 % where every step
  // reaches 96.6 %.
  localOptimizer: 'sgd',
  localLearningRate: 0.3,
  localCorrection: 'none',
  // Sums travel whole: PowerSGD is an option (docs/local-steps.md, "Compressed sums").
  powerSgdRank: 0,
  sumWordBits: 0,
} as const;

/** The highest PowerSGD rank a run may ask for: beyond it the factors of the models here are no smaller than the matrices. */
export const MAX_POWER_SGD_RANK = 64;
/**
 * The most steps a run may take: the largest maxSteps a teacher may set, and the server's
 * bound on a reported step where it cannot compute the run's plan (signaling-server/rooms/progress-bounds.ts).
 */
export const MAX_RUN_STEPS = 10_000_000;

/** The wire a local-steps run takes when the teacher names none: DiLoCo's outer gradients survive fp16, and a round's one all-reduce then moves half the bytes. */
export const LOCAL_STEPS_DEFAULT_WIRE = 'fp16';

/** The most examples one worker's share of a step may hold. */
const MAX_BATCH_PER_WORKER = 1024;

/**
 * What the start config's check needs of a task (shared/tasks/task.ts catalogEntryOf):
 * its ids and defaults, no code. The registry hands the protocol a catalog of them, so the
 * protocol checks a config against the tasks without importing one.
 */
export interface TaskCatalogEntry {
  id: string;
  models: readonly string[];
  datasets: readonly string[];
  /** The model's outputs in order when the run names no classes of its own. */
  outputs: readonly string[];
  /** What the class may collect of its own for it: examples of classes it names, text in the task's symbols, or nothing (null). */
  ownData: OwnDataKind | null;
  recipe: { optimizer?: OptimizerKind; learningRate?: number; warmupSteps?: number; batchSizePerWorker?: number; epochs?: number; localOptimizer?: OptimizerKind; localLearningRate?: number };
}
export interface TaskCatalog {
  readonly defaultTask: string;
  readonly ids: readonly string[];
  entry(id: string): TaskCatalogEntry | undefined;
}

/** The task, model and dataset ids of a program's run (`program`): the workload is the program's, not the registry's. */
export const PROGRAM_WORKLOAD = 'program';

/**
 * A program's run (the library's fitDataset, docs/library.md): each member trains its own
 * copy of the program's model on its own copy of the dataset, and the server learns only
 * their fingerprint and sizes. Every member checks its model and dataset against these.
 */
export const programRunSchema = z.strictObject({
  /** Hex digest of the model's structure, loss and optimizer and the dataset's sizes (shared/library/fit-dataset.ts programFingerprint). */
  fingerprint: z.string().regex(/^[0-9a-f]{32}$/),
  /** Elements of the training dataset in one epoch, and of the validation dataset (0: none). */
  trainCount: z.number().int().min(1).max(1_000_000_000),
  validationCount: z.number().int().min(0).max(1_000_000_000),
  /** The global batch: examples one step trains over the whole ring, whatever its size. */
  batchSize: z.number().int().min(1).max(65_536),
  /** The model's outputs' names, in output order. */
  outputs: outputsSchema,
});
export type ProgramRun = z.output<typeof programRunSchema>;

/**
 * The start config's fields as sent: the task and the fields whose default the task gives
 * (model, dataset, classes and its recipe) may be left out; `startConfigSchemaFor` fills
 * them in from the task and checks them against it.
 */
export const startConfigFieldsSchema = z.strictObject({
  /** The workload (shared/tasks/): what one example is, its models, datasets and pages. */
  task: workloadIdSchema.optional(),
  /** A program's own model and dataset instead of a task's (docs/library.md); task, model, dataset and classes then come from it. */
  program: programRunSchema.optional(),
  /** One of the task's models; default: its first. */
  model: workloadIdSchema.optional(),
  optimizer: z.enum(OPTIMIZER_KINDS).optional(),
  learningRate: z.number().positive().max(10).optional(),
  /**
   * The learning rate climbs linearly from learningRate/warmupSteps to learningRate over
   * the first warmupSteps steps (Goyal et al. 2017), so a fresh model's first large
   * gradients do not throw it off; 0 starts at full rate.
   */
  warmupSteps: z.number().int().min(0).max(1_000_000).optional(),
  /**
   * Linear scaling (Goyal et al. 2017): the rate is learningRate × globalBatch / referenceBatch,
   * so a class that grows takes larger steps on its larger batches; after a join or a leave
   * the rate moves to its new value over 20 steps (shared/training/lr-schedule.ts).
   */
  scaleLearningRate: z.boolean().default(RECIPE_DEFAULTS.scaleLearningRate),
  /** The global batch at which learningRate applies when scaleLearningRate is on. */
  referenceBatch: z.number().int().min(1).max(65_536).default(RECIPE_DEFAULTS.referenceBatch),
  batchSizePerWorker: z.number().int().min(1).max(MAX_BATCH_PER_WORKER).optional(),
  /**
   * Each worker's share of the global batch (still batchSizePerWorker × N) follows its
   * measured speed, re-balanced every 5 steps with hysteresis (shared/training/share-balancer.ts),
   * so a slow device takes fewer examples instead of holding the class back.
   */
  balanceShares: z.boolean().default(RECIPE_DEFAULTS.balanceShares),
  epochs: z.number().int().min(1).max(1000).optional(),
  /** Optional cap on global steps, for short lessons, demos and tests. */
  maxSteps: z.number().int().min(1).max(MAX_RUN_STEPS).optional(),
  /** Seeds weight initialisation and every epoch's data permutation. */
  seed: z.number().int().min(0).max(2 ** 31 - 1).default(RECIPE_DEFAULTS.seed),
  /** The chief checkpoints every this many steps, at every epoch end and when the run ends. */
  saveEverySteps: z.number().int().min(1).max(1_000_000).default(RECIPE_DEFAULTS.saveEverySteps),
  /** Checkpoints kept on the server and in the chief's IndexedDB; older ones are deleted. */
  maxToKeep: z.number().int().min(1).max(100).default(RECIPE_DEFAULTS.maxToKeep),
  /** 'latest' resumes from the newest checkpoint of the same model, 'none' starts fresh, or a checkpoint id. */
  resumeFrom: z
    .union([z.literal('latest'), z.literal('none'), z.string().regex(/^ckpt-[0-9]{10}-[a-z0-9]{6}$/)])
    .default(RECIPE_DEFAULTS.resumeFrom),
  /**
   * How the step's gradients travel around the ring. 'fp16' halves the bytes; every replica
   * still ends bit-identical, but each summed gradient is off by at most
   * N·(2^-10·Σ|g| + 2^-24) from the float32 sum (see shared/ring-allreduce.ts), and a sum
   * beyond ±65504 fails the step. The state hand-over and evaluations always use fp32.
   */
  wire: z.enum(WIRE_FORMATS).optional(),
  /**
   * The gradient all-reduce's algorithm. 'auto' takes, each step, whichever of the ring and
   * halving-doubling the measured α (per-hop latency) and β (link bandwidth) predict faster
   * for this buffer and N, as NCCL chooses between ring and tree (shared/collective-choice.ts).
   */
  allreduce: z.enum(ALLREDUCE_CHOICES).default(RECIPE_DEFAULTS.allreduce),
  /** One of the task's datasets, which every worker streams its share of from the server's data service; default: its first. */
  dataset: workloadIdSchema.optional(),
  /** Whose examples: the server's dataset, or the class's own (each student's stay on their device). */
  data: z.enum(DATA_KINDS).default(RECIPE_DEFAULTS.data),
  /**
   * The model's outputs in output order; part of every checkpoint's config. Default: the
   * task's (its classes, or its vocabulary); the class's own data may name its own classes.
   */
  classes: outputsSchema.optional(),
  /**
   * Secure aggregation (shared/secagg/, docs/privacy.md): each device's gradients leave it
   * only masked, so no classmate, hub or server sees one student's gradient; only the
   * class's sum is public. Default: on for the class's own data ('own', 'dataset+own'), off
   * for the server's dataset, which is no secret. A ring of two waits for a third (the sum
   * would tell each the other's gradient; one alone sends nothing), and it needs the fp32
   * wire (masked words do not survive fp16).
   */
  secureAggregation: z.boolean().optional(),
  /**
   * 'every-step' all-reduces every step's gradients; 'local-steps' lets each worker train
   * `localSteps` steps alone on its share, then averages the change in weights once per
   * round, weighted by the examples each trained, through the outer optimizer
   * (docs/local-steps.md): for slow links and big classes.
   */
  sync: z.enum(SYNC_MODES).default(RECIPE_DEFAULTS.sync),
  localSteps: z.number().int().min(MIN_LOCAL_STEPS).max(MAX_LOCAL_STEPS).default(RECIPE_DEFAULTS.localSteps),
  outerOptimizer: z.enum(OUTER_OPTIMIZERS).default(RECIPE_DEFAULTS.outerOptimizer),
  outerLearningRate: z.number().positive().max(10).default(RECIPE_DEFAULTS.outerLearningRate),
  outerMomentum: z.number().min(0).max(0.999).default(RECIPE_DEFAULTS.outerMomentum),
  /**
   * The inner optimizer of local steps and its rate (before the warm-up and any scaling):
   * what each device trains its round alone with. Default: the task's (plain SGD at 0.3 for
   * the digits); every-step sync uses `optimizer` and `learningRate` instead.
   */
  localOptimizer: z.enum(OPTIMIZER_KINDS).optional(),
  localLearningRate: z.number().positive().max(10).optional(),
  /** 'scaffold' corrects each device's local steps by its drift from the class's last round (shared/training/drift-correction.ts); measured, not the default. */
  localCorrection: z.enum(LOCAL_CORRECTIONS).default(RECIPE_DEFAULTS.localCorrection),
  /**
   * 0: the gradients (or a round's change in weights) travel whole. r > 0: PowerSGD (Vogels
   * et al. 2019, shared/collectives/power-sgd.ts): each weight matrix travels as rank-r
   * factors in two sums, with error feedback, so nothing is lost, only delayed; vectors
   * and the tail travel whole. Works with every sync mode, wire and secure aggregation.
   */
  powerSgdRank: z.number().int().min(0).max(MAX_POWER_SGD_RANK).default(RECIPE_DEFAULTS.powerSgdRank),
  /**
   * 0: the gradients travel in the wire's floats. 8 or 16: as integers in words of that many
   * bits on a grid the class agrees per block, with error feedback
   * (shared/collectives/quantized-sum.ts): a quarter or a half of fp32's bytes, and under
   * secure aggregation masked words of that width instead of 32 bits. Composes with
   * PowerSGD (its factors travel as words) and every sync mode.
   */
  sumWordBits: z
    .number()
    .refine((b): b is SumWordBits => (SUM_WORD_BITS as readonly number[]).includes(b), { message: `sumWordBits is one of ${SUM_WORD_BITS.join(', ')}` })
    .default(RECIPE_DEFAULTS.sumWordBits),
});
export type StartConfigFields = z.output<typeof startConfigFieldsSchema>;

/** Fills in what the task gives and checks the config against it: an unknown task, model or dataset is an issue naming the field. */
function resolveAgainst(catalog: TaskCatalog, c: StartConfigFields, ctx: z.RefinementCtx) {
  if (c.program) return resolveProgram(c, c.program, ctx);
  const taskId = c.task ?? catalog.defaultTask;
  const task = catalog.entry(taskId);
  const fail = (path: string, message: string) => {
    ctx.addIssue({ code: 'custom', path: [path], message });
    return z.NEVER;
  };
  if (!task) return fail('task', `no task ${taskId}; there are ${catalog.ids.join(', ')}`);
  const model = c.model ?? task.models[0]!;
  if (!task.models.includes(model)) return fail('model', `the task ${task.id} has no model ${model}; it has ${task.models.join(', ')}`);
  const dataset = c.dataset ?? task.datasets[0]!;
  if (!task.datasets.includes(dataset)) return fail('dataset', `the task ${task.id} has no dataset ${dataset}; it has ${task.datasets.join(', ')}`);
  if (c.data !== 'dataset' && !task.ownData) return fail('data', `the task ${task.id} trains on its dataset only: the class cannot collect examples of its own for it`);
  let classes = c.classes ?? task.outputs;
  if (c.data !== 'own' && !sameClasses(classes, task.outputs)) {
    return fail('classes', `the task ${task.id}'s dataset has the outputs ${task.outputs.slice(0, 12).join(', ')}${task.outputs.length > 12 ? ', …' : ''}: name other classes with data 'own'`);
  }
  // Classes of the class's own: a lesson's (2 to 20 of them), never a text task's, which learns its own symbols.
  if (c.data === 'own' && c.classes && !sameClasses(c.classes, task.outputs)) {
    if (task.ownData === 'text') return fail('classes', `the task ${task.id} learns its own symbols: the class adds text of its own (${task.id}), not classes`);
    const custom = classesSchema.safeParse(c.classes);
    if (!custom.success) return fail('classes', custom.error.issues[0]?.message ?? 'not a list of classes');
    classes = custom.data;
  }
  const r = task.recipe;
  const secureAggregation = c.secureAggregation ?? secureByDefault(c.data);
  return {
    ...c,
    task: task.id,
    model,
    dataset,
    classes: [...classes],
    optimizer: c.optimizer ?? r.optimizer ?? RECIPE_DEFAULTS.optimizer,
    learningRate: c.learningRate ?? r.learningRate ?? RECIPE_DEFAULTS.learningRate,
    warmupSteps: c.warmupSteps ?? r.warmupSteps ?? RECIPE_DEFAULTS.warmupSteps,
    batchSizePerWorker: c.batchSizePerWorker ?? r.batchSizePerWorker ?? RECIPE_DEFAULTS.batchSizePerWorker,
    epochs: c.epochs ?? r.epochs ?? RECIPE_DEFAULTS.epochs,
    localOptimizer: c.localOptimizer ?? r.localOptimizer ?? RECIPE_DEFAULTS.localOptimizer,
    localLearningRate: c.localLearningRate ?? r.localLearningRate ?? RECIPE_DEFAULTS.localLearningRate,
    secureAggregation,
    wire: c.wire ?? defaultWire(c.sync, secureAggregation),
  };
}

/** A program's run: its workload is the program's; a program's optimizer defines its own rate, so there is no warm-up unless asked. */
function resolveProgram(c: StartConfigFields, program: ProgramRun, ctx: z.RefinementCtx) {
  // A stored config (a checkpoint's, room.json) names them as this gave them; anything else is a mistake.
  const given = { task: c.task, model: c.model, dataset: c.dataset };
  for (const [field, value] of Object.entries(given)) {
    if (value !== undefined && value !== PROGRAM_WORKLOAD) {
      ctx.addIssue({ code: 'custom', path: [field], message: `a program's run takes its ${field} from the program` });
      return z.NEVER;
    }
  }
  if (c.classes !== undefined && !sameClasses(c.classes, program.outputs)) {
    ctx.addIssue({ code: 'custom', path: ['classes'], message: "a program's run takes its classes from the program's outputs" });
    return z.NEVER;
  }
  if (c.data !== 'dataset') {
    ctx.addIssue({ code: 'custom', path: ['data'], message: "a program's run trains on the program's dataset: data 'dataset'" });
    return z.NEVER;
  }
  const secureAggregation = c.secureAggregation ?? false;
  const optimizer = c.optimizer ?? 'sgd';
  const learningRate = c.learningRate ?? RECIPE_DEFAULTS.learningRate;
  return {
    ...c,
    task: PROGRAM_WORKLOAD,
    model: PROGRAM_WORKLOAD,
    dataset: PROGRAM_WORKLOAD,
    classes: [...program.outputs],
    optimizer,
    learningRate,
    warmupSteps: c.warmupSteps ?? 0,
    batchSizePerWorker: c.batchSizePerWorker ?? Math.min(program.batchSize, MAX_BATCH_PER_WORKER),
    epochs: c.epochs ?? 1,
    // A program's model trains its rounds with its own optimizer too.
    localOptimizer: c.localOptimizer ?? optimizer,
    localLearningRate: c.localLearningRate ?? learningRate,
    secureAggregation,
    wire: c.wire ?? defaultWire(c.sync, secureAggregation),
  };
}

/**
 * The start config's schema over a catalog of tasks (the registry's, shared/tasks/
 * start-config.ts): every field checked at the edge, the task's defaults filled in, and
 * the defaults that follow from other fields (the wire, masking).
 */
export function startConfigSchemaFor(catalog: TaskCatalog) {
  return startConfigFieldsSchema
    .transform((c, ctx) => resolveAgainst(catalog, c, ctx))
    .refine((c) => !(c.secureAggregation && c.wire === 'fp16'), {
      path: ['wire'],
      message: "secure aggregation masks 32-bit words, which the fp16 wire cannot carry: choose wire 'fp32', or turn secureAggregation off",
    });
}
export type StartConfig = z.output<ReturnType<typeof startConfigSchemaFor>>;

/**
 * The wire when the teacher names none: fp32 for every step's gradients; fp16 for a round's
 * change in weights, unless the run is secure (masked words need 32 bits).
 */
export const defaultWire = (sync: SyncMode, secure: boolean): WireFormat =>
  sync === 'local-steps' && !secure ? LOCAL_STEPS_DEFAULT_WIRE : RECIPE_DEFAULTS.wire;

/**
 * The optimizer and rate a replica's own updates use: every step's, or in local-steps mode
 * the inner optimizer's (the outer step is the outer optimizer's, shared/training/outer-optimizer.ts).
 */
export function replicaRecipe<C extends Pick<StartConfig, 'sync' | 'optimizer' | 'learningRate' | 'localOptimizer' | 'localLearningRate'>>(c: C): C {
  return c.sync === 'local-steps' ? { ...c, optimizer: c.localOptimizer, learningRate: c.localLearningRate } : c;
}

/** Whether a run on `data` masks its gradients when the teacher does not say: the class's own examples are private, the server's dataset is not. */
export const secureByDefault = (data: DataKind): boolean => data !== 'dataset';
