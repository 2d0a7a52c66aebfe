/**
 * Explains the connection to students. Browsers expose WebGPU (`navigator.gpu`) and
 * `crypto.subtle` only in a secure context (https://w3c.github.io/webappsec-secure-contexts/;
 * WebGPU's IDL marks `navigator.gpu` [SecureContext]). http://localhost counts as secure; a
 * plain-http page from the teacher's LAN address does not, so there Chromium hides the GPU
 * and the tab falls back to WebGL. The server also speaks HTTPS, with a certificate the
 * teacher's computer made itself, so the first visit shows a certificate warning: this
 * notice says why, and what to click.
 */
import type { ServerInfo } from '../shared/protocol';
import './secure-context.css';

/** Hosts the browser treats as secure over plain http (the spec's "potentially trustworthy" loopback). */
const isLoopback = (hostname: string) =>
  hostname === 'localhost' || hostname.endsWith('.localhost') || /^127(\.\d{1,3}){3}$/.test(hostname) || hostname === '[::1]';

async function fetchInfo(): Promise<ServerInfo | null> {
  try {
    const res = await fetch('/api/info', { cache: 'no-store' });
    return res.ok ? ((await res.json()) as ServerInfo) : null;
  } catch (err) {
    // The notice still explains the problem, without a link.
    console.warn(`[webring] /api/info unreachable: ${(err as Error).message}`);
    return null;
  }
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, text: string, className?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.textContent = text;
  if (className) node.className = className;
  return node;
}

function show(container: HTMLElement, children: Node[]): void {
  container.replaceChildren(...children);
  container.classList.add('secure-notice');
  if (!container.hasAttribute('role')) container.setAttribute('role', 'status');
  container.classList.remove('hidden');
}

/**
 * Fills `container` (and un-hides it) on a page that is not a secure context: the https link
 * (same host, the server's https port, same path and query) and how to get past the browser's
 * certificate warning. On https from a LAN address it says, in one line, why that warning
 * appeared. On localhost it stays hidden.
 */
export async function showSecureContextNotice(container: HTMLElement): Promise<void> {
  if (isLoopback(location.hostname)) return;
  if (window.isSecureContext) {
    if (location.protocol === 'https:') {
      show(container, [
        // Never "safe" (issue 57): a click-through trusts whichever computer answered, and
        // only the fingerprint check tells the teacher's from one in the middle.
        el('p', 'If your browser warned that this connection is not private: the teacher’s computer made its own certificate, and no company vouches for it. Clicking through means trusting that this is your teacher’s computer; the connection is encrypted, but only to whichever computer answered. Check that the start of the certificate’s SHA-256 fingerprint matches the one on the teacher’s screen; if it differs, close this tab and tell your teacher.', 'secure-note'),
      ]);
      container.classList.add('secure-ok');
    }
    return;
  }

  const info = await fetchInfo();
  const children: Node[] = [
    el('strong', 'This page is not secure, so your browser hides the GPU.'),
    el('p', 'Browsers let a page use the graphics card (WebGPU) only over a secure (https) connection. This page came over plain http, so this tab can only train slowly, without WebGPU.'),
    // Said before any run: secure aggregation needs crypto.subtle, which plain http hides too.
    el('p', 'It also cannot take part in a secure run, which keeps each student’s contribution hidden, and which lessons on the class’s own examples use by default: in such a run this tab would wait out the lesson.', 'secure-run-note'),
  ];
  if (info?.httpsPort) {
    const url = `https://${location.hostname}:${info.httpsPort}${location.pathname}${location.search}${location.hash}`;
    const link = el('a', url, 'secure-link');
    link.href = url;
    link.dataset.testid = 'secure-link';
    const p = el('p', 'Open the secure page instead: ');
    p.append(link);
    children.push(p);
  } else {
    children.push(el('p', 'Ask your teacher for the address that starts with https://.'));
  }
  const host = location.hostname;
  children.push(
    el('p', 'The first time, the browser warns “Your connection is not private”. That is expected: the teacher’s computer made its own certificate, and no company vouches for it.'),
    el('p', 'Before you click through, check that the certificate is your teacher’s: in the warning, open the certificate (click “Not secure” or the padlock, then the certificate) and compare the start of its SHA-256 fingerprint with the one on the teacher’s screen. If they differ, stop and tell your teacher: another computer is in the middle and could read what this tab sends.'),
    el('p', `If they match: click Advanced, then “Proceed to ${host} (unsafe)”. In Firefox: Advanced…, then Accept the Risk and Continue. In Safari: Show Details, then visit this website. The connection is then encrypted to the teacher’s computer.`),
  );
  show(container, children);
}
