/**
 * The local-steps lab's targets (the time and by-class ones: local-steps-report.ts), and its
 * bytes target (issue 40): the default rounds with their sums
 * compressed (PowerSGD factors in narrow words, lab/local-steps-rows.ts COMPRESSED_VARIANTS)
 * against the same rounds in fp16, on school-uplink at N = 4 and 8: bytes on the devices'
 * interfaces per example trained, measured in each one's window, and the default run's
 * final accuracy, from the in-process runs. Its detail also says whether compressing every
 * step's gradients pays: every step compressed against every step whole and the default
 * rounds, to the threshold, on every class measured.
 */
import { RECIPE_DEFAULTS } from '../shared/protocol';
import { LOCAL_STEPS_TARGET_IDS, type Target } from './report-types';
import { isCompressed, isEveryStep } from './local-steps-protocol';
import { SCHOOL_NS, minutes, pct, timeTargets, type ComposedRow, type LocalStepsSummary, type NonIidLine } from './local-steps-report';

const TARGET_BYTES = LOCAL_STEPS_TARGET_IDS[3];
/** Compressed rounds send at most this share of the bytes of the same rounds in fp16. */
export const BYTES_GOAL = 0.25;
/** …and end the default run no more than this many points below them. */
export const BYTES_FINAL_POINTS = 0.5;
/** A composed time, or that the run never got there. */
const timeTo = (ms: number | null | undefined): string => (ms == null ? 'not reached' : minutes(ms));

interface BytesPair {
  n: number;
  whole: ComposedRow | null;
  compressed: ComposedRow | null;
  ratio: number | null;
  finalDiffPoints: number | null;
}

function pairAt(s: LocalStepsSummary, n: number): BytesPair {
  const h = `H${RECIPE_DEFAULTS.localSteps}`;
  const rows = s.rows.filter((r) => r.network === 'school-uplink' && r.n === n);
  const whole = rows.find((r) => r.variant === h) ?? null;
  const compressed = rows.find((r) => isCompressed(r.variant) && r.variant.startsWith(`${h}-`)) ?? null;
  const ratio = whole?.bytesPerExample && compressed?.bytesPerExample != null ? compressed.bytesPerExample / whole.bytesPerExample : null;
  const finalDiffPoints = whole?.finalAccuracy != null && compressed?.finalAccuracy != null ? (compressed.finalAccuracy - whole.finalAccuracy) * 100 : null;
  return { n, whole, compressed, ratio, finalDiffPoints };
}

/** Every step compressed against every step whole and the default rounds, on one class: does compression pay every step? */
function everyStepLine(s: LocalStepsSummary, network: string, n: number): string | null {
  const rows = s.rows.filter((r) => r.network === network && r.n === n);
  const compressed = rows.find((r) => isEveryStep(r.variant) && isCompressed(r.variant));
  if (!compressed) return null;
  const whole = rows.find((r) => r.variant === 'every-step');
  const rounds = rows.find((r) => r.variant === `H${RECIPE_DEFAULTS.localSteps}`);
  return `${network} N = ${n}: every step compressed ${timeTo(compressed.timeMs)} to ${(s.threshold * 100).toFixed(0)} % (final ${pct(compressed.finalAccuracy)}), whole ${timeTo(whole?.timeMs)} (${pct(whole?.finalAccuracy)}), H${RECIPE_DEFAULTS.localSteps} rounds ${timeTo(rounds?.timeMs)}`;
}

export function bytesTarget(s: LocalStepsSummary): Target {
  const pairs = SCHOOL_NS.map((n) => pairAt(s, n));
  const ratios = pairs.map((p) => p.ratio);
  const value = ratios.every((r) => r !== null) ? Math.max(...(ratios as number[])) : null;
  const met = pairs.every((p) => p.ratio !== null && p.ratio <= BYTES_GOAL && p.finalDiffPoints !== null && p.finalDiffPoints >= -BYTES_FINAL_POINTS && !!p.whole?.counts && !!p.compressed?.counts);
  const pairText = (p: BytesPair): string =>
    p.compressed && p.whole
      ? `school-uplink N = ${p.n}: ${p.compressed.variant} ${p.compressed.bytesPerExample?.toFixed(0) ?? '–'} B/example against ${p.whole.variant}'s ${p.whole.bytesPerExample?.toFixed(0) ?? '–'} (${p.ratio?.toFixed(3) ?? '–'}), final ${pct(p.compressed.finalAccuracy)} against ${pct(p.whole.finalAccuracy)}${p.compressed.counts && p.whole.counts ? '' : ' (a part did not count)'}`
      : `school-uplink N = ${p.n}: ${p.compressed ? 'the rounds in fp16' : 'no compressed rounds'} not measured`;
  const everyStep = [...new Set(s.rows.map((r) => `${r.network}\u0000${r.n}`))].map((k) => k.split('\u0000')).map(([network, n]) => everyStepLine(s, network!, Number(n))).filter((x): x is string => x !== null);
  return {
    id: TARGET_BYTES,
    goal: `school-uplink, N = ${SCHOOL_NS.join(' and ')}: the default rounds with compressed sums send ≤ ${BYTES_GOAL} of the bytes per example of the same rounds in fp16 (on the devices' interfaces), and end the default run no more than ${BYTES_FINAL_POINTS} points below them (value: the larger share)`,
    value,
    met,
    detail: [...pairs.map(pairText), ...everyStep].join('; '),
  };
}

/** The four local-steps targets, in the shape of the lab's others ({id, goal, value, met, detail}). */
export function localStepsTargets(s: LocalStepsSummary, nonIidLines: NonIidLine[] = []): Target[] {
  return [...timeTargets(s, nonIidLines), bytesTarget(s)];
}

