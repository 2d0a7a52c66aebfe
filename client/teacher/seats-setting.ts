/**
 * The teacher's say over how many seats one device address may hold (PUT
 * /api/rooms/:room/seats; signaling-server/rooms/seats.ts): the default, or 1 to
 * MAX_ROOM_MEMBERS for a lab whose computers share one address behind NAT.
 */
import { MAX_ROOM_MEMBERS, type RoomStatus } from '../../shared/protocol';
import type { Result } from './api';
import { h } from './dom';

export interface SeatsSetting {
  /** Shows the room's current setting, unless the teacher's change is still on its way. */
  render(status: RoomStatus): void;
}

/** Wires the select; `save` sends the teacher's choice and answers with the room's new status. */
export function mountSeatsSetting(
  select: HTMLSelectElement,
  error: HTMLElement,
  save: (perAddress: number | null) => Promise<Result<RoomStatus>>,
  applyStatus: (status: RoomStatus) => void,
): SeatsSetting {
  for (let n = 1; n <= MAX_ROOM_MEMBERS; n++) select.append(h('option', { value: n }, String(n)));
  /** The teacher's choice not yet answered; one request at a time, so the last choice is the one that stays. */
  let wanted: number | null | undefined;
  let saving = false;

  const render = (status: RoomStatus): void => {
    select.options[0]!.textContent = `default (${status.seats.defaultPerLanAddress})`;
    if (saving) return;
    const value = status.seats.perAddress === null ? '' : String(status.seats.perAddress);
    if (select.value !== value) select.value = value;
  };

  const send = async (): Promise<void> => {
    saving = true;
    error.hidden = true;
    while (wanted !== undefined) {
      const perAddress = wanted;
      wanted = undefined;
      const result = await save(perAddress);
      if (result.ok) {
        if (wanted === undefined) applyStatus(result.value);
      } else {
        error.textContent = `Not changed: ${result.error.message} (${result.error.code})`;
        error.hidden = false;
      }
    }
    saving = false;
  };

  // The select stays enabled while a choice is saved: a keyboard user steps through the options with the arrow keys, each a change.
  select.addEventListener('change', () => {
    wanted = select.value === '' ? null : Number(select.value);
    if (!saving) void send();
  });
  return { render };
}

/**
 * Wires the teacher's vouch that members sharing an address are distinct devices (secure
 * aggregation then counts each; signaling-server/rooms/secure-count.ts). The box shows the
 * room's setting, unless the teacher's change is still on its way.
 */
export function mountVouchSetting(
  box: HTMLInputElement,
  error: HTMLElement,
  save: (vouched: boolean) => Promise<Result<RoomStatus>>,
  applyStatus: (status: RoomStatus) => void,
): SeatsSetting {
  let saving = false;
  box.addEventListener('change', () => {
    saving = true;
    error.hidden = true;
    void save(box.checked).then((result) => {
      saving = false;
      if (result.ok) return applyStatus(result.value);
      error.textContent = `Not changed: ${result.error.message} (${result.error.code})`;
      error.hidden = false;
    });
  });
  return {
    render(status) {
      // Absent from older servers: not vouched.
      if (!saving) box.checked = status.seats.vouched === true;
    },
  };
}
