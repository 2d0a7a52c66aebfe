/**
 * Security headers on the pages and the files they load (the student page, the teacher page,
 * the benchmark page). The teacher page is meant for a projector and its first address
 * carries the teacher token: Referrer-Policy keeps that address out of every request the page
 * makes, and the Content-Security-Policy lets the pages run only what the built client
 * brings from this server.
 *
 * What the client needs, and so what the policy allows:
 * - scripts and styles: the built modules and CSS files from this origin ('self'), no inline
 *   code or style attributes (the pages set styles through the CSSOM, which CSP does not
 *   govern); TensorFlow.js's WebGPU, WebGL and CPU backends compile shaders, never
 *   JavaScript, so no 'unsafe-eval' (zod is told not to try it: client/zod-jitless.ts);
 *   'wasm-unsafe-eval' lets WebAssembly compile, not JavaScript: long.js, which TensorFlow.js
 *   uses for 64-bit integers, instantiates a small built-in module and would otherwise fall
 *   back to JavaScript after a violation report on every page;
 * - connections: the HTTP API and socket.io on this origin, whose WebSocket is ws: or wss:
 *   on the same host (named explicitly: older Safari does not count ws: as 'self');
 *   WebRTC's data channels and its STUN/TURN traffic are not governed by connect-src;
 * - images: this origin, and data: (the empty favicon) and blob: URLs;
 * - nothing may frame the pages (a dashboard in a hidden frame is a click-jacking target),
 *   no plugins, no <base>, and forms post only here.
 */
import type { NextFunction, Request, Response } from 'express';

/** A Host header as browsers send it: a name or an address, and a port; anything else is left out of the policy. */
const HOST_PATTERN = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/** The policy for a page served as `host` (its own WebSocket origins named when the host is well-formed). */
export function contentSecurityPolicy(host: string | undefined): string {
  const sockets = host && HOST_PATTERN.test(host) ? ` ws://${host} wss://${host}` : '';
  return [
    "default-src 'self'",
    "script-src 'self' 'wasm-unsafe-eval'",
    "style-src 'self'",
    "img-src 'self' data: blob:",
    "font-src 'self'",
    `connect-src 'self'${sockets}`,
    "worker-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** Express middleware: the headers above on every response that passes through it. */
export function pageHeaders(req: Request, res: Response, next: NextFunction): void {
  res.setHeader('Content-Security-Policy', contentSecurityPolicy(req.headers.host));
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  next();
}
