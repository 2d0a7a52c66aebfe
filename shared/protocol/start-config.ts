/**
 * A run's recipe (POST /api/rooms/:room/start, the teacher's form, train:start): the
 * defaults a teacher gets without touching the form, the schema that validates every field
 * at the edge, and the defaults that follow from other fields (the wire, masking).
 */
import { z } from 'zod';
import { classesSchema, areDigitClasses } from './messages';
import { ALLREDUCE_CHOICES, DATASET_KINDS, DATA_KINDS, DIGIT_CLASSES, MODEL_KINDS, OPTIMIZER_KINDS, WIRE_FORMATS, SYNC_MODES, OUTER_OPTIMIZERS, MIN_LOCAL_STEPS, MAX_LOCAL_STEPS, type DataKind, type SyncMode, type WireFormat } from './vocabulary';
/**
 * The recipe a teacher gets without touching the form (docs/recipe.md): Adam at 0.003 after
 * a 50-step warm-up, 32 examples per worker. The MLP visibly learns within a few dozen
 * steps; one epoch of the small CNN on the official MNIST scores above 98 %.
 */
export const DEFAULT_START_CONFIG = {
  model: 'mlp',
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
  dataset: 'mnist-60k',
  data: 'mnist',
  classes: DIGIT_CLASSES,
  // What secureByDefault gives the default data, the server's digits: no secret to keep.
  secureAggregation: false,
  sync: 'every-step',
  // DiLoCo's (Douillard et al. 2023): 20 local steps, Nesterov at 0.7 with momentum 0.9.
  localSteps: 20,
  outerOptimizer: 'nesterov',
  outerLearningRate: 0.7,
  outerMomentum: 0.9,
} as const;

/** The wire a local-steps run takes when the teacher names none: DiLoCo's outer gradients survive fp16, and a round's one all-reduce then moves half the bytes. */
export const LOCAL_STEPS_DEFAULT_WIRE = 'fp16';

