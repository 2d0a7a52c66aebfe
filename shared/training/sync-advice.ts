/**
 * Advice, not a silent switch: from the chief's last turn (how long its compute took, how
 * long the class's all-reduce took, which already holds the links' latency and bandwidth and
 * the class's size), whether the other way of summing would train faster, and one sentence
 * that says why. The teacher's page shows it; the teacher decides.
 *
 * A step costs c (compute, read-back, crossing, apply) and a (the all-reduce). Every step
 * syncs: c + a per step. Local steps sync once per round of H: c + a'/H, where a' is the
 * round's all-reduce (half of a when a local-steps round travels as fp16 and every step
 * as fp32, the defaults). The prediction counts time only: local steps usually need more
 * examples for the same accuracy (docs/local-steps.md), so small gains are not worth it.
 */
import { DEFAULT_START_CONFIG } from '../tasks/start-config';
import { type StartConfig, type StepTimingReport } from '../protocol';

/** Below this predicted speed-up, local steps are not worth their cost in accuracy per example. */
export const LOCAL_STEPS_WORTH = 1.5;

export interface SyncAdvice {
  /** The mode the measurements favour. */
  suggest: StartConfig['sync'];
  /** How much faster per step the suggested mode would train than the other (≥ 1), or the current one's lead. */
  speedup: number;
  /** The all-reduce's time over a step's compute, as measured. */
  commOverCompute: number;
  sentence: string;
}

/**
 * The advice for a run with `config`, from the chief's last turn `timing` of `steps` steps
 * (1 every step; a round's local steps). Null before the turn has a compute time.
 */
export function adviseSync(config: StartConfig, timing: StepTimingReport, steps: number): SyncAdvice | null {
  const compute = (timing.computeMs + timing.readbackMs + timing.crossMs + timing.applyMs) / Math.max(1, steps);
  if (!(compute > 0)) return null;
  const H = config.sync === 'local-steps' ? config.localSteps : DEFAULT_START_CONFIG.localSteps;
  // The wire each mode would take by default: a round in fp16 unless masked, every step in fp32.
  const halves = !config.secureAggregation;
  const everyStepComm = config.sync === 'every-step' ? timing.commMs : config.wire === 'fp16' ? timing.commMs * 2 : timing.commMs;
  const roundComm = config.sync === 'local-steps' ? timing.commMs : halves ? timing.commMs / 2 : timing.commMs;
  const everyStep = compute + everyStepComm;
  const local = compute + roundComm / H;
  const speedup = everyStep / local;
  const ratio = everyStepComm / compute;
  const times = (x: number) => `${x < 10 ? x.toFixed(1) : Math.round(x)}×`;
  if (speedup >= LOCAL_STEPS_WORTH) {
    return {
      suggest: 'local-steps',
      speedup,
      commOverCompute: ratio,
      sentence:
        config.sync === 'local-steps'
          ? `Local steps pay on this network: a step's all-reduce takes ${times(ratio)} its compute, so syncing every step would train about ${times(speedup)} slower.`
          : `On this network a step's all-reduce takes ${times(ratio)} its compute: local steps (${H} per round) would train about ${times(speedup)} faster.`,
    };
  }
  return {
    suggest: 'every-step',
    speedup,
    commOverCompute: ratio,
    sentence:
      config.sync === 'local-steps'
        ? `On this network every-step sync would be about as fast (a step's all-reduce takes ${times(ratio)} its compute; local steps gain ${times(speedup)}) and learns more per example: choose every step.`
        : `Every step is the right choice here: a step's all-reduce takes ${times(ratio)} its compute, so local steps would gain only ${times(speedup)}.`,
  };
}
