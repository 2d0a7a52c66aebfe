/**
 * The server's checkpoint store: DATA_DIR/rooms/<room>/checkpoints/<id>/ holding the five
 * files of shared/checkpoint.ts. Each checkpoint is written atomically (temp folder, fsync
 * of every file and of the folders, rename), so a crash at any point leaves either the new
 * checkpoint complete or the previous ones untouched. The file system is a parameter, so
 * tests can make any step fail.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as nodeFs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { WebringError } from '../shared/protocol/errors';
import {
  CHECKPOINT_FILES,
  checkpointIdSchema,
  checkpointMetadataSchema,
  optimizerSpecsSchema,
  LATEST_CHECKPOINT,
  type CheckpointFile,
  type CheckpointInfo,
  type CheckpointMetadata,
} from '../shared/checkpoints/checkpoint';
import { roomNameSchema } from '../shared/protocol';

export type StoreFs = Pick<typeof nodeFs, 'mkdir' | 'open' | 'rename' | 'rm' | 'readdir' | 'readFile' | 'stat'>;

const TEMP_PREFIX = '.tmp-';
/** A temp folder older than this belongs to a crashed or abandoned write. */
const STALE_TEMP_MS = 10 * 60_000;

export interface CheckpointUpload {
  modelJson: Buffer;
  weights: Buffer;
  optimizerSpecs: Buffer;
  optimizerData: Buffer;
  metadata: Buffer;
}

interface StoredCheckpoint {
  info: CheckpointInfo;
  dir: string;
}

/** One tensor of a weights file: float32 and int32 only, never quantized (what our models write). */
const tensorSpecSchema = z.object({
  name: z.string().max(200),
  shape: z.array(z.number().int().min(0)).max(8),
  dtype: z.enum(['float32', 'int32']),
  quantization: z.undefined().optional(),
});
/** model.json's weights manifest: every group is the weights file beside it, nothing elsewhere. */
const weightsManifestSchema = z
  .array(
    z.object({
      paths: z.array(z.enum([CHECKPOINT_FILES.weights, `./${CHECKPOINT_FILES.weights}`])).length(1),
      weights: z.array(tensorSpecSchema).max(1000),
    }),
  )
  .min(1)
  .max(16);

/** Bytes the tensors take in their file (4 per element for float32 and int32). */
const specBytes = (specs: Array<{ shape: number[] }>): number => specs.reduce((sum, s) => sum + 4 * s.shape.reduce((n, d) => n * d, 1), 0);

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function parseJson(bytes: Buffer, what: string): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new WebringError('ERR_BAD_REQUEST', `${what} is not valid JSON`, what);
  }
}

export class CheckpointStore {
  private readonly root: string;

  constructor(
    dataDir: string,
    private readonly fs: StoreFs = nodeFs,
  ) {
    this.root = path.resolve(dataDir, 'rooms');
  }

  /** The checkpoints folder of a room; the name is validated and the result must stay under DATA_DIR. */
  roomDir(room: string): string {
    const name = roomNameSchema.safeParse(room);
    if (!name.success) throw new WebringError('ERR_BAD_REQUEST', 'invalid room name', 'room');
    return this.inside(path.join(this.root, name.data, 'checkpoints'));
  }

