/**
 * A Node worker's own examples (`--data DIR`): a folder per class, each holding PNG files.
 * Every image goes through the digit pad's preprocessing (shared/data/digit-preprocess.ts):
 * dark strokes on a light or transparent background, scaled into MNIST's 20 × 20 box and
 * centred by mass, so a photo of a drawing and a pad drawing meet the model alike.
 *
 * A file that cannot be read is named in the result's errors and the rest still load.
 * The store's key is a hash of the folder's list of files: the same folder is the same
 * device to a resumed run, and a changed folder is a new one (own-examples.ts).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { PNG } from 'pngjs';
import { inkFromRgba, preprocessDigit } from '../shared/data/digit-preprocess';
import { MemoryOwnExamples } from '../shared/training/own-examples';
import { classLabelSchema } from '../shared/protocol';
import { mixSeed } from '../shared/util/random';

export interface OwnFolder {
  store: MemoryOwnExamples;
  /** One line per file or folder that was skipped, naming it and why. */
  errors: string[];
}

/** Reads `dir`: its subfolders are the classes, their PNG files the examples, in name order. */
export function readOwnFolder(dir: string): OwnFolder {
  const errors: string[] = [];
  const examples: Array<{ label: string; pixels: Float32Array; name: string }> = [];
  const classes = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  for (const folder of classes) {
    const label = classLabelSchema.safeParse(folder);
    if (!label.success || label.data !== folder) {
      errors.push(`${path.join(dir, folder)}: not a class name (1 to 24 characters, no control characters or surrounding spaces); skipped`);
      continue;
    }
    for (const file of readdirSync(path.join(dir, folder)).sort()) {
      const where = path.join(dir, folder, file);
      if (!file.toLowerCase().endsWith('.png') || !statSync(where).isFile()) {
        errors.push(`${where}: not a .png file; skipped`);
        continue;
      }
      try {
        const png = PNG.sync.read(readFileSync(where));
        const pixels = preprocessDigit(inkFromRgba({ data: new Uint8ClampedArray(png.data.buffer, png.data.byteOffset, png.data.length), width: png.width, height: png.height }));
        if (!pixels) {
          errors.push(`${where}: no ink (dark strokes on a light or transparent background); skipped`);
          continue;
        }
        examples.push({ label: folder, pixels, name: `${folder}/${file}` });
      } catch (err) {
        errors.push(`${where}: not a readable PNG (${(err as Error).message}); skipped`);
      }
    }
  }
  let key = 0x9e3779b9;
  for (const e of examples) for (let i = 0; i < e.name.length; i++) key = mixSeed(key, e.name.charCodeAt(i));
  // Never 0: a rank with no store says 0.
  const store = new MemoryOwnExamples(key === 0 ? 1 : key);
  for (const e of examples) store.add(e.label, e.pixels);
  return { store, errors };
}
