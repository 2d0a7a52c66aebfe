/**
 * A Node worker's own examples (`--data DIR`, node-worker/own-folder.ts): a folder per class
 * of PNGs, prepared like the digit pad's drawings; what cannot be read is named and skipped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { deflateSync } from 'node:zlib';
import os from 'node:os';
import path from 'node:path';
import { PNG } from 'pngjs';
import { MAX_PNG_FILE_BYTES, MAX_PNG_SIDE_PX, readOwnFolder } from '../../shared/tasks/mnist/own-folder';
import { countByLabel } from '../../shared/data/own-examples';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';

/** A 40×30 white PNG with a dark bar: a drawing, not yet MNIST-shaped. */
function drawing(ink: boolean): Buffer {
  const png = new PNG({ width: 40, height: 30 });
  for (let y = 0; y < 30; y++) {
    for (let x = 0; x < 40; x++) {
      const dark = ink && x >= 18 && x < 22 && y >= 5 && y < 25;
      png.data.set(dark ? [20, 20, 20, 255] : [255, 255, 255, 255], (y * 40 + x) * 4);
    }
  }
  return PNG.sync.write(png);
}

test('a folder per class loads as MNIST-shaped examples; bad files and folders are named and skipped; the key follows the file list', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'webring-folder-'));
  try {
    mkdirSync(path.join(dir, 'cat'));
    mkdirSync(path.join(dir, 'sun'));
    mkdirSync(path.join(dir, 'x'.repeat(30)));
    writeFileSync(path.join(dir, 'cat', 'a.png'), drawing(true));
    writeFileSync(path.join(dir, 'cat', 'b.png'), drawing(true));
    writeFileSync(path.join(dir, 'sun', 'a.png'), drawing(true));
    writeFileSync(path.join(dir, 'sun', 'blank.png'), drawing(false));
    writeFileSync(path.join(dir, 'sun', 'broken.png'), Buffer.from('not a png'));
    writeFileSync(path.join(dir, 'sun', 'notes.txt'), 'hello');
    writeFileSync(path.join(dir, 'x'.repeat(30), 'a.png'), drawing(true));

    const { store, errors } = readOwnFolder(dir);
    assert.deepEqual(countByLabel(store), { cat: 2, sun: 1 });
    assert.ok(store.examples.every((e) => e.pixels!.length === MNIST_PIXELS && Math.max(...e.pixels!) > 0.5), 'each example is an inked 28×28 image');
    const named = (file: string, why: RegExp) => assert.ok(errors.some((e) => e.startsWith(path.join(dir, file)) && why.test(e)), `${file}: ${errors.join('\n')}`);
    named('sun/blank.png', /no ink/);
    named('sun/broken.png', /not a readable PNG/);
    named('sun/notes.txt', /not a \.png/);
    named('x'.repeat(30), /not a class name/);
    assert.equal(errors.length, 4);

    assert.equal(readOwnFolder(dir).store.key, store.key, 'the same folder is the same store');
    writeFileSync(path.join(dir, 'cat', 'c.png'), drawing(true));
    assert.notEqual(readOwnFolder(dir).store.key, store.key, 'a changed folder is a new store');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** CRC-32 of a PNG chunk's type and data (ISO 3309, as the PNG spec gives it). */
function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  body.copy(out, 4);
  out.writeUInt32BE(crc32(body), 8 + data.length);
  return out;
}

/**
 * A valid white PNG of `width` × `height`, 1 bit a pixel: an 8000 × 8000 one is a few KB on
 * disk and 256 MB once decoded to RGBA (pngjs's writer would need those 256 MB to make it).
 */
function blankPng(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([1, 0, 0, 0, 0], 8); // bit depth 1, greyscale, deflate, no filter, no interlace
  const row = Buffer.alloc(1 + Math.ceil(width / 8), 0xff);
  row[0] = 0; // filter: none
  const raw = Buffer.alloc(row.length * height);
  for (let y = 0; y < height; y++) row.copy(raw, y * row.length);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw, { level: 9 })), chunk('IEND', Buffer.alloc(0))]);
}

test('a dangling link, an 8000 × 8000 PNG, a file over the size cap and a fake header are named and skipped before any decoding; the rest load', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'webring-folder-'));
  try {
    mkdirSync(path.join(dir, 'cat'));
    writeFileSync(path.join(dir, 'cat', 'a.png'), drawing(true));
    symlinkSync(path.join(dir, 'nowhere.png'), path.join(dir, 'cat', 'b-dangling.png'));
    symlinkSync(path.join(dir, 'cat', 'c-loop.png'), path.join(dir, 'cat', 'c-loop.png'));
    const huge = blankPng(8_000, 8_000);
    assert.ok(huge.length < 100_000, `the 8000 × 8000 PNG is small on disk (${huge.length} bytes)`);
    writeFileSync(path.join(dir, 'cat', 'd-huge.png'), huge);
    writeFileSync(path.join(dir, 'cat', 'e-wide.png'), blankPng(MAX_PNG_SIDE_PX + 1, 1));
    // A file past the size cap: sparse, so the test writes only its header.
    writeFileSync(path.join(dir, 'cat', 'f-big.png'), blankPng(28, 28));
    truncateSync(path.join(dir, 'cat', 'f-big.png'), MAX_PNG_FILE_BYTES + 1);
    writeFileSync(path.join(dir, 'cat', 'g-fake.png'), Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47]), Buffer.alloc(40)]));
    writeFileSync(path.join(dir, 'cat', 'h.png'), drawing(true));
    // The largest PNG allowed still decodes (it is blank, so it is skipped for having no ink).
    writeFileSync(path.join(dir, 'cat', 'i-largest.png'), blankPng(MAX_PNG_SIDE_PX, MAX_PNG_SIDE_PX));

    const { store, errors } = readOwnFolder(dir);
    assert.deepEqual(countByLabel(store), { cat: 2 }, 'the two good drawings load');
    const named = (file: string, why: RegExp) => assert.ok(errors.some((e) => e.startsWith(path.join(dir, 'cat', file)) && why.test(e)), `${file}: ${errors.join('\n')}`);
    named('b-dangling.png', /cannot be opened \(ENOENT/);
    named('c-loop.png', /cannot be opened \(ELOOP/);
    named('d-huge.png', /8000 × 8000 pixels, larger than/);
    named('e-wide.png', new RegExp(`${MAX_PNG_SIDE_PX + 1} × 1 pixels, larger than`));
    named('f-big.png', /bytes, more than the/);
    named('g-fake.png', /not a readable PNG/);
    named('i-largest.png', /no ink/);
    assert.equal(errors.length, 7, errors.join('\n'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
