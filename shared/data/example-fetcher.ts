/**
 * How a worker gets examples from the data service (data-service.ts): one HTTP GET per
 * batch of indices, retried with exponential backoff while the server cannot answer, and
 * said so through `onWait`, so a student sees "waiting for the data service" rather than
 * a frozen page. A reply that is not what was asked for is never trained on: it is fetched
 * again, and a refusal the server means (a bad request, a membership the server no longer
 * knows) ends the run with the server's coded error.
 *
 * A worker reads with its member token, never the join code: an address locked out for
 * wrong join codes (a school NAT with one guesser behind it) still serves its members.
 */
import { WebringError, type ErrorCode } from '../protocol/errors';
import { sleep, systemClock, type Clock } from '../util/clock';
import { withDeadline } from '../util/deadline';
import { checkExamplesReply, encodeRanges, type DataSplit } from './data-service';

/** The first retry waits this long; each later one twice as long, up to RETRY_MAX_MS. */
export const RETRY_FIRST_MS = 250;
export const RETRY_MAX_MS = 8_000;
/** One request that has not answered in this long is abandoned and tried again. */
export const REQUEST_TIMEOUT_MS = 30_000;

export interface Examples {
  labels: Uint8Array;
  /** count × F bytes, the task's features. */
  features: Uint8Array;
}

/** The examples `indices[0, count)` (ascending, distinct) of `split`, in that order. */
export type ExampleFetcher = (split: DataSplit, indices: Uint32Array, count: number) => Promise<Examples>;

export interface HttpFetcherOptions {
  /** The server's origin, e.g. http://10.0.0.5:8080; '' for the page's own. */
  baseUrl: string;
  room: string;
  dataset: string;
  /** Features of one example (the task's F): a reply's length is checked against it. */
  features: number;
  /**
   * The worker's member token now (Authorization: Bearer). Read at every attempt: a
   * worker that joined afresh after a drop has a new one.
   */
  memberToken: () => string;
  /** Told why the worker is waiting, and null once data flows again. */
  onWait?: (why: string | null) => void;
  /** Stops retrying; pending fetches reject with its reason when that is a WebringError, else ERR_ABORTED. */
  signal?: AbortSignal;
  fetch?: typeof fetch;
  clock?: Clock;
}

/** Server errors a retry cannot fix: the request itself is wrong, or not allowed. */
const FINAL_STATUSES = new Set([400, 401, 403, 404, 413]);

export function httpExampleFetcher(options: HttpFetcherOptions): ExampleFetcher {
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));
  const clock = options.clock ?? systemClock;
  const base = `${options.baseUrl}/api/rooms/${encodeURIComponent(options.room)}/data/${options.dataset}/`;
  let waiting = false;
  // A run ended for a reason of its own (a stall: training/run-stop.ts) says so; otherwise the run is simply over.
  const ended = (): WebringError => (options.signal?.reason instanceof WebringError ? options.signal.reason : new WebringError('ERR_ABORTED', 'the run ended while examples were on their way'));
  return async (split, indices, count) => {
    const url = `${base}${split}?ranges=${encodeRanges(indices, count)}`;
    for (let attempt = 0; ; attempt++) {
      if (options.signal?.aborted) throw ended();
      let why: string;
      let retryAfterMs = 0;
      const token = options.memberToken();
      try {
        const res = await withDeadline(
          REQUEST_TIMEOUT_MS,
          () => new WebringError('ERR_TIMEOUT', `no answer in ${REQUEST_TIMEOUT_MS / 1000} s`),
          (signal) => doFetch(url, { headers: { Authorization: `Bearer ${token}` }, signal: options.signal ? AbortSignal.any([signal, options.signal]) : signal }),
          clock,
        );
        if (res.ok) {
          const examples = checkExamplesReply(new Uint8Array(await res.arrayBuffer()), count, options.features);
          if (waiting) {
            waiting = false;
            options.onWait?.(null);
          }
          return examples;
        }
        const refusal = await errorOf(res);
        // The token was replaced (a fresh join) while this request was out: ask again with the new one.
        const stale = res.status === 401 && options.memberToken() !== token;
        if (FINAL_STATUSES.has(res.status) && !stale) throw new WebringError(refusal.code, `the data service refused ${split} examples: ${refusal.message}`);
        why = `HTTP ${res.status}: ${refusal.message}`;
        retryAfterMs = Number(res.headers.get('retry-after') ?? 0) * 1000;
      } catch (err) {
        if (err instanceof WebringError && err.code !== 'ERR_TIMEOUT' && err.code !== 'ERR_BAD_DATA') throw err;
        if (options.signal?.aborted) throw ended();
        why = (err as Error).message;
      }
      const backoffMs = Math.max(retryAfterMs, Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** attempt));
      waiting = true;
      options.onWait?.(`waiting for the data service (${why}); trying again in ${(backoffMs / 1000).toFixed(1)} s`);
      await sleep(clock, backoffMs);
    }
  };
}

async function errorOf(res: Response): Promise<{ code: ErrorCode; message: string }> {
  const text = await res.text();
  try {
    const body = JSON.parse(text) as { error?: { code?: ErrorCode; message?: string } };
    if (body.error?.code && body.error.message) return { code: body.error.code, message: body.error.message };
  } catch (err) {
    // Not the server's JSON error (a proxy's HTML page, say): keep its first words below.
    if (!(err instanceof SyntaxError)) throw err;
  }
  return { code: 'ERR_BAD_DATA', message: text.slice(0, 120) || res.statusText };
}
