/**
 * A 64-bit fingerprint of float32 weights, used to check that replicas agree bit for bit.
 * Two independent 32-bit FNV-1a style lanes over the raw float bits; no crypto.subtle,
 * which is missing on plain-http LAN pages (not a secure context).
 */
export class WeightsHasher {
  private h1 = 0x811c9dc5;
  private h2 = 0x01000193 ^ 0x5bd1e995;

  update(values: Float32Array): this {
    const words = new Uint32Array(values.buffer, values.byteOffset, values.length);
    let h1 = this.h1;
    let h2 = this.h2;
    for (let i = 0; i < words.length; i++) {
      const w = words[i]!;
      h1 = Math.imul(h1 ^ w, 0x01000193);
      h2 = Math.imul(h2 ^ ((w << 13) | (w >>> 19)), 0x5bd1e995);
      h2 ^= h2 >>> 15;
    }
    this.h1 = h1 >>> 0;
    this.h2 = h2 >>> 0;
    return this;
  }

  digest(): string {
    return this.h1.toString(16).padStart(8, '0') + this.h2.toString(16).padStart(8, '0');
  }
}
