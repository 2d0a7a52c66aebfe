/**
 * The cryptography of secure aggregation, all of it WebCrypto (crypto.subtle), so that a
 * tab and a Node worker run the same code: an ECDH P-256 key pair per member and
 * generation, a pairwise secret by ECDH, and from it, through HKDF-SHA-256, one AES-128-CTR
 * key per mask; the mask is that key's keystream. The HKDF info names the run, the
 * generation, the step, the collective, the attempt and the pair, so no two masks ever
 * share a key, and one mask tells nothing of another.
 *
 * Browsers offer crypto.subtle only in a secure context (https, or localhost): a device
 * on plain http cannot take part in a secure run (client/secure-context.ts explains why).
 */
import { WebringError } from '../protocol/errors';

/** The HKDF info's prefix: a new version of the scheme must never reuse a mask of an older one. */
const INFO_LABEL = 'webring/secagg/v1';
/** Bytes of an uncompressed P-256 public key (0x04 ‖ x ‖ y). */
export const PUBLIC_KEY_BYTES = 65;
const EC = { name: 'ECDH', namedCurve: 'P-256' } as const;
const WORD_BYTES = 4;

/** One member's key pair of one generation; the private key never leaves WebCrypto. */
export interface MemberKeyPair {
  /** The raw public key, base64: what travels through the signaling server. */
  publicKey: string;
  privateKey: CryptoKey;
}

/** Which mask: unique per (run, generation, step, collective, attempt, pair). */
export interface MaskLabel {
  run: number;
  generation: number;
  step: number;
  tag: number;
  attempt: number;
  /** The pair's ranks, lower first. */
  low: number;
  high: number;
}

function subtle(): SubtleCrypto {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new WebringError('ERR_BAD_STATE', 'secure aggregation needs WebCrypto (crypto.subtle), which browsers offer only over https or on localhost');
  return s;
}

/** True where this device can take part in a secure run. */
export const canAggregateSecurely = (): boolean => globalThis.crypto?.subtle !== undefined;

export const toBase64 = (bytes: Uint8Array): string => btoa(String.fromCharCode(...bytes));

export function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/** A fresh key pair for one generation. */
export async function makeKeyPair(): Promise<MemberKeyPair> {
  const pair = (await subtle().generateKey(EC, false, ['deriveBits'])) as CryptoKeyPair;
  const raw = new Uint8Array(await subtle().exportKey('raw', pair.publicKey));
  return { publicKey: toBase64(raw), privateKey: pair.privateKey };
}

/**
 * The secret this member shares with the owner of `peerPublicKey` (ECDH), as an HKDF key.
 * ERR_BAD_DATA for a key that is not a P-256 point.
 */
export async function pairSecret(own: CryptoKey, peerPublicKey: string): Promise<CryptoKey> {
  let peer: CryptoKey;
  try {
    const raw = fromBase64(peerPublicKey);
    if (raw.length !== PUBLIC_KEY_BYTES) throw new Error(`${raw.length} bytes`);
    peer = await subtle().importKey('raw', raw, EC, false, []);
  } catch (err) {
    throw new WebringError('ERR_BAD_DATA', `a classmate's public key is no P-256 point: ${(err as Error).message}`);
  }
  const bits = await subtle().deriveBits({ name: 'ECDH', public: peer }, own, 256);
  return subtle().importKey('raw', bits, 'HKDF', false, ['deriveKey']);
}

function infoBytes(label: MaskLabel): Uint8Array<ArrayBuffer> {
  const prefix = new TextEncoder().encode(INFO_LABEL);
  const out = new Uint8Array(prefix.length + 7 * WORD_BYTES);
  out.set(prefix);
  const view = new DataView(out.buffer, prefix.length);
  [label.run, label.generation, label.step, label.tag, label.attempt, label.low, label.high].forEach((v, i) => view.setUint32(i * WORD_BYTES, v >>> 0, true));
  return out;
}

/** Zeros to encrypt, per length: AES-CTR of zeros is the keystream. */
const zeros = new Map<number, Uint8Array<ArrayBuffer>>();
const NO_SALT = new Uint8Array(0);
const COUNTER_ZERO = new Uint8Array(16);

/** The mask `label` names, `words` 32-bit words of keystream. */
export async function pairMask(secret: CryptoKey, label: MaskLabel, words: number): Promise<Uint32Array> {
  const key = await subtle().deriveKey({ name: 'HKDF', hash: 'SHA-256', salt: NO_SALT, info: infoBytes(label) }, secret, { name: 'AES-CTR', length: 128 }, false, ['encrypt']);
  let plain = zeros.get(words);
  if (!plain) {
    plain = new Uint8Array(words * WORD_BYTES);
    zeros.set(words, plain);
  }
  // The key is used for this one mask only, so the counter may start at zero.
  return new Uint32Array(await subtle().encrypt({ name: 'AES-CTR', counter: COUNTER_ZERO, length: 64 }, key, plain));
}
