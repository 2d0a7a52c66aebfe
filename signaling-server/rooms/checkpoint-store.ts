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
import { WebringError } from '../../shared/protocol/errors';
import {
  CHECKPOINT_FILES,
  checkpointIdSchema,
  checkpointMetadataSchema,
  checkpointTrustSchema,
  optimizerSpecsSchema,
  LATEST_CHECKPOINT,
  type CheckpointFile,
  type CheckpointInfo,
  type CheckpointMetadata,
  type CheckpointTrust,
  type CheckpointTrustState,
} from '../../shared/checkpoints/checkpoint';
import { roomNameSchema } from '../../shared/protocol';
import { WeightsHasher } from '../../shared/util/weights-hash';

export type StoreFs = Pick<typeof nodeFs, 'mkdir' | 'open' | 'rename' | 'rm' | 'readdir' | 'readFile' | 'stat'>;

const TEMP_PREFIX = '.tmp-';
/**
 * The server's verdict on a checkpoint (checkpoint-guard.ts), beside its five files: it may
 * change after the upload (a later report vouches), so it is not part of metadata.json.
 * Never served; a checkpoint without one (stored before it existed) counts as unvouched.
 */
export const CHECKPOINT_TRUST_FILE = 'trust.json';
const UNVOUCHED: CheckpointTrust = { state: 'unvouched', by: null };
/** Which checkpoint is `latest` and which are pruned first: vouched ones before the rest, contradicted ones last. */
const TRUST_RANK: Record<CheckpointTrustState, number> = { vouched: 2, unvouched: 1, contradicted: 0 };
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

/**
 * Decides, once an upload is valid and before anything is written, whether it may be
 * stored (it throws a coded error otherwise) and how far it is trusted; gets the id the
 * checkpoint will have.
 */
export type CheckpointAdmission = (meta: CheckpointMetadata, id: string) => Promise<{ writerName: string; trust: CheckpointTrust }>;

/** For tools and tests without a room: stored as unvouched, writer unnamed. */
const admitUnvouched: CheckpointAdmission = async () => ({ writerName: '', trust: UNVOUCHED });

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

/** The replicas' weights fingerprint (shared/util/weights-hash.ts) of a weights file. */
function weightsHashOf(weights: Buffer): string {
  // A Float32Array view needs 4-byte alignment; multer's buffers may sit anywhere in a pool.
  const aligned = weights.byteOffset % 4 === 0 ? weights : new Uint8Array(weights);
  return new WeightsHasher().update(new Float32Array(aligned.buffer, aligned.byteOffset, aligned.byteLength / 4)).digest();
}

