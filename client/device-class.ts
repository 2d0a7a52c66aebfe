/**
 * What kind of device this tab runs on, for the admission probe and the teacher's class
 * summary ("3 laptops, 1 slow tablet"). From the user agent: User-Agent Client Hints where
 * the browser has them (`mobile`), otherwise the UA string. iPadOS reports itself as a Mac,
 * so a Mac with a touch screen counts as a tablet. Desktops count as laptops: the teacher
 * only needs to tell the big machines from the small ones.
 */
import type { DeviceClass } from '../shared/protocol';

interface UserAgentView {
  userAgent: string;
  maxTouchPoints: number;
  userAgentData?: { mobile: boolean };
}

export function deviceClassOf(nav: UserAgentView): DeviceClass {
  const ua = nav.userAgent;
  if (/iPad|Tablet|PlayBook|Silk/i.test(ua) || (/Macintosh/.test(ua) && nav.maxTouchPoints > 1)) return 'tablet';
  // Android phones say "Mobile"; Android tablets do not.
  if (/Android/i.test(ua)) return /Mobile/i.test(ua) ? 'phone' : 'tablet';
  if (nav.userAgentData?.mobile || /iPhone|iPod|Mobile|IEMobile|Opera Mini/i.test(ua)) return 'phone';
  return 'laptop';
}