  /**
   * Validates and writes one checkpoint, then deletes the oldest beyond `maxToKeep`.
   * Nothing is kept when any check fails.
   */
  async write(room: string, upload: CheckpointUpload, writer: string, maxToKeep: number): Promise<CheckpointInfo> {
    const dir = this.roomDir(room);
    const metadata = checkpointMetadataSchema.safeParse(parseJson(upload.metadata, CHECKPOINT_FILES.metadata));
    if (!metadata.success) {
      const issue = metadata.error.issues[0];
      throw new WebringError('ERR_BAD_REQUEST', `metadata.json: ${issue?.path.join('.')}: ${issue?.message}`, 'metadata');
    }
    const meta: CheckpointMetadata = metadata.data;
    if (meta.room !== room) throw new WebringError('ERR_BAD_REQUEST', 'metadata.json names another room', 'metadata.room');
    if (sha256(upload.weights) !== meta.weightsSha256) {
      throw new WebringError('ERR_BAD_REQUEST', 'model.weights.bin does not match weightsSha256 in metadata.json', 'weightsSha256');
    }
    if (sha256(upload.optimizerData) !== meta.optimizerSha256) {
      throw new WebringError('ERR_BAD_REQUEST', 'optimizer.bin does not match optimizerSha256 in metadata.json', 'optimizerSha256');
    }
    const model = parseJson(upload.modelJson, CHECKPOINT_FILES.model) as { modelTopology?: unknown; weightsManifest?: unknown };
    if (typeof model !== 'object' || model === null || !model.modelTopology || !Array.isArray(model.weightsManifest)) {
      throw new WebringError('ERR_BAD_REQUEST', 'model.json is not a TensorFlow.js layers model', 'model.json');
    }
    // A manifest that does not describe the weights file exactly would store a checkpoint
    // that no replica and no tf.loadLayersModel can load (found by test/server/abuse.test.ts).
    const manifest = weightsManifestSchema.safeParse(model.weightsManifest);
    if (!manifest.success) {
      throw new WebringError('ERR_BAD_REQUEST', 'model.json: the weights manifest must list float32/int32 tensors in model.weights.bin', 'model.json');
    }
    if (specBytes(manifest.data.flatMap((g) => g.weights)) !== upload.weights.byteLength) {
      throw new WebringError('ERR_BAD_REQUEST', 'model.weights.bin is not the size its manifest in model.json describes', 'model.weights.bin');
    }
    const optimizerSpecs = optimizerSpecsSchema.safeParse(parseJson(upload.optimizerSpecs, CHECKPOINT_FILES.optimizerSpecs));
    if (!optimizerSpecs.success) {
      throw new WebringError('ERR_BAD_REQUEST', 'optimizer.json is not a valid optimizer state description', 'optimizer.json');
    }
    if (specBytes(optimizerSpecs.data.weightSpecs) !== upload.optimizerData.byteLength) {
      throw new WebringError('ERR_BAD_REQUEST', 'optimizer.bin is not the size optimizer.json describes', 'optimizer.bin');
    }

    const id = `ckpt-${String(meta.step).padStart(10, '0')}-${randomBytes(3).toString('hex')}`;
    const finalDir = this.inside(path.join(dir, id));
    const tempDir = this.inside(path.join(dir, `${TEMP_PREFIX}${id}`));
    const files: Array<[CheckpointFile, Buffer]> = [
      [CHECKPOINT_FILES.model, upload.modelJson],
      [CHECKPOINT_FILES.weights, upload.weights],
      [CHECKPOINT_FILES.optimizerSpecs, upload.optimizerSpecs],
      [CHECKPOINT_FILES.optimizerData, upload.optimizerData],
      [CHECKPOINT_FILES.metadata, Buffer.from(JSON.stringify({ ...meta, writer }, null, 2))],
    ];
    await this.fs.mkdir(tempDir, { recursive: true });
    try {
      for (const [name, bytes] of files) await this.writeDurably(path.join(tempDir, name), bytes);
      await this.syncDir(tempDir);
      await this.fs.rename(tempDir, finalDir);
      await this.syncDir(dir);
    } catch (err) {
      await this.fs.rm(tempDir, { recursive: true, force: true });
      throw err;
    }
    await this.prune(room, maxToKeep);
    const bytes = files.reduce((sum, [, b]) => sum + b.byteLength, 0);
    return { id, step: meta.step, epoch: meta.epoch, createdAt: meta.createdAt, bytes, writer, weightsHash: meta.weightsHash, classes: meta.config.classes };
  }

  /** Complete checkpoints, newest first; temp folders and unreadable folders are skipped. */
  async list(room: string): Promise<CheckpointInfo[]> {
    return (await this.scan(room)).map((c) => c.info);
  }

