/**
 * The direct run against the composition (lab/local-steps-direct.ts runs it): each of the direct
 * run's checkpoints, reached on the lab, set against the time the composition gives the
 * same step (the seconds a turn measured × the turns), so the report shows the model
 * checked, not assumed.
 */
import { composeMs, type LocalStepsReport, type LocalStepsSummary } from './local-steps-report';

/** Each of the direct run's checkpoints' capture time over the composed time of its step; empty without a direct run or its model. */
export function directRatios(r: Pick<LocalStepsReport, 'direct'>, s: LocalStepsSummary): number[] {
  const d = r.direct;
  const m = d ? s.rows.find((x) => x.network === d.network && x.n === d.n && x.variant === d.variant)?.model ?? null : null;
  if (!d || !m) return [];
  return d.points.flatMap((p) => {
    const rounds = roundsAt(d.history, p.step);
    const composed = rounds === null ? 0 : composeMs(m, p.step, rounds);
    return composed > 0 ? [p.ms / composed] : [];
  });
}

/** The rounds the class had trained once it stood at `step`, from the chief's reports; null where no report was at that step. */
export function roundsAt(history: Array<{ at: number; step: number }>, step: number): number | null {
  const points = history.filter((p) => p.step <= step);
  return points.length > 0 && points.at(-1)!.step === step ? points.length : null;
}
