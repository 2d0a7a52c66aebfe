/**
 * How much of the machine the lab may give its capped devices. The signaling server, its
 * hub and the harness run uncapped beside them; RESERVED_CORES is kept for them, so a class
 * whose caps fill the rest still has its server answering.
 */
import { DEVICE_CORES, type DeviceProfile } from './cpu-caps';

/** Left to the signaling server, its hub and the harness. */
export const RESERVED_CORES = 0.4;

export interface CpuBudget {
  cores: number;
  reservedCores: number;
  /** The devices' caps added up. */
  capsCores: number;
  /** caps + reserved ≤ cores. */
  fits: boolean;
}

/** Whether a class of `devices` fits a machine of `cores` with RESERVED_CORES (or `reserved`) kept back. */
export function cpuBudget(devices: DeviceProfile[], cores: number, reserved = RESERVED_CORES): CpuBudget {
  const capsCores = devices.reduce((s, d) => s + DEVICE_CORES[d], 0);
  return { cores, reservedCores: reserved, capsCores, fits: capsCores + reserved <= cores + 1e-9 };
}
