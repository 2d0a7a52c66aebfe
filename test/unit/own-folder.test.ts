/**
 * A Node worker's own examples (`--data DIR`, node-worker/own-folder.ts): a folder per class
 * of PNGs, prepared like the digit pad's drawings; what cannot be read is named and skipped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PNG } from 'pngjs';
import { readOwnFolder } from '../../node-worker/own-folder';
import { countByLabel } from '../../shared/training/own-examples';
import { MNIST_PIXELS } from '../../shared/data/mnist-format';

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