export const startConfigSchema = z.strictObject({
  model: z.enum(MODEL_KINDS).default(DEFAULT_START_CONFIG.model),
  optimizer: z.enum(OPTIMIZER_KINDS).default(DEFAULT_START_CONFIG.optimizer),
  learningRate: z.number().positive().max(10).default(DEFAULT_START_CONFIG.learningRate),
  /**
   * The learning rate climbs linearly from learningRate/warmupSteps to learningRate over
   * the first warmupSteps steps (Goyal et al. 2017), so a fresh model's first large
   * gradients do not throw it off; 0 starts at full rate.
   */
  warmupSteps: z.number().int().min(0).max(1_000_000).default(DEFAULT_START_CONFIG.warmupSteps),
  /**
   * Linear scaling (Goyal et al. 2017): the rate is learningRate × globalBatch / referenceBatch,
   * so a class that grows takes larger steps on its larger batches; after a join or a leave
   * the rate moves to its new value over 20 steps (shared/training/lr-schedule.ts).
   */
  scaleLearningRate: z.boolean().default(DEFAULT_START_CONFIG.scaleLearningRate),
  /** The global batch at which learningRate applies when scaleLearningRate is on. */
  referenceBatch: z.number().int().min(1).max(65_536).default(DEFAULT_START_CONFIG.referenceBatch),
  batchSizePerWorker: z.number().int().min(1).max(1024).default(DEFAULT_START_CONFIG.batchSizePerWorker),
  /**
   * Each worker's share of the global batch (still batchSizePerWorker × N) follows its
   * measured speed, re-balanced every 5 steps with hysteresis (shared/training/share-balancer.ts),
   * so a slow device takes fewer examples instead of holding the class back.
   */
  balanceShares: z.boolean().default(DEFAULT_START_CONFIG.balanceShares),
  epochs: z.number().int().min(1).max(1000).default(DEFAULT_START_CONFIG.epochs),
  /** Optional cap on global steps, for short lessons, demos and tests. */
  maxSteps: z.number().int().min(1).max(10_000_000).optional(),
  /** Seeds weight initialisation and every epoch's data permutation. */
  seed: z.number().int().min(0).max(2 ** 31 - 1).default(DEFAULT_START_CONFIG.seed),
  /** The chief checkpoints every this many steps, at every epoch end and when the run ends. */
  saveEverySteps: z.number().int().min(1).max(1_000_000).default(DEFAULT_START_CONFIG.saveEverySteps),
  /** Checkpoints kept on the server and in the chief's IndexedDB; older ones are deleted. */
  maxToKeep: z.number().int().min(1).max(100).default(DEFAULT_START_CONFIG.maxToKeep),
  /** 'latest' resumes from the newest checkpoint of the same model, 'none' starts fresh, or a checkpoint id. */
  resumeFrom: z
    .union([z.literal('latest'), z.literal('none'), z.string().regex(/^ckpt-[0-9]{10}-[a-z0-9]{6}$/)])
    .default(DEFAULT_START_CONFIG.resumeFrom),
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
  allreduce: z.enum(ALLREDUCE_CHOICES).default(DEFAULT_START_CONFIG.allreduce),
  /** The digits the run trains and tests on; every worker streams its share from the server's data service. */
  dataset: z.enum(DATASET_KINDS).default(DEFAULT_START_CONFIG.dataset),
  /** Whose examples: the server's digits, or the class's own (each student's stay on their device). */
  data: z.enum(DATA_KINDS).default(DEFAULT_START_CONFIG.data),
  /**
   * The classes the model tells apart, in output order; part of every checkpoint's config.
   * A digits run ('mnist') has the digits 0–9; the class's own data may name any.
   */
  classes: classesSchema.default([...DEFAULT_START_CONFIG.classes]),
  /**
   * Secure aggregation (shared/secagg/, docs/privacy.md): each device's gradients leave it
   * only masked, so no classmate, hub or server sees one student's gradient; only the
   * class's sum is public. Default: on for the class's own data ('own', 'mnist+own'), off
   * for the server's digits, which are no secret. A ring of two waits for a third (the sum
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
  sync: z.enum(SYNC_MODES).default(DEFAULT_START_CONFIG.sync),
  localSteps: z.number().int().min(MIN_LOCAL_STEPS).max(MAX_LOCAL_STEPS).default(DEFAULT_START_CONFIG.localSteps),
  outerOptimizer: z.enum(OUTER_OPTIMIZERS).default(DEFAULT_START_CONFIG.outerOptimizer),
  outerLearningRate: z.number().positive().max(10).default(DEFAULT_START_CONFIG.outerLearningRate),
  outerMomentum: z.number().min(0).max(0.999).default(DEFAULT_START_CONFIG.outerMomentum),
})
  .refine((c) => c.data === 'own' || areDigitClasses(c.classes), { path: ['classes'], message: "the server's digits have the classes 0-9: name other classes with data 'own'" })
  .transform((c) => {
    const secureAggregation = c.secureAggregation ?? secureByDefault(c.data);
    return { ...c, secureAggregation, wire: c.wire ?? defaultWire(c.sync, secureAggregation) };
  })
  .refine((c) => !(c.secureAggregation && c.wire === 'fp16'), {
    path: ['wire'],
    message: "secure aggregation masks 32-bit words, which the fp16 wire cannot carry: choose wire 'fp32', or turn secureAggregation off",
  });
export type StartConfig = z.output<typeof startConfigSchema>;

/**
 * The wire when the teacher names none: fp32 for every step's gradients; fp16 for a round's
 * change in weights, unless the run is secure (masked words need 32 bits).
 */
export const defaultWire = (sync: SyncMode, secure: boolean): WireFormat =>
  sync === 'local-steps' && !secure ? LOCAL_STEPS_DEFAULT_WIRE : DEFAULT_START_CONFIG.wire;

/** Whether a run on `data` masks its gradients when the teacher does not say: the class's own drawings are private, the server's digits are not. */
export const secureByDefault = (data: DataKind): boolean => data !== 'mnist';
