/**
 * The same memory as 32-bit words: a collective on the 'u32' wire (secure aggregation's
 * masked values) sums the bits of its Float32Array buffer as unsigned integers. The views
 * are kept per buffer, so the per-message path allocates nothing after the first message.
 */
const views = new WeakMap<Float32Array, Uint32Array>();

/** `buf`'s memory as Uint32Array words, element for element. */
export function wordsOf(buf: Float32Array): Uint32Array {
  let words = views.get(buf);
  if (!words) {
    words = new Uint32Array(buf.buffer, buf.byteOffset, buf.length);
    views.set(buf, words);
  }
  return words;
}

/**
 * `dst[at + i] = (dst[at + i] + src[i]) mod 2^32` for i < length (`add`), or a copy. A
 * Uint32Array store reduces modulo 2^32 by itself (ToUint32), and the sum of two words is
 * below 2^33, exact in a double. Narrow words (the 'u16' and 'u8' wires) are added the same
 * way: their sum's low bits are the sum modulo 2^16 or 2^8.
 */
export function addOrCopyWords(src: Uint32Array | Uint16Array | Uint8Array, dst: Uint32Array, at: number, length: number, add: boolean): void {
  if (add) for (let i = 0; i < length; i++) dst[at + i]! += src[i]!;
  else for (let i = 0; i < length; i++) dst[at + i] = src[i]!;
}
