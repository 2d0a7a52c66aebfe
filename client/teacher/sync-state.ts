/**
 * How the class sums its work, on the run card: the mode and the round, the bytes the ring
 * sent in its last all-reduce (a round's, in local-steps mode) and per example trained, and
 * the advice the measurements give (shared/training/sync-advice.ts): which mode would train
 * faster on this network, in one sentence. Advice only: the teacher chooses in the form.
 */
import type { RoomStatus } from '../../shared/protocol';
import { adviseSync } from '../../shared/training/sync-advice';
import { bytes, fixed } from './format';

export function renderSync(state: HTMLElement, advice: HTMLElement, s: RoomStatus): void {
  const running = s.config !== null && (s.state === 'training' || s.state === 'paused');
  state.hidden = !running;
  advice.hidden = true;
  if (!running) return;
  const config = s.config!;
  const local = config.sync === 'local-steps';
  state.dataset.sync = config.sync;
  state.dataset.round = String(s.round);
  const traffic =
    s.bytesSentPerRound === null
      ? ''
      : ` The ring sent ${bytes(s.bytesSentPerRound)} in its last ${local ? 'round' : 'step'}` +
        (s.bytesSentPerExample === null ? '.' : `, ${fixed(s.bytesSentPerExample / 1000, 1)} kB per example trained.`);
  state.textContent =
    (local
      ? `Local steps: each device trains ${config.localSteps} steps alone, then the class averages the change in weights (${config.outerOptimizer === 'nesterov' ? 'Nesterov' : 'momentum'} at ${config.outerLearningRate}, momentum ${config.outerMomentum}, ${config.wire}). Round ${s.round}.`
      : `The class averages its gradients every step (${config.wire}).`) + traffic;
  const chief = s.members[0];
  const timing = chief?.collective?.timing;
  if (!timing || s.state !== 'training') return;
  const steps = local ? Math.max(1, Math.round(s.step / Math.max(1, s.round))) : 1;
  const a = adviseSync(config, timing, steps);
  if (!a) return;
  advice.hidden = false;
  advice.dataset.suggest = a.suggest;
  advice.textContent = a.sentence;
}
