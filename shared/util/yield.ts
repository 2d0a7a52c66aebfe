/**
 * Lets the event loop run between training steps. A ring of one (or a step whose awaits
 * all resolve as microtasks, as the CPU backend's do) would otherwise never return to the
 * event loop, and the socket would miss the server's heartbeats and be dropped.
 *
 * Not setTimeout: Chromium throttles timers in hidden tabs to about one per second. A
 * MessageChannel message (or Node's setImmediate) is a macrotask without that throttling.
 */
let channel: MessageChannel | null = null;
const waiting: Array<() => void> = [];

export function yieldToEventLoop(): Promise<void> {
  if (typeof setImmediate === 'function') return new Promise((resolve) => setImmediate(resolve));
  if (!channel) {
    // One channel for the page's lifetime: a step allocates no new one.
    channel = new MessageChannel();
    channel.port1.onmessage = () => waiting.shift()?.();
  }
  const port = channel.port2;
  return new Promise((resolve) => {
    waiting.push(resolve);
    port.postMessage(null);
  });
}
