/**
 * More than 32 students: a room holds MAX_ROOM_MEMBERS, so the teacher opens a second one
 * with one click. "Open another room" names the next room (`class-2`, `class-3`, …), and
 * every room the teacher opened in this tab shows on the joining card with its own code and
 * QR code, how many students it holds and whether it trains, with a link that switches the
 * page to it (the tab keeps the token across that switch). Each room trains its own model.
 */
import { RoomControl, toWebringError } from '../../shared/library/control';
import { MAX_ROOM_MEMBERS } from '../../shared/protocol';
import { renderJoinCard } from './qr';
import { h } from './dom';

const ROOMS_KEY = 'webring:teacher:rooms';
/** How often the other rooms' counts refresh. */
export const OTHER_ROOMS_POLL_MS = 5_000;

/** The rooms this tab's teacher opened, in order, with `room` among them. */
function roomsOfThisTab(room: string): string[] {
  let rooms: string[] = [];
  try {
    const stored: unknown = JSON.parse(sessionStorage.getItem(ROOMS_KEY) ?? '[]');
    if (Array.isArray(stored)) rooms = stored.filter((r): r is string => typeof r === 'string');
  } catch (err) {
    console.warn(`the list of this tab's rooms was unreadable, and starts again: ${String(err)}`);
  }
  return rooms.includes(room) ? rooms : [...rooms, room];
}

function keep(rooms: string[]): void {
  try {
    sessionStorage.setItem(ROOMS_KEY, JSON.stringify(rooms));
  } catch (err) {
    console.warn(`the rooms list is kept for this page only: ${String(err)}`);
  }
}

/** The next room's name after `rooms`: the first room's name with -2, -3, … (within the 64 characters a name may have). */
export function nextRoomName(rooms: readonly string[]): string {
  const base = (rooms[0] ?? 'class').replace(/-\d+$/, '').slice(0, 60);
  for (let n = 2; ; n++) if (!rooms.includes(`${base}-${n}`)) return `${base}-${n}`;
}

export function mountOtherRooms(container: HTMLElement, room: string, teacherToken: string, certificate: string | null): void {
  const control = new RoomControl({ url: location.origin, teacherToken });
  let rooms = roomsOfThisTab(room);
  keep(rooms);
  const list = h('div', { class: 'other-rooms', 'data-testid': 'other-rooms' });
  const error = h('p', { class: 'inline-error', role: 'alert', hidden: '' });
  const open = h('button', { type: 'button', class: 'secondary', 'data-testid': 'open-room' }, 'Open another room');
  const cards = new Map<string, { status: HTMLElement }>();

  const addCard = async (name: string): Promise<void> => {
    const body = h('div', { class: 'other-room-join' });
    const status = h('p', { class: 'hint', 'data-testid': 'other-room-status' }, 'no students yet');
    const card = h('section', { class: 'other-room', 'data-room': name }, h('h3', {}, h('a', { href: `/teacher?room=${encodeURIComponent(name)}` }, `Room ${name}`)), status, body);
    cards.set(name, { status });
    list.append(card);
    const join = await control.joinInfo(name);
    await renderJoinCard(body, name, join.code, join.studentUrls[0] ?? join.localUrl, certificate);
  };

  const refresh = async (): Promise<void> => {
    for (const [name, { status }] of cards) {
      try {
        const s = await control.status(name);
        const students = s.members.length + s.waiting.length;
        status.textContent = students === 0 ? 'no students yet' : `${students} of ${MAX_ROOM_MEMBERS} students · ${s.state}${s.state === 'training' ? `, step ${s.step}` : ''}`;
      } catch (err) {
        const e = toWebringError(err);
        // A room exists once its first student joins.
        status.textContent = e.code === 'ERR_UNKNOWN_ROOM' ? 'no students yet' : `unreadable: ${e.message}`;
      }
    }
  };

  const show = (name: string): void => {
    addCard(name).then(refresh, (err: unknown) => {
      error.hidden = false;
      error.textContent = `Room ${name} could not be shown: ${toWebringError(err).message}`;
    });
  };
  open.addEventListener('click', () => {
    const name = nextRoomName(rooms);
    rooms = [...rooms, name];
    keep(rooms);
    show(name);
  });

  container.replaceChildren(
    h('p', { class: 'hint' }, `A room holds ${MAX_ROOM_MEMBERS} students. For more, open another: it has its own code and QR code, and trains its own model.`),
    open,
    error,
    list,
  );
  for (const name of rooms) if (name !== room) show(name);
  setInterval(() => void refresh(), OTHER_ROOMS_POLL_MS);
}