/** Newest first within the best trust: vouched, then this run before older ones, then the higher step. */
function byTrustThenRecency(a: StoredCheckpoint, b: StoredCheckpoint): number {
  const x = a.info;
  const y = b.info;
  return TRUST_RANK[y.trust.state] - TRUST_RANK[x.trust.state] || y.run - x.run || y.step - x.step || y.createdAt.localeCompare(x.createdAt);
}

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
   * Validates and writes one checkpoint, then deletes the least trusted and oldest beyond
   * `maxToKeep` (never the one just written). `admit` may refuse it, after the checks and
   * before anything is written; it also says how far the checkpoint is trusted. Nothing is
   * kept when any check fails.
   */
  async write(room: string, upload: CheckpointUpload, writer: string, maxToKeep: number, admit: CheckpointAdmission = admitUnvouched): Promise<CheckpointInfo> {
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
    // that no replica and no tf.loadLayersModel can load (found by test/class/abuse-http.test.ts).
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
    // The hash other ranks vouch with must be the uploaded weights' own, or a chief could
    // pair the class's hash with weights of its choosing.
    if (weightsHashOf(upload.weights) !== meta.weightsHash) {
      throw new WebringError('ERR_BAD_REQUEST', 'model.weights.bin does not match weightsHash in metadata.json', 'weightsHash');
    }

    const id = `ckpt-${String(meta.step).padStart(10, '0')}-${randomBytes(3).toString('hex')}`;
    // The schema bounds the step; an id outside the pattern would never be listed or pruned.
    if (!checkpointIdSchema.safeParse(id).success) throw new WebringError('ERR_STEP_OUT_OF_RANGE', `step ${meta.step} does not fit a checkpoint id`, 'step');
    const { writerName, trust } = await admit(meta, id);
    const finalDir = this.inside(path.join(dir, id));
    const tempDir = this.inside(path.join(dir, `${TEMP_PREFIX}${id}`));
    const files: Array<[CheckpointFile, Buffer]> = [
      [CHECKPOINT_FILES.model, upload.modelJson],
      [CHECKPOINT_FILES.weights, upload.weights],
      [CHECKPOINT_FILES.optimizerSpecs, upload.optimizerSpecs],
      [CHECKPOINT_FILES.optimizerData, upload.optimizerData],
      [CHECKPOINT_FILES.metadata, Buffer.from(JSON.stringify({ ...meta, writer, writerName }, null, 2))],
    ];
    await this.fs.mkdir(tempDir, { recursive: true });
    try {
      for (const [name, bytes] of files) await this.writeDurably(path.join(tempDir, name), bytes);
      await this.writeDurably(path.join(tempDir, CHECKPOINT_TRUST_FILE), Buffer.from(JSON.stringify(trust)));
      await this.syncDir(tempDir);
      await this.fs.rename(tempDir, finalDir);
      await this.syncDir(dir);
    } catch (err) {
      await this.fs.rm(tempDir, { recursive: true, force: true });
      throw err;
    }
    await this.prune(room, maxToKeep, id);
    const bytes = files.reduce((sum, [, b]) => sum + b.byteLength, 0);
    return { id, run: meta.run, step: meta.step, epoch: meta.epoch, createdAt: meta.createdAt, bytes, writer, writerName, trust, weightsHash: meta.weightsHash, task: meta.config.task, model: meta.config.model, classes: meta.config.classes };
  }

  /**
   * Records a later verdict on checkpoint `id` (a rank vouched for it, or contradicted it).
   * A vouch is final: reports handled concurrently may arrive here in any order. A
   * checkpoint deleted meanwhile is no error: false.
   */
  async setTrust(room: string, id: string, trust: CheckpointTrust): Promise<boolean> {
    if (!checkpointIdSchema.safeParse(id).success) throw new WebringError('ERR_BAD_REQUEST', 'invalid checkpoint id', 'id');
    const dir = this.inside(path.join(this.roomDir(room), id));
    // Each write its own temp file, so two verdicts written at once never mix.
    const temp = path.join(dir, `${TEMP_PREFIX}${randomBytes(3).toString('hex')}-${CHECKPOINT_TRUST_FILE}`);
    try {
      if ((await this.readTrust(dir)).state === 'vouched') return true;
      await this.writeDurably(temp, Buffer.from(JSON.stringify(trust)));
      await this.fs.rename(temp, path.join(dir, CHECKPOINT_TRUST_FILE));
      await this.syncDir(dir);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }

  /**
   * Deletes checkpoint `id` (the teacher's Delete); `latest` then names the best one left.
   * False when there is no such checkpoint. The folder is renamed away first, so a reader
   * never lists half of it.
   */
  async remove(room: string, id: string): Promise<boolean> {
    if (!checkpointIdSchema.safeParse(id).success) throw new WebringError('ERR_BAD_REQUEST', 'invalid checkpoint id (a concrete id, not latest)', 'id');
    const dir = this.roomDir(room);
    const found = await this.resolve(room, id);
    if (!found) return false;
    const doomed = this.inside(path.join(dir, `${TEMP_PREFIX}deleted-${id}`));
    try {
      await this.fs.rename(found.dir, doomed);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false; // deleted by a concurrent request
      throw err;
    }
    await this.syncDir(dir);
    await this.fs.rm(doomed, { recursive: true, force: true });
    return true;
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

  /**
   * Keeps the `maxToKeep` most trusted and newest, and `justWritten` whatever its rank: a
   * checkpoint that waits for its vouch is not deleted before the report arrives, and an
   * unvouched one never pushes out a vouched one (so one more may stay until the next write).
   */
  private async prune(room: string, maxToKeep: number, justWritten: string): Promise<void> {
    const doomed = (await this.scan(room)).slice(maxToKeep).filter((c) => c.info.id !== justWritten);
    for (const old of doomed) await this.fs.rm(old.dir, { recursive: true, force: true });
  }

  private async scan(room: string): Promise<StoredCheckpoint[]> {
    const dir = this.roomDir(room);
    const found: StoredCheckpoint[] = [];
    for (const entry of await this.entries(dir)) {
      if (!checkpointIdSchema.safeParse(entry).success) continue;
      const cdir = path.join(dir, entry);
      try {
        const { meta, writer, writerName } = await this.readMetadata(cdir);
        let bytes = 0;
        for (const name of Object.values(CHECKPOINT_FILES)) bytes += (await this.fs.stat(path.join(cdir, name))).size;
        const trust = await this.readTrust(cdir);
        found.push({
          dir: cdir,
          info: { id: entry, run: meta.run, step: meta.step, epoch: meta.epoch, createdAt: meta.createdAt, bytes, writer, writerName, trust, weightsHash: meta.weightsHash, task: meta.config.task, model: meta.config.model, classes: meta.config.classes },
        });
      } catch (err) {
        console.warn(`[webring] skipping unreadable checkpoint ${cdir}: ${(err as Error).message}`);
      }
    }
    return found.sort(byTrustThenRecency);
  }

  /** The stored metadata.json is the uploaded one plus the server's `writer` and `writerName`. */
  private async readMetadata(dir: string): Promise<{ meta: CheckpointMetadata; writer: string; writerName: string }> {
    const raw = JSON.parse(await this.fs.readFile(path.join(dir, CHECKPOINT_FILES.metadata), 'utf8')) as Record<string, unknown>;
    const { writer, writerName, ...uploaded } = raw;
    return { meta: checkpointMetadataSchema.parse(uploaded), writer: typeof writer === 'string' ? writer : '', writerName: typeof writerName === 'string' ? writerName : '' };
  }

  /** A checkpoint's trust.json; one stored before trust was recorded counts as unvouched. */
  private async readTrust(dir: string): Promise<CheckpointTrust> {
    let text: string;
    try {
      text = await this.fs.readFile(path.join(dir, CHECKPOINT_TRUST_FILE), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return UNVOUCHED;
      throw err;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      console.warn(`[webring] ${dir}/${CHECKPOINT_TRUST_FILE} is not JSON (${(err as Error).message}); counting the checkpoint as unvouched`);
      return UNVOUCHED;
    }
    const trust = checkpointTrustSchema.safeParse(parsed);
    if (trust.success) return trust.data;
    console.warn(`[webring] ${dir}/${CHECKPOINT_TRUST_FILE} is not a valid verdict; counting the checkpoint as unvouched`);
    return UNVOUCHED;
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
