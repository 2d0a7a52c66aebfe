/**
 * "Use this page from a second device": the teacher page on a phone or tablet too, say to
 * start and stop from the back of the room while the laptop drives the projector. The
 * page's link carries the teacher token, which this page keeps out of its address bar and
 * off the screen; here the teacher can show it as a QR code on purpose, for a minute, with
 * a warning, and never while the page is projected in big-screen mode.
 */
import QRCode from 'qrcode';
import { h } from './dom';

/** The QR code hides itself after this long, in case the teacher walks away from the screen. */
export const TEACHER_QR_SHOWN_MS = 60_000;

/**
 * Fills `container`. `origin` is the address other devices reach this server at (the class
 * link's, on the LAN), not this tab's localhost; `certificateFingerprint` the start of the
 * SHA-256 of its https certificate (null without https).
 */
export function mountSecondDevice(container: HTMLElement, room: string, token: string, origin: string, certificateFingerprint: string | null = null): void {
  const link = `${origin}/teacher?room=${encodeURIComponent(room)}&token=${encodeURIComponent(token)}`;
  const figure = h('figure', { class: 'qr teacher-qr', 'data-testid': 'teacher-qr', hidden: '' });
  const show = h('button', { type: 'button', class: 'secondary', 'data-testid': 'show-teacher-qr' }, 'Show its QR code');
  let hideTimer: ReturnType<typeof setTimeout> | null = null;
  const hide = () => {
    if (hideTimer !== null) clearTimeout(hideTimer);
    hideTimer = null;
    figure.replaceChildren();
    figure.hidden = true;
    show.textContent = 'Show its QR code';
  };
  show.addEventListener('click', () => {
    if (!figure.hidden) return hide();
    if (document.documentElement.classList.contains('big')) {
      figure.hidden = false;
      figure.replaceChildren(h('p', { class: 'inline-error', role: 'alert' }, 'Leave big-screen mode first: the code must not reach the projector.'));
      return;
    }
    void QRCode.toString(link, { type: 'svg', errorCorrectionLevel: 'M', margin: 4, color: { dark: '#000000', light: '#ffffff' } }).then((svg) => {
      // The markup comes from the qrcode library, built from our link only; it holds no user HTML.
      figure.innerHTML = svg;
      figure.querySelector('svg')?.setAttribute('aria-label', 'QR code of the teacher page, with the teacher token');
      figure.hidden = false;
      show.textContent = 'Hide the QR code';
      hideTimer = setTimeout(hide, TEACHER_QR_SHOWN_MS);
    });
  });
  container.replaceChildren(
    h(
      'p',
      {},
      'This page starts, stops and deletes runs. Its link carries the teacher token, so neither the address bar nor the terminal shows it: a projected screen never gives it away. ',
      'To use it from a phone or tablet too, open the link that ',
      h('code', {}, 'npm start'),
      ' saved in ',
      h('code', {}, 'teacher-link.txt'),
      ' (in its data directory) on that device, or scan the code below with it.',
    ),
    h('p', { class: 'hint' }, 'Only while nothing is projected or shared: whoever scans the code has the teacher’s powers. It hides itself after a minute.'),
    ...certificateNote(origin, certificateFingerprint),
    show,
    figure,
  );
}

/**
 * What the teacher checks before the phone clicks through a certificate warning (issue 57):
 * the link carries the token, so a click-through to a computer in the middle hands it the
 * teacher's powers. The server's own certificate has no authority behind it, so only its
 * fingerprint tells them apart; over plain http, anyone on the network reads the link.
 */
function certificateNote(origin: string, fingerprint: string | null): HTMLElement[] {
  if (origin.startsWith('http:')) {
    return [h('p', { class: 'hint', 'data-testid': 'teacher-qr-plain' }, 'This link is plain http: anyone on the network can read the token on its way. Prefer teacher-link.txt on a device you trust.')];
  }
  if (!fingerprint) return [];
  return [
    h(
      'p',
      { class: 'hint', 'data-testid': 'teacher-qr-certificate' },
      'If the phone warns that the connection is not private, do not click through until its certificate’s SHA-256 fingerprint starts ',
      h('code', {}, fingerprint),
      ': the link carries the teacher token, and a click-through to any other computer hands it over.',
    ),
  ];
}
