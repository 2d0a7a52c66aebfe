/**
 * What this browser can do for the class, found before Join, so that a missing API is said
 * in plain words on the page and never ends a join in ERR_INTERNAL (issue 58): WebKitGTK is
 * built without RTCPeerConnection, a managed Chromebook's policy may remove it, plain http
 * hides crypto.subtle and WebGPU, a private window may refuse IndexedDB.
 *
 * Each ability is looked up on `scope` (globalThis in a page; a unit test passes its own),
 * and only what the product uses is checked: WebRTC for direct links, ECDH on P-256 for
 * secure runs' pairwise masks (shared/secagg), IndexedDB for the chief's checkpoint copies
 * and the student's own examples, Web Workers for the compute thread, WebAssembly and WebGPU
 * for the backends.
 */

/** The abilities the page reports, each with what its absence means for the student. */
export type AbilityKey = 'webrtc' | 'secureKeys' | 'indexedDb' | 'workers' | 'webAssembly' | 'webGpu';

export interface Ability {
  key: AbilityKey;
  ok: boolean;
  /** One plain sentence: what this device does with it, or without it. */
  text: string;
}

/** What the checks look at: a page's globalThis, or a unit test's stand-in. */
export interface AbilityScope {
  RTCPeerConnection?: unknown;
  crypto?: { subtle?: Pick<SubtleCrypto, 'generateKey'> };
  indexedDB?: unknown;
  Worker?: unknown;
  WebAssembly?: unknown;
  navigator?: { gpu?: unknown };
  isSecureContext?: boolean;
}

/** True where this page can open WebRTC links (RTCPeerConnection exists). */
export function hasWebRtc(scope: AbilityScope = globalThis as AbilityScope): boolean {
  return typeof scope.RTCPeerConnection === 'function';
}

/**
 * Whether secure runs can make their keys here: ECDH on P-256 through crypto.subtle, tried
 * for real (an engine may list the algorithm and refuse the curve). The refusal's message is
 * handed back for the page's console.
 */
export async function checkSecureKeys(scope: AbilityScope = globalThis as AbilityScope): Promise<{ ok: boolean; why: string | null }> {
  const subtle = scope.crypto?.subtle;
  if (!subtle) {
    const why = scope.isSecureContext === false ? 'crypto.subtle is hidden on a page that is not secure' : 'crypto.subtle is missing';
    return { ok: false, why };
  }
  try {
    await subtle.generateKey({ name: 'ECDH', namedCurve: 'P-256' }, false, ['deriveBits']);
    return { ok: true, why: null };
  } catch (err) {
    return { ok: false, why: `ECDH P-256 keys were refused: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/** What the page says of each ability: with it, and without it. */
const SENTENCES: Record<AbilityKey, { yes: string; no: string }> = {
  webrtc: {
    yes: 'Talks to classmates directly (WebRTC), through the teacher’s computer where the network blocks that.',
    no: 'This browser has no WebRTC, so every message to classmates goes through the teacher’s computer. It still trains, a little slower.',
  },
  secureKeys: {
    yes: 'Can take part in secure runs, which hide each student’s update.',
    no: 'Cannot make the keys a secure run needs, so it cannot take part in one: in a secure run this tab waits.',
  },
  indexedDb: {
    yes: 'Can keep checkpoints and your own examples in this browser.',
    no: 'Cannot store anything in this browser (a private window?): checkpoints and your own examples are not kept here.',
  },
  workers: {
    yes: 'Does the maths in a thread of its own, so the page stays responsive.',
    no: 'Does the maths on the page itself, which may make it sluggish.',
  },
  webAssembly: {
    yes: 'Has WebAssembly, the fast fallback when there is no GPU.',
    no: 'Has no WebAssembly: without a GPU it trains on the slowest backend.',
  },
  webGpu: {
    yes: 'Offers WebGPU, the fastest way to use the graphics card.',
    no: 'Offers no WebGPU here, so it trains on a slower backend (WebGL, WebAssembly or the CPU), named below once it is chosen.',
  },
};

const isObject = (v: unknown): boolean => typeof v === 'object' && v !== null;

/** Every ability, and why secure keys were refused (null when they were not). */
export interface Detected {
  abilities: Ability[];
  secureKeysWhy: string | null;
}

/** Every ability, in the order the page lists them. */
export async function detectAbilities(scope: AbilityScope = globalThis as AbilityScope): Promise<Detected> {
  const keys = await checkSecureKeys(scope);
  const found: Record<AbilityKey, boolean> = {
    webrtc: hasWebRtc(scope),
    secureKeys: keys.ok,
    indexedDb: isObject(scope.indexedDB),
    workers: typeof scope.Worker === 'function',
    webAssembly: isObject(scope.WebAssembly),
    webGpu: scope.navigator?.gpu !== undefined,
  };
  const keysInOrder = Object.keys(SENTENCES) as AbilityKey[];
  const abilities = keysInOrder.map((key) => ({ key, ok: found[key], text: SENTENCES[key][found[key] ? 'yes' : 'no'] }));
  return { abilities, secureKeysWhy: keys.why };
}

/** Abilities whose absence changes how this tab takes part: the page opens its list for them. */
export const NOTABLE_ABILITIES: readonly AbilityKey[] = ['webrtc', 'secureKeys'];

/**
 * Fills `container` with the list (each item marked data-ability and data-ok for tests and
 * styles), opened when a notable ability is missing.
 */
export function showAbilities(container: HTMLDetailsElement, abilities: readonly Ability[]): void {
  const summary = document.createElement('summary');
  const missing = abilities.filter((a) => !a.ok);
  const things = `${missing.length} thing${missing.length === 1 ? '' : 's'}`;
  const all = 'This device can do everything the class asks.';
  summary.textContent = missing.length === 0 ? all : `What this device can do (${things} it cannot)`;
  const list = document.createElement('ul');
  for (const a of abilities) {
    const item = document.createElement('li');
    item.textContent = a.text;
    item.dataset.ability = a.key;
    item.dataset.ok = String(a.ok);
    list.append(item);
  }
  container.replaceChildren(summary, list);
  container.open = missing.some((a) => NOTABLE_ABILITIES.includes(a.key));
  container.hidden = false;
}
