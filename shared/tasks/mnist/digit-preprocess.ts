/**
 * Turns a hand drawing into the 28 × 28 input the models were trained on, the way the
 * MNIST digits themselves were made (LeCun et al., "The MNIST database"): the bilevel
 * NIST digit was scaled, keeping its aspect ratio, to fit a 20 × 20 box with
 * anti-aliasing, then placed in a 28 × 28 frame so that its centre of mass sits at the
 * centre. A drawing that skips either step is classified badly even by a good model:
 * MNIST digits are never small, never in a corner, and never drawn with a 1 px line.
 *
 * Pure and DOM-free, so it runs in the page, a worker or a unit test alike.
 */

import { MNIST_ROWS } from './format';

/** Side of the MNIST frame, in output pixels. */
export const MNIST_SIZE_PX = MNIST_ROWS;
/** Longer side of the digit's bounding box after scaling, in output pixels. */
export const MNIST_BOX_PX = 20;
/**
 * Where the centre of mass lands, in pixel-index coordinates (pixel i spans [i, i + 1)
 * but is counted at i). Measured on the 10,000 digits of the `mnist-10k` subset: the mean
 * centre of mass is (14.00, 14.00) in these coordinates, so this is MNIST's convention.
 */
export const MNIST_CENTRE_PX = 14;
/**
 * Ink at or above this level (0..1) counts for the bounding box. NIST digits were
 * bilevel; thresholding an anti-aliased drawing at one half recovers that outline, so the
 * faint fringe of a stroke neither widens the box nor makes a drawing count as non-empty.
 */
export const INK_THRESHOLD = 0.5;

/** A grayscale ink image, row-major: 0 = paper, 1 = full ink. */
export interface InkImage {
  data: Float32Array;
  width: number;
  height: number;
}

/** The shape of the DOM's ImageData: RGBA, 4 bytes a pixel, row-major, not premultiplied. */
export interface RgbaImage {
  data: Uint8ClampedArray;
  width: number;
  height: number;
}

/**
 * Reads an RGBA image as ink: ink = opacity × darkness, where darkness is 1 − luminance
 * (Rec. 601 weights). Dark strokes therefore count as ink whether the paper is
 * transparent (alpha 0) or opaque white (darkness 0); the digit pad draws black strokes
 * on a transparent canvas, so there the ink is simply the alpha channel.
 */
export function inkFromRgba(image: RgbaImage): InkImage {
  const { data, width, height } = image;
  if (data.length !== width * height * 4) throw new RangeError(`RGBA data holds ${data.length} bytes, expected ${width * height * 4}`);
  const ink = new Float32Array(width * height);
  for (let i = 0, p = 0; i < ink.length; i++, p += 4) {
    const luminance = 0.299 * data[p]! + 0.587 * data[p + 1]! + 0.114 * data[p + 2]!;
    ink[i] = (data[p + 3]! / 255) * (1 - luminance / 255);
  }
  return { data: ink, width, height };
}

/**
 * Converts a drawing to a 784-value MNIST input (row-major 28 × 28, 0..1, ink = 1), or
 * returns null when no pixel reaches INK_THRESHOLD: an empty pad has no digit to classify,
 * and scaling its faint noise up to 20 px would show the model garbage.
 *
 * 1. The bounding box of the ink (pixels ≥ INK_THRESHOLD) is scaled by 20 / its longer
 *    side, with exact area averaging (every output pixel is the mean of the input area
 *    it covers), so thin strokes turn grey instead of vanishing as with nearest-neighbour,
 *    and the total ink scales exactly by the area factor.
 * 2. The scaled digit is shifted by whole pixels so that its centre of mass rounds to
 *    (14, 14), as MNIST did. The shift is limited so that no ink leaves the frame.
 */
