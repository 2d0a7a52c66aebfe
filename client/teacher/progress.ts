/** Step and epoch progress, a bar, and the time left from the recent step rate. */
import type { MemberInfo, MetricPoint, RoomStatus, StartConfig } from '../../shared/protocol';
import { byId } from './dom';
import { bytes, clockTime, dash, duration, fixed, percent } from './format';
import { globalBatchSize, ranksThatTrain } from '../../shared/data/batch-plan';
import { PROGRAM_WORKLOAD } from '../../shared/protocol/start-config';

/** The step rate is measured over the reports of this last stretch of time. */
export const RATE_WINDOW_MS = 20_000;

export interface Rate {
  stepsPerSec: number;
  /** Time to `totalSteps` at that rate, or null when there is no rate or no end. */
  etaMs: number | null;
}

/** Steps per second over the last `RATE_WINDOW_MS` of reports (server `at` times), and the ETA. */
export function stepRate(history: readonly MetricPoint[], step: number, totalSteps: number | null): Rate | null {
  const last = history[history.length - 1];
  if (!last) return null;
  let first = last;
  for (let i = history.length - 2; i >= 0; i--) {
    const p = history[i]!;
    if (last.at - p.at > RATE_WINDOW_MS) break;
    first = p;
  }
  const dt = last.at - first.at;
  if (dt <= 0 || last.step <= first.step) return null;
  const stepsPerSec = ((last.step - first.step) * 1000) / dt;
  const etaMs = totalSteps === null ? null : (Math.max(0, totalSteps - step) / stepsPerSec) * 1000;
  return { stepsPerSec, etaMs };
}

export function renderProgress(s: RoomStatus, history: readonly MetricPoint[]): void {
  const total = s.totalSteps;
  const epochs = s.config?.epochs ?? null;
  byId('p-step').textContent = total ? `${s.step} / ${total}` : String(s.step);
  byId('p-epoch').textContent = epochs ? `${Math.min(s.epoch + 1, epochs)} / ${epochs}` : s.run > 0 ? String(s.epoch + 1) : dash;
  const bar = byId<HTMLProgressElement>('p-bar');
  if (total) {
    bar.max = total;
    bar.value = Math.min(s.step, total);
    bar.textContent = percent(s.step / total, 0);
  } else if (s.state === 'training') {
    bar.removeAttribute('value'); // indeterminate until the room knows its step count
  } else {
    bar.max = 1;
    bar.value = 0;
  }
  const rate = s.state === 'training' ? stepRate(history, s.step, total) : null;
  byId('p-rate').textContent = rate ? `${fixed(rate.stepsPerSec, rate.stepsPerSec < 10 ? 2 : 1)} steps/s` : dash;
  byId('p-eta').textContent = etaText(s, rate);
  byId('p-loss').textContent = fixed(s.metrics.loss, 4);
  // A program's model has a loss, not classes: no accuracy to show.
  const program = s.config?.task === PROGRAM_WORKLOAD;
  byId('p-train-acc').textContent = program ? dash : percent(s.metrics.trainAccuracy);
  byId('p-test-acc').textContent = program ? dash : percent(s.metrics.accuracy);
  byId('p-data').textContent = dataServedText(s);
  const refused = byId('data-refused');
  refused.textContent = dataRefusedText(s);
  refused.hidden = refused.textContent === '';
  byId('p-lr').textContent = learningRateText(s);
}

/**
 * The run's global batch as the workers size it (batch-plan.ts), from what the members
 * report: on the class's own data alone only a member holding examples of the run's
 * classes trains. The workers count the devices of the epoch's roster: a device that joined
 * mid-epoch counts here an epoch early, one whose examples are all held out counts only here.
 */
export function globalBatchOf(config: StartConfig, members: readonly MemberInfo[]): number {
  const holdingExamples = members.filter((m) => config.classes.some((c) => (m.ownExamples[c] ?? 0) > 0)).length;
  return globalBatchSize(config.batchSizePerWorker, ranksThatTrain({ ranks: members.length, holdingExamples, digits: config.data !== 'own' }));
}

/** The chief's rate of its last step, and why it is what it is (warm-up, scaling). */
export function learningRateText(s: RoomStatus): string {
  const rate = s.members[0]?.learningRate ?? 0;
  if (!s.config || rate <= 0) return dash;
  const c = s.config;
  const why = c.scaleLearningRate ? ` (scaled with a global batch of ${globalBatchOf(c, s.members)} against ${c.referenceBatch})` : s.step < c.warmupSteps ? ' (warming up)' : '';
  return `${rate.toPrecision(3)}${why}`;
}

/**
 * What the data service sent this run next to the training set's size, and per epoch: near
 * 1× means each example travelled once, to the worker that trained it; N× would mean every
 * tab downloaded everything. Only the training split counts (the held-out digits are read
 * for each epoch's score), and the per-epoch figure waits for a whole epoch trained: before,
 * the 8 steps each tab prefetches weigh on a few dozen steps and the figure overstates
 * (it read 4.42× at step 33 of an epoch that ended at 1.0×).
 */
export function dataServedText(s: RoomStatus): string {
  const { datasetBytes, bytesServed, trainBytesServed } = s.data;
  if (!s.config || datasetBytes === 0) return dash;
  const trainCount = datasetBytes / s.data.exampleBytes;
  const epochs = (s.step * globalBatchOf(s.config, s.members)) / trainCount;
  const perEpoch =
    epochs >= 1 ? ` · ≈ ${fixed(trainBytesServed / datasetBytes / epochs, 2)}× the set per epoch` : ' · the figure per epoch shows once an epoch is trained';
  const heldOut = bytesServed > trainBytesServed ? ` (+ ${bytes(bytesServed - trainBytesServed)} of held-out examples)` : '';
  return `${bytes(trainBytesServed)} of a ${bytes(datasetBytes)} training set${heldOut}${perEpoch}`;
}

/**
 * The students the data service turned away and have not been served since (an honest class
 * has none): who, why, and what happens next. Never silent: a tab refused the examples of
 * the class's current turn holds every other tab up.
 */
export function dataRefusedText(s: RoomStatus): string {
  const refused = s.data.refused;
  if (refused.length === 0 || s.state === 'idle' || s.state === 'done') return '';
  const who = refused.map((r) => `${r.reader} at ${clockTime(r.at)} (${r.error.message}; ${r.error.code})`).join('; ');
  const retry = Math.max(...refused.map((r) => r.retryAfterS));
  return (
    `Training waits for examples the data service refused: ${who}. ` +
    `${refused.length === 1 ? 'That tab asks' : 'Those tabs ask'} again every ${retry} s. ` +
    'If the class cannot go on, the server ends the run after a few minutes without progress (ERR_RUN_STALLED), and Start resumes it from the latest checkpoint.'
  );
}

function etaText(s: RoomStatus, rate: Rate | null): string {
  switch (s.state) {
    case 'idle':
      return dash;
    case 'paused':
      return 'paused';
    case 'done':
      return 'run ended';
    case 'training':
      return rate && rate.etaMs !== null ? duration(rate.etaMs) : 'measuring…';
  }
}