  /** The folder of checkpoint `id` (or the newest for 'latest'), or null. */
  async resolve(room: string, id: string): Promise<{ id: string; dir: string } | null> {
    if (id === LATEST_CHECKPOINT) {
      const newest = (await this.scan(room))[0];
      return newest ? { id: newest.info.id, dir: newest.dir } : null;
    }
    if (!checkpointIdSchema.safeParse(id).success) throw new WebringError('ERR_BAD_REQUEST', 'invalid checkpoint id', 'id');
    const dir = this.inside(path.join(this.roomDir(room), id));
    try {
      await this.fs.stat(path.join(dir, CHECKPOINT_FILES.metadata));
      return { id, dir };
    } catch (err) {
      // Only a missing file means "no such checkpoint". Anything else (EACCES, ENOTDIR, EIO)
      // is a broken data directory, which an operator must hear about, not a 404.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw new WebringError('ERR_INTERNAL', `cannot read checkpoint ${id} of room ${room}: ${(err as Error).message}`);
    }
  }

  async metadata(room: string, id: string): Promise<{ meta: CheckpointMetadata; writer: string } | null> {
    const found = await this.resolve(room, id);
    return found ? this.readMetadata(found.dir) : null;
  }

  /** Removes temp folders left by a crash; run at start-up. */
  async removeStaleTemps(room: string, now = Date.now()): Promise<number> {
    const dir = this.roomDir(room);
    let removed = 0;
    for (const entry of await this.entries(dir)) {
      if (!entry.startsWith(TEMP_PREFIX)) continue;
      const st = await this.fs.stat(path.join(dir, entry));
      if (now - st.mtimeMs < STALE_TEMP_MS) continue;
      await this.fs.rm(path.join(dir, entry), { recursive: true, force: true });
      removed++;
    }
    return removed;
  }

  private async prune(room: string, maxToKeep: number): Promise<void> {
    const all = await this.scan(room);
    for (const old of all.slice(maxToKeep)) await this.fs.rm(old.dir, { recursive: true, force: true });
  }

  private async scan(room: string): Promise<StoredCheckpoint[]> {
    const dir = this.roomDir(room);
    const found: StoredCheckpoint[] = [];
    for (const entry of await this.entries(dir)) {
      if (!checkpointIdSchema.safeParse(entry).success) continue;
      const cdir = path.join(dir, entry);
      try {
        const { meta, writer } = await this.readMetadata(cdir);
        let bytes = 0;
        for (const name of Object.values(CHECKPOINT_FILES)) bytes += (await this.fs.stat(path.join(cdir, name))).size;
        found.push({ dir: cdir, info: { id: entry, step: meta.step, epoch: meta.epoch, createdAt: meta.createdAt, bytes, writer, weightsHash: meta.weightsHash, classes: meta.config.classes } });
      } catch (err) {
        console.warn(`[webring] skipping unreadable checkpoint ${cdir}: ${(err as Error).message}`);
      }
    }
    return found.sort((a, b) => b.info.step - a.info.step || b.info.createdAt.localeCompare(a.info.createdAt));
  }

  /** The stored metadata.json is the uploaded one plus the server's `writer`. */
  private async readMetadata(dir: string): Promise<{ meta: CheckpointMetadata; writer: string }> {
    const raw = JSON.parse(await this.fs.readFile(path.join(dir, CHECKPOINT_FILES.metadata), 'utf8')) as Record<string, unknown>;
    const { writer, ...uploaded } = raw;
    return { meta: checkpointMetadataSchema.parse(uploaded), writer: typeof writer === 'string' ? writer : '' };
  }

  private async entries(dir: string): Promise<string[]> {
    try {
      return await this.fs.readdir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }

  private async writeDurably(file: string, bytes: Buffer): Promise<void> {
    const handle = await this.fs.open(file, 'w');
    try {
      await handle.writeFile(bytes);
      await handle.sync();
    } finally {
      await handle.close();
    }
  }

  /** fsync of a folder makes the rename itself durable (POSIX). */
  private async syncDir(dir: string): Promise<void> {
    const handle = await this.fs.open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }

  /** Defence in depth: whatever the validation, no path leaves DATA_DIR/rooms. */
  private inside(p: string): string {
    const resolved = path.resolve(p);
    if (resolved !== this.root && !resolved.startsWith(this.root + path.sep)) {
      throw new WebringError('ERR_BAD_REQUEST', 'path outside the data directory');
    }
    return resolved;
  }
}