export function preprocessDigit(ink: InkImage): Float32Array | null {
  const { data, width, height } = ink;
  if (data.length !== width * height) throw new RangeError(`ink holds ${data.length} values, expected ${width * height}`);
  const box = inkBoundingBox(ink);
  if (box === null) return null;

  const scale = MNIST_BOX_PX / Math.max(box.width, box.height);
  // The longer side fills the 20 px box exactly; the shorter one is centred in it.
  const xs = axisWeights(box.x, box.width, scale, (MNIST_BOX_PX - box.width * scale) / 2);
  const ys = axisWeights(box.y, box.height, scale, (MNIST_BOX_PX - box.height * scale) / 2);

  // Separable area averaging: rows of the box to 20 columns, then columns to 20 rows.
  const rows = new Float32Array(box.height * MNIST_BOX_PX);
  for (let r = 0; r < box.height; r++) {
    const src = (box.y + r) * width;
    for (let c = 0; c < MNIST_BOX_PX; c++) {
      let sum = 0;
      for (let k = xs.start[c]!; k < xs.start[c + 1]!; k++) sum += xs.weight[k]! * data[src + xs.index[k]!]!;
      rows[r * MNIST_BOX_PX + c] = sum;
    }
  }
  const scaled = new Float32Array(MNIST_BOX_PX * MNIST_BOX_PX);
  for (let r = 0; r < MNIST_BOX_PX; r++) {
    for (let k = ys.start[r]!; k < ys.start[r + 1]!; k++) {
      const w = ys.weight[k]!;
      const src = (ys.index[k]! - box.y) * MNIST_BOX_PX;
      for (let c = 0; c < MNIST_BOX_PX; c++) scaled[r * MNIST_BOX_PX + c]! += w * rows[src + c]!;
    }
  }

  // Centre of mass and extent of the scaled digit, in the 20 × 20 box's pixel indices.
  let mass = 0;
  let mx = 0;
  let my = 0;
  let minX = MNIST_BOX_PX;
  let maxX = -1;
  let minY = MNIST_BOX_PX;
  let maxY = -1;
  for (let r = 0; r < MNIST_BOX_PX; r++) {
    for (let c = 0; c < MNIST_BOX_PX; c++) {
      const v = Math.min(1, scaled[r * MNIST_BOX_PX + c]!);
      scaled[r * MNIST_BOX_PX + c] = v;
      if (v <= 0) continue;
      mass += v;
      mx += v * c;
      my += v * r;
      if (c < minX) minX = c;
      if (c > maxX) maxX = c;
      if (r < minY) minY = r;
      if (r > maxY) maxY = r;
    }
  }
  if (mass <= 0) return null;
  const dx = clamp(Math.round(MNIST_CENTRE_PX - mx / mass), -minX, MNIST_SIZE_PX - 1 - maxX);
  const dy = clamp(Math.round(MNIST_CENTRE_PX - my / mass), -minY, MNIST_SIZE_PX - 1 - maxY);

  const out = new Float32Array(MNIST_SIZE_PX * MNIST_SIZE_PX);
  for (let r = minY; r <= maxY; r++) {
    const dst = (r + dy) * MNIST_SIZE_PX + dx;
    out.set(scaled.subarray(r * MNIST_BOX_PX + minX, r * MNIST_BOX_PX + maxX + 1), dst + minX);
  }
  return out;
}

/** The smallest rectangle holding every pixel with ink ≥ INK_THRESHOLD, or null if none does. */
export function inkBoundingBox(ink: InkImage): { x: number; y: number; width: number; height: number } | null {
  const { data, width, height } = ink;
  let x0 = width;
  let x1 = -1;
  let y0 = height;
  let y1 = -1;
  for (let y = 0; y < height; y++) {
    const row = y * width;
    for (let x = 0; x < width; x++) {
      if (data[row + x]! < INK_THRESHOLD) continue;
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      if (y > y1) y1 = y;
    }
  }
  return x1 < 0 ? null : { x: x0, y: y0, width: x1 - x0 + 1, height: y1 - y0 + 1 };
}

/**
 * Box-filter weights along one axis. Output pixel j covers [j, j + 1); mapped back, that
 * is [start + (j − offset) / scale, start + (j + 1 − offset) / scale) of the input, and
 * each input pixel in it weighs (overlap length × scale). A fully covered output pixel's
 * weights sum to 1 (a mean); each input pixel's weights sum to `scale`.
 * Stored CSR-style: output j uses entries start[j] .. start[j + 1] − 1.
 */
function axisWeights(srcStart: number, srcLength: number, scale: number, offset: number) {
  const start = new Uint32Array(MNIST_BOX_PX + 1);
  const index: number[] = [];
  const weight: number[] = [];
  for (let j = 0; j < MNIST_BOX_PX; j++) {
    start[j] = index.length;
    const lo = Math.max(0, (j - offset) / scale);
    const hi = Math.min(srcLength, (j + 1 - offset) / scale);
    for (let i = Math.floor(lo); i < hi; i++) {
      const overlap = Math.min(hi, i + 1) - Math.max(lo, i);
      if (overlap <= 0) continue;
      index.push(srcStart + i);
      weight.push(overlap * scale);
    }
  }
  start[MNIST_BOX_PX] = index.length;
  return { start, index: Uint32Array.from(index), weight: Float64Array.from(weight) };
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, v));
}
