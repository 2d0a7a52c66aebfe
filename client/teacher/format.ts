/** Number and time formatting shared by the dashboard's panels. */

export const dash = '–';

export function fixed(v: number | null | undefined, digits: number): string {
  return v === null || v === undefined || !Number.isFinite(v) ? dash : v.toFixed(digits);
}

export function percent(share: number | null | undefined, digits = 1): string {
  return share === null || share === undefined || !Number.isFinite(share) ? dash : `${(share * 100).toFixed(digits)} %`;
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(0)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

/** "45 s", "3 min 05 s", "1 h 02 min". */
export function duration(ms: number): string {
  const total = Math.max(0, Math.round(ms / 1000));
  if (total < 60) return `${total} s`;
  const min = Math.floor(total / 60);
  if (min < 60) return `${min} min ${String(total % 60).padStart(2, '0')} s`;
  return `${Math.floor(min / 60)} h ${String(min % 60).padStart(2, '0')} min`;
}

export function clockTime(at: number | string): string {
  return new Date(at).toLocaleTimeString();
}
