/**
 * Constants vite.config.ts replaces at build time.
 *
 * True only in the test build (`vite build --mode test`): the page then reads its fault
 * flags (debugSlowMs, debugSlowPerExampleMs, debugDriftAtStep, debugPoisonAtStep) from the query string.
 */
declare const __WEBRING_FAULT_FLAGS__: boolean;
