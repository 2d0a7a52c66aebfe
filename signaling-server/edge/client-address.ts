/**
 * Whose request is this? Rate limits and the wrong-join-code budget count per client
 * address. Behind a load balancer (several signaling nodes) every connection comes
 * from the balancer, so one guesser would spend the whole school's budget; with TRUST_PROXY
 * naming the balancer, its X-Forwarded-For is believed (proxy-addr, as express does), and
 * nobody else's is, so a client cannot pick its own address by sending the header.
 */
import type { IncomingMessage } from 'node:http';
import proxyaddr from 'proxy-addr';

export type TrustProxy = (address: string, hop: number) => boolean;

/** Nothing is trusted: the address is the peer's, whatever headers say. */
const TRUST_NOBODY: TrustProxy = () => false;

/**
 * TRUST_PROXY: comma-separated addresses, subnets (10.0.0.0/8) or proxy-addr's names
 * (loopback, linklocal, uniquelocal) of the load balancers in front. Throws a TypeError
 * naming the bad entry.
 */
export function compileTrustProxy(spec: string | undefined): TrustProxy {
  if (spec === undefined || spec.trim() === '') return TRUST_NOBODY;
  return proxyaddr.compile(spec.split(',').map((s) => s.trim()).filter((s) => s !== ''));
}

export function clientAddress(req: IncomingMessage, trust: TrustProxy): string {
  return proxyaddr(req, trust);
}
