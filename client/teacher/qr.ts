/**
 * The joining card: the room and its join code in letters big enough to read from the back
 * row, a QR code of the class link (which carries the code) big enough to scan from a
 * projector, and the start of the HTTPS certificate's fingerprint for students to check.
 */
import QRCode from 'qrcode';
import { h } from './dom';

/**
 * Renders the card into `container`. The QR code is SVG, so it stays sharp at any projector
 * size; black on white with the standard 4-module quiet zone, because phone scanners read
 * inverted or low-contrast codes badly.
 */
export async function renderJoinCard(container: HTMLElement, room: string, joinCode: string, studentUrl: string, certificateFingerprint: string | null): Promise<void> {
  const code = h('p', { class: 'room-code', 'data-testid': 'join-code' }, joinCode);
  // Through the CSSOM, not a style attribute: the page's Content-Security-Policy allows no inline styles.
  code.style.setProperty('--room-chars', String(Math.max(joinCode.length, 4)));
  const link = h('a', { class: 'student-url', href: studentUrl, target: '_blank', rel: 'noopener' }, studentUrl);
  const figure = h('figure', { class: 'qr' });
  container.replaceChildren(
    h('p', { class: 'join-hint' }, `Scan, or open the student page and join room “${room}” with the code:`),
    code,
    figure,
    h('p', { class: 'join-url' }, link),
    // What students compare with their browser's certificate viewer before clicking through
    // its warning: a classmate in the middle would show a certificate of its own.
    ...(certificateFingerprint
      ? [h('p', { class: 'join-cert', 'data-testid': 'certificate-fingerprint' }, 'Certificate (SHA-256) starts ', h('code', {}, certificateFingerprint), ': students check it before they click through the browser’s warning.')]
      : []),
  );
  const svg = await QRCode.toString(studentUrl, { type: 'svg', errorCorrectionLevel: 'M', margin: 4, color: { dark: '#000000', light: '#ffffff' } });
  // The markup comes from the qrcode library, built from our URL only; it holds no user HTML.
  figure.innerHTML = svg;
  const el = figure.querySelector('svg');
  el?.setAttribute('role', 'img');
  el?.setAttribute('aria-label', `QR code for ${studentUrl}`);
}
