/**
 * Explains the connection to students: WebGPU (and crypto.subtle) exist only in a secure
 * context, which a plain-http page from a LAN address is not. Filled in by the HTTPS work.
 */
export async function showSecureContextNotice(container: HTMLElement): Promise<void> {
  void container;
}
