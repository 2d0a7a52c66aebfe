import { test } from 'node:test';
import assert from 'node:assert/strict';
import { digitImage, mnistSubset } from '../support/mnist';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import { inkFromRgba, preprocessDigit, type InkImage } from '../../shared/tasks/mnist/digit-preprocess';

// MNIST's numbers, written out rather than imported, so a wrong constant fails the test.
const MNIST_SIZE_PX = 28;
const MNIST_BOX_PX = 20;
const PAD_PX = 280;

function blank(width = PAD_PX, height = width): InkImage {
  return { data: new Float32Array(width * height), width, height };
}

function fillRect(img: InkImage, x: number, y: number, w: number, h: number, value = 1): InkImage {
  for (let r = y; r < y + h; r++) img.data.fill(value, r * img.width + x, r * img.width + x + w);
  return img;
}

/** Centre of mass in pixel-index coordinates, computed here independently of the module. */
function centreOfMass(pixels: Float32Array): { x: number; y: number; mass: number } {
  let mass = 0;
  let x = 0;
  let y = 0;
  pixels.forEach((v, i) => {
    mass += v;
    x += v * (i % MNIST_SIZE_PX);
    y += v * Math.floor(i / MNIST_SIZE_PX);
  });
  return { x: x / mass, y: y / mass, mass };
}

/** Bounding box of the pixels at least half inked, the way the module's box is defined. */
function box(pixels: Float32Array): { width: number; height: number } {
  let x0 = Infinity;
  let x1 = -Infinity;
  let y0 = Infinity;
  let y1 = -Infinity;
  pixels.forEach((v, i) => {
    if (v < 0.5) return;
    const x = i % MNIST_SIZE_PX;
    const y = Math.floor(i / MNIST_SIZE_PX);
    x0 = Math.min(x0, x);
    x1 = Math.max(x1, x);
    y0 = Math.min(y0, y);
    y1 = Math.max(y1, y);
  });
  return { width: x1 - x0 + 1, height: y1 - y0 + 1 };
}

function sum(values: Float32Array): number {
  let s = 0;
  for (const v of values) s += v;
  return s;
}

function assertCentred(out: Float32Array): void {
  const c = centreOfMass(out);
  assert.ok(Math.abs(c.x - 14) <= 0.5 + 1e-9 && Math.abs(c.y - 14) <= 0.5 + 1e-9, `centre of mass at (${c.x}, ${c.y})`);
}

test('a small square in a corner is scaled to 20 px and centred by its centre of mass', () => {
  const out = preprocessDigit(fillRect(blank(), 6, 9, 30, 30));
  assert.ok(out);
  assert.equal(out.length, MNIST_SIZE_PX * MNIST_SIZE_PX);
  assertCentred(out);
  assert.deepEqual(box(out), { width: MNIST_BOX_PX, height: MNIST_BOX_PX });
  assert.ok(Math.max(...out) <= 1 && Math.min(...out) >= 0);
});

test('a tall thin stroke like a "1" keeps its aspect ratio', () => {
  // 16 × 200 px: scaled by 20 / 200, so 20 px tall and 1.6 px wide.
  const out = preprocessDigit(fillRect(blank(), 220, 60, 16, 200));
  assert.ok(out);
  assertCentred(out);
  const b = box(out);
  assert.equal(b.height, MNIST_BOX_PX);
  assert.ok(b.width >= 1 && b.width <= 2, `width ${b.width}`);
  // The ink per row measures the width to sub-pixel precision.
  const width = sum(out) / MNIST_BOX_PX;
  assert.ok(Math.abs(width - 1.6) < 0.02, `mean stroke width ${width} px`);
});

test('area averaging conserves the ink: total ink scales by the area factor', () => {
  // A ring, an anti-aliased disc and a thin diagonal, 154 × 150 px (the diagonal's ends
  // stick out 2 px left and right of its 150 rows): scale 20 / 154.
  const img = blank();
  for (let y = 0; y < PAD_PX; y++) {
    for (let x = 0; x < PAD_PX; x++) {
      const d = Math.hypot(x + 0.5 - 140, y + 0.5 - 140);
      const ring = Math.max(0, Math.min(1, 8 - Math.abs(d - 60)));
      const dot = Math.max(0, Math.min(1, 15.5 - Math.hypot(x + 0.5 - 140, y + 0.5 - 140)));
      const diagonal = y >= 65 && y < 215 && Math.abs(x - y) < 3 ? 1 : 0;
      img.data[y * PAD_PX + x] = Math.max(ring, dot, diagonal);
    }
  }
  const out = preprocessDigit(img);
  assert.ok(out);
  const ratio = sum(out) / (sum(img.data) * (MNIST_BOX_PX / 154) ** 2);
  assert.ok(Math.abs(ratio - 1) < 0.02, `ink ratio ${ratio}`);
  // Area averaging, not nearest-neighbour: the 6 px diagonal becomes grey, not on/off.
  const grey = out.filter((v) => v > 0.05 && v < 0.95).length;
  assert.ok(grey > 20, `${grey} grey pixels`);
});

test('an empty or only faintly smudged pad is no digit', () => {
  assert.equal(preprocessDigit(blank()), null);
  assert.equal(preprocessDigit(fillRect(blank(), 0, 0, PAD_PX, PAD_PX, 0.2)), null);
});

