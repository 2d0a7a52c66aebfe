/**
 * The teacher's network checks (POST /api/rooms/:room/network-check), in memory on this
 * server: the latest check of each room, what each device answered (worker:network), and
 * who has used its one download and one upload of the bandwidth probe in it. A report or a
 * probe outside the check's window, for another check, or a second one, is refused with a
 * code and changes nothing.
 */
import { WebringError } from '../../shared/protocol/errors';
import { NETWORK_CHECK_REPORT_WINDOW_MS, NETWORK_CHECK_WINDOW_MS, type NetworkCheckStatus, type NetworkReport } from '../../shared/protocol';

interface Check {
  status: NetworkCheckStatus;
  /** Probe transfers made, as `reader/direction`. */
  probes: Set<string>;
}

export class NetworkChecks {
  private readonly byRoom = new Map<string, Check>();
  private last = 0;

  /** Starts a check of `room` at `now` (server ms); its number. */
  start(room: string, now: number): number {
    // Increasing across rooms and restarts of a check: a late report of an older one never counts.
    this.last = Math.max(this.last + 1, now);
    this.byRoom.set(room, { status: { check: this.last, startedAt: now, reports: [] }, probes: new Set() });
    return this.last;
  }

  /** The check `check` of `room`, open at `now` for what has `windowMs`; ERR_STALE_RUN otherwise. */
  private open(room: string, check: number, now: number, windowMs: number): Check {
    const current = this.byRoom.get(room);
    if (!current || current.status.check !== check) throw new WebringError('ERR_STALE_RUN', `no network check ${check} in room ${room}`, 'check');
    if (now - current.status.startedAt > windowMs) throw new WebringError('ERR_STALE_RUN', `network check ${check} is over`, 'check');
    return current;
  }

  /** A device's answer; its second answer to one check is refused. */
  report(room: string, member: string, report: NetworkReport, now: number): void {
    const current = this.open(room, report.check, now, NETWORK_CHECK_REPORT_WINDOW_MS);
    if (current.status.reports.some((r) => r.member === member)) throw new WebringError('ERR_BAD_REQUEST', 'this device already answered this check', 'check');
    current.status.reports.push({ ...report, member });
  }

  /** One probe transfer of `reader` in check `check`: one download and one upload each. */
  probe(room: string, check: number, reader: string, direction: 'down' | 'up', now: number): void {
    const current = this.open(room, check, now, NETWORK_CHECK_WINDOW_MS);
    const key = `${reader}/${direction}`;
    if (current.probes.has(key)) throw new WebringError('ERR_RATE_LIMITED', `one ${direction}load per device and check`);
    current.probes.add(key);
  }

  of(room: string): NetworkCheckStatus | null {
    return this.byRoom.get(room)?.status ?? null;
  }
}
