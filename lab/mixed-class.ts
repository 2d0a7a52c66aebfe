/**
 * A mixed class in the lab (`npm run lab -- --section class, its mixed part`): three `laptop`s and one `phone` on
 * the wired lab, training the conv workload (shared/tasks/lab-workloads.ts), with and without `balanceShares`, against four laptops.
 *
 * The target `mixed-class-phone`: the mixed class reaches at least 85% of what its compute
 * allows, that is (its devices' summed speed ÷ four laptops' speed) × the all-laptop class's
 * examples/s. Speed is taken as the CPU cap, which is what a device profile is. Without
 * balancing the class runs at about the phone's pace.
 */
import { withLab } from './netlab';
import { DEVICE_CORES, type DeviceProfile } from './cpu-caps';
import type { ModelProfile } from './network-models';
import type { LabCapabilities } from './preconditions';
import { TRAINING_ROW_OPTIONS, trainingRow, type TrainingRow } from './training-rows';
import { LAB_WORKLOADS } from '../shared/tasks/lab-workloads';

const CLASS: DeviceProfile[] = ['laptop', 'laptop', 'laptop', 'phone'];
/** Share of the compute-allowed throughput the balanced mixed class must reach. */
export const MIXED_CLASS_GOAL = 0.85;
/** Enough steps before the window for the first re-balancings (every 5 steps) to settle. */
const BALANCED_WARMUP_STEPS = 15;

export interface MixedClassReport {
  rows: TrainingRow[];
  target: { id: 'mixed-class-phone'; goal: string; value: number; met: boolean; detail: string };
}

/** `mixed-class-phone` from the three rows: all laptops, mixed without and with balancing. */
export function mixedClassTarget(allLaptops: TrainingRow, unbalanced: TrainingRow, balanced: TrainingRow): MixedClassReport['target'] {
  const computeRatio = balanced.devices.reduce((s, d) => s + DEVICE_CORES[d], 0) / (balanced.n * DEVICE_CORES.laptop);
  const allowed = computeRatio * allLaptops.examplesPerSec;
  const value = balanced.examplesPerSec / allowed;
  return {
    id: 'mixed-class-phone',
    goal: `≥ ${MIXED_CLASS_GOAL} of (summed device speed ÷ four laptops) × the all-laptop examples/s`,
    value: Number(value.toFixed(3)),
    met: value >= MIXED_CLASS_GOAL && balanced.counts && allLaptops.counts,
    detail: `balanced ${balanced.examplesPerSec.toFixed(1)} examples/s (shares ${balanced.batchShares.join('/')}), unbalanced ${unbalanced.examplesPerSec.toFixed(1)} (${(unbalanced.examplesPerSec / allowed).toFixed(2)} of allowed), allowed ${allowed.toFixed(1)} = ${computeRatio.toFixed(4)} × ${allLaptops.examplesPerSec.toFixed(1)} (four laptops)`,
  };
}

export async function mixedClassRows(profile: ModelProfile, capabilities?: LabCapabilities): Promise<MixedClassReport> {
  const net = LAB_WORKLOADS.conv.model;
  const options = TRAINING_ROW_OPTIONS[net];
  // A lab per row: a lab's CPU caps stay booked until it is removed.
  const row = (rowOptions: Parameters<typeof trainingRow>[3]) => withLab(profile, CLASS.length, (lab) => trainingRow(lab, net, 'laptop', rowOptions), capabilities);
  const allLaptops = await row(options);
  const unbalanced = await row({ ...options, devices: CLASS, config: { balanceShares: false } });
  const balanced = await row({ ...options, devices: CLASS, config: { balanceShares: true }, warmupSteps: BALANCED_WARMUP_STEPS });
  return { rows: [allLaptops, unbalanced, balanced], target: mixedClassTarget(allLaptops, unbalanced, balanced) };
}
