/**
 * What the harness and its checkpoint scorer (lab/checkpoint-eval.ts) say to each other
 * over the scorer's stdin and stdout: one JSON request a line in, one `EVAL {…}` line out
 * per request, in order.
 */

/** Every this many-th example of the full test set makes the screening subset (1,000 examples). */
export const SCREEN_STRIDE = 10;
export const REPLY_PREFIX = 'EVAL ';
/** Printed once the test set is in memory. */
export const READY_LINE = 'READY';

export type ScoreSplit = 'screen' | 'full';

export interface ScoreRequest {
  /** A folder holding the checkpoint's model.json and model.weights.bin. */
  dir: string;
  split: ScoreSplit;
}

export type ScoreReply = { accuracy: number; correct: number; examples: number; ms: number; cpuMs: number } | { error: string };
