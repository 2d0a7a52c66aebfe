/**
 * One line on the run card that says what is private in the run in progress: masked
 * gradients (secure aggregation), waiting for a third student, or what a neighbour and the
 * hub can read when gradients travel unmasked. The form's hint beside the setting lists
 * what stays public either way (teacher.html, docs/privacy.md).
 */
import { MIN_SECURE_MEMBERS, type RoomStatus } from '../../shared/protocol';

export function renderPrivacy(el: HTMLElement, s: RoomStatus): void {
  const running = s.config !== null && (s.state === 'training' || s.state === 'paused');
  el.hidden = !running;
  if (!running) return;
  el.dataset.secure = String(s.config!.secureAggregation);
  if (!s.config!.secureAggregation) {
    el.textContent = "Gradients travel unmasked: each student's ring neighbour, and the hub when it sums, can read that student's gradient, and the examples behind it can be reconstructed from it.";
    return;
  }
  // Members on one network address count once (RoomStatus.clients), so a student's two tabs
  // and a classmate wait too; so does a class behind one NAT, until the teacher vouches for it.
  const clients = Math.min(s.members.length, s.clients);
  const addresses = `${clients} network address${clients === 1 ? '' : 'es'}`;
  const vouch = 'one address counts once, unless you vouch under the seats setting that its members are different devices';
  const tabs = clients < s.members.length ? ` (${s.members.length} members on ${addresses}: ${vouch})` : '';
  // Absent from older servers: not vouched.
  const vouched = s.seats?.vouched === true
    ? " You vouched that members sharing an address are different devices, so each counts as a student: a student's extra tabs would count too, and with few classmates could read one's gradient."
    : '';
  el.textContent =
    s.members.length > 1 && clients < MIN_SECURE_MEMBERS
      ? `Secure aggregation is waiting for student ${MIN_SECURE_MEMBERS}: with ${clients}${tabs}, each would learn the other's gradient from their sum.`
      : `Secure aggregation is on: every device's gradient leaves it masked; no student, hub or this server can read one student's gradient, only the class's sum.${vouched}`;
}
