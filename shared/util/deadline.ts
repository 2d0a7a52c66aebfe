/**
 * A deadline for one wait: the work gets an AbortSignal that fires after `ms` on `clock`,
 * and the wait ends then even if the work ignores the signal (a fetch that never answers,
 * a handler that swallows the abort). The error is the caller's, so it can carry a code.
 */
import { systemClock, type Clock } from './clock';

/**
 * Runs `work(signal)`; rejects with `expired()` once `ms` have passed on `clock`, aborting
 * the signal with the same error. The timer is cleared as soon as the work settles.
 */
export async function withDeadline<T>(ms: number, expired: () => Error, work: (signal: AbortSignal) => Promise<T>, clock: Clock = systemClock): Promise<T> {
  const controller = new AbortController();
  let timer: unknown = null;
  const timedOut = new Promise<never>((_, reject) => {
    timer = clock.setTimeout(() => {
      const error = expired();
      controller.abort(error);
      reject(error);
    }, ms);
  });
  try {
    return await Promise.race([work(controller.signal), timedOut]);
  } finally {
    clock.clearTimeout(timer);
  }
}
