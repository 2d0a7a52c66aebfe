/**
 * The clock rooms run on: systemClock's timers, with wall time (ms since the epoch) for
 * `now`. Room times are shown to the teacher as dates, compared with the server's time by
 * the dashboard, and written to Redis where other signaling nodes compare them with their
 * own; a monotonic scale that starts with each process would mean nothing to any of them.
 */
import { systemClock, type Clock } from '../../shared/util/clock';

export const wallClock: Clock = { ...systemClock, now: () => Date.now() };
