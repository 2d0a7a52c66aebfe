/**
 * A Node worker's own examples (`--data DIR`): a folder per class, each holding PNG files.
 * Every image goes through the digit pad's preprocessing (digit-preprocess.ts):
 * dark strokes on a light or transparent background, scaled into MNIST's 20 × 20 box and
 * centred by mass, so a photo of a drawing and a pad drawing meet the model alike.
 *
 * A file that cannot be read is named in the result's errors and the rest still load: a
 * dangling link, a file too large, a PNG wider or taller than MAX_PNG_SIDE_PX (its header is
 * read before anything is decoded), one that does not decode, one without ink.
 * The store's key is a hash of the folder's list of files: the same folder is the same
 * device to a resumed run, and a changed folder is a new one (own-examples.ts).
 */
import { closeSync, openSync, readdirSync, readFileSync, readSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import { PNG } from 'pngjs';
import { inkFromRgba, preprocessDigit } from './digit-preprocess';
import { MemoryOwnExamples } from '../../data/own-examples';
import { classLabelSchema } from '../../protocol';
import { mixSeed } from '../../util/random';

/**
 * The widest and tallest PNG decoded. A digit is 28 × 28; a scan or a screenshot of a drawing
 * fits in this; decoding one costs at most 16 MiB of RGBA. An 8000 × 8000 PNG of one colour
 * is 76 KB on disk and would decode into about 500 MB.
 */
export const MAX_PNG_SIDE_PX = 2_048;
/** The largest PNG file read: a 2048 × 2048 RGBA image stored without compression is 16 MiB. */
export const MAX_PNG_FILE_BYTES = 16 * 1024 * 1024 + 64 * 1024;
/** The PNG signature, then the first chunk's length and type: IHDR, whose first 8 bytes are width and height. */
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const PNG_HEADER_BYTES = 24;

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
    let files: string[];
    try {
      files = readdirSync(path.join(dir, folder)).sort();
    } catch (err) {
      errors.push(`${path.join(dir, folder)}: cannot be listed (${describe(err)}); skipped`);
      continue;
    }
    for (const file of files) {
      const where = path.join(dir, folder, file);
      if (!file.toLowerCase().endsWith('.png')) {
        errors.push(`${where}: not a .png file; skipped`);
        continue;
      }
      let stat: Stats;
      try {
        // stat follows links: a dangling one, or one that loops, fails here.
        stat = statSync(where);
      } catch (err) {
        errors.push(`${where}: cannot be opened (${describe(err)}; a link to nothing?); skipped`);
        continue;
      }
      try {
        if (!stat.isFile()) {
          errors.push(`${where}: not a .png file; skipped`);
          continue;
        }
        if (stat.size > MAX_PNG_FILE_BYTES) {
          errors.push(`${where}: ${stat.size} bytes, more than the ${MAX_PNG_FILE_BYTES} read; skipped`);
          continue;
        }
        const size = pngSize(where);
        if (size.width > MAX_PNG_SIDE_PX || size.height > MAX_PNG_SIDE_PX) {
          errors.push(`${where}: ${size.width} × ${size.height} pixels, larger than ${MAX_PNG_SIDE_PX} × ${MAX_PNG_SIDE_PX}; scale it down; skipped`);
          continue;
        }
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

/** A PNG's width and height from its IHDR chunk, read without decoding anything; throws for a file that is no PNG. */
function pngSize(file: string): { width: number; height: number } {
  const header = Buffer.alloc(PNG_HEADER_BYTES);
  const fd = openSync(file, 'r');
  let read: number;
  try {
    read = readSync(fd, header, 0, PNG_HEADER_BYTES, 0);
  } finally {
    closeSync(fd);
  }
  if (read < PNG_HEADER_BYTES || !header.subarray(0, 8).equals(PNG_SIGNATURE) || header.toString('latin1', 12, 16) !== 'IHDR') {
    throw new Error('no PNG signature and IHDR header');
  }
  return { width: header.readUInt32BE(16), height: header.readUInt32BE(20) };
}

/** An fs error's code (ENOENT, ELOOP, EACCES), or its message. */
function describe(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
}