test('ink is read from alpha on a transparent pad and from darkness on white paper', () => {
  const rgba = new Uint8ClampedArray([
    0, 0, 0, 0, // transparent
    0, 0, 0, 255, // black stroke
    0, 0, 0, 128, // anti-aliased edge of a black stroke
    255, 255, 255, 255, // white paper
    128, 128, 128, 255, // grey on white
  ]);
  const ink = inkFromRgba({ data: rgba, width: 5, height: 1 });
  assert.deepEqual(Array.from(ink.data, (v) => Math.round(v * 100) / 100), [0, 1, 0.5, 0, 0.5]);
  assert.throws(() => inkFromRgba({ data: rgba, width: 2, height: 2 }), RangeError);
});

/** Bilinear ×factor upsampling of a 28 × 28 digit into a larger canvas at (ox, oy). */
function upsample(digit: Float32Array, factor: number, canvasPx: number, ox: number, oy: number): InkImage {
  const img = blank(canvasPx);
  const at = (x: number, y: number) => (x < 0 || y < 0 || x >= MNIST_SIZE_PX || y >= MNIST_SIZE_PX ? 0 : digit[y * MNIST_SIZE_PX + x]!);
  for (let y = 0; y < MNIST_SIZE_PX * factor; y++) {
    const sy = (y + 0.5) / factor - 0.5;
    const y0 = Math.floor(sy);
    const fy = sy - y0;
    for (let x = 0; x < MNIST_SIZE_PX * factor; x++) {
      const sx = (x + 0.5) / factor - 0.5;
      const x0 = Math.floor(sx);
      const fx = sx - x0;
      img.data[(y + oy) * canvasPx + x + ox] =
        (1 - fy) * ((1 - fx) * at(x0, y0) + fx * at(x0 + 1, y0)) + fy * ((1 - fx) * at(x0, y0 + 1) + fx * at(x0 + 1, y0 + 1));
    }
  }
  return img;
}

/** Mean absolute pixel difference, with b shifted by (dx, dy) whole pixels. */
function meanAbsDiff(a: Float32Array, b: Float32Array, dx = 0, dy = 0): number {
  let total = 0;
  for (let y = 0; y < MNIST_SIZE_PX; y++) {
    for (let x = 0; x < MNIST_SIZE_PX; x++) {
      const bx = x + dx;
      const by = y + dy;
      const v = bx < 0 || by < 0 || bx >= MNIST_SIZE_PX || by >= MNIST_SIZE_PX ? 0 : b[by * MNIST_SIZE_PX + bx]!;
      total += Math.abs(a[y * MNIST_SIZE_PX + x]! - v);
    }
  }
  return total / MNIST_PIXELS;
}

test('real MNIST digits, enlarged ×10 and moved off-centre, come back as themselves', () => {
  // Three checks, from strict to robust, none needing a trained classifier:
  // - on average the pixels match closely (mean |Δ| < 0.05; measured 0.029 over 1,000 digits,
  //   while two different digits differ by about 0.15);
  // - allowing for MNIST's own ±1 px rounding of the centre of mass, every digit's shape
  //   matches (|Δ| < 0.07; the worst of 1,000 digits is 0.061);
  // - each result is nearer to its own original than to any of the other 19 digits.
  const ds = mnistSubset();
  const count = 20;
  const canvasPx = 400;
  const originals: Float32Array[] = [];
  const results: Float32Array[] = [];
  for (let i = 0; i < count; i++) {
    // The held-out digits: the first 20 of the test split.
    const original = digitImage(ds.test, i);
    // Offsets up to 119 px put the 280 px digit anywhere in the 400 px canvas.
    const out = preprocessDigit(upsample(original, 10, canvasPx, (i * 37) % 120, (i * 53) % 120));
    assert.ok(out, `digit ${i} vanished`);
    assertCentred(out);
    originals.push(original);
    results.push(out);
  }
  const plain = results.map((out, i) => meanAbsDiff(out, originals[i]!));
  const mean = plain.reduce((a, b) => a + b) / count;
  assert.ok(mean < 0.05, `mean |Δ| ${mean}`);
  results.forEach((out, i) => {
    let best = Infinity;
    for (let dy = -1; dy <= 1; dy++) for (let dx = -1; dx <= 1; dx++) best = Math.min(best, meanAbsDiff(out, originals[i]!, dx, dy));
    assert.ok(best < 0.07, `digit ${i} (a ${ds.test.labels[i]}): |Δ| ${best} even at the best ±1 px alignment`);
    const nearest = originals.reduce((bestJ, o, j) => (meanAbsDiff(out, o) < meanAbsDiff(out, originals[bestJ]!) ? j : bestJ), 0);
    assert.equal(nearest, i, `digit ${i} looks more like digit ${nearest}`);
  });
});

test('preprocessing a full pad takes well under a frame', () => {
  const img = fillRect(fillRect(blank(), 40, 40, 200, 24), 200, 40, 24, 220);
  preprocessDigit(img);
  const runs = 50;
  const start = performance.now();
  for (let i = 0; i < runs; i++) preprocessDigit(img);
  const ms = (performance.now() - start) / runs;
  assert.ok(ms < 8, `${ms.toFixed(2)} ms per drawing`);
});
