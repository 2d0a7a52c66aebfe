/**
 * The folder shared/checkpoints/ owns checkpoints: what one is (checkpoint.ts), capturing a
 * replica's state and moving it to and from the server (this file), the chief's background
 * writer, and the optimizer state's layout. It may import protocol/, data/ and util/, never
 * training/: a replica is anything with the members of ReplicaState (replica-state.ts),
 * which the Trainer has. The server's store and the workers import it.
 *
 * Capturing a replica's full state as a checkpoint, uploading it, listing the server's, and
 * restoring from one. Used by the chief (capture, upload, list) and by every worker
 * (restore); fetch and the clock are parameters so the same code runs in a tab, in a Node
 * worker and in tests. Every request has a deadline and fails with ERR_TIMEOUT after it.
 */
import * as tf from '@tensorflow/tfjs';
import { ERROR_CODES, WebringError } from '../protocol/errors';
import {
  CHECKPOINT_FILES,
  CHECKPOINT_FORMAT_VERSION,
  OUTER_MOMENTUM_SPEC,
  optimizerSpecsSchema,
  sha256Hex,
  type CheckpointInfo,
  type CheckpointMetadata,
  type OptimizerSpecs,
} from './checkpoint';
import type { Backend, MemberInfo } from '../protocol';
import type { ReplicaState } from './replica-state';
import { concatBuffers } from '../compute/weight-bytes';
import { WeightsHasher } from '../util/weights-hash';
import { withDeadline } from '../util/deadline';
import type { Clock } from '../util/clock';

export type FetchLike = typeof fetch;

/** A whole checkpoint upload (a few MB on a school network) gives up after this long. */
export const CHECKPOINT_UPLOAD_TIMEOUT_MS = 120_000;
/** Downloading and loading a checkpoint to resume from gives up after this long. */
export const CHECKPOINT_RESTORE_TIMEOUT_MS = 120_000;
/** Listing a room's checkpoints (a small JSON answer) gives up after this long. */
export const CHECKPOINT_LIST_TIMEOUT_MS = 10_000;

/** How a checkpoint request reaches the server, and how long it may take. */
export interface CheckpointRequestOptions {
  fetchImpl?: FetchLike;
  clock?: Clock;
  /** Overrides the request's default deadline. */
  timeoutMs?: number;
}

/** Runs `work` under a deadline of `ms`, after which it fails with ERR_TIMEOUT naming `what`. */
function deadline<T>(what: string, ms: number, clock: Clock | undefined, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  return withDeadline(ms, () => new WebringError('ERR_TIMEOUT', `${what} timed out after ${ms} ms`), work, clock);
}

/** `fetchImpl` with `signal` added to every request (tfjs makes its own request init). */
function signalled(fetchImpl: FetchLike, signal: AbortSignal): FetchLike {
  return ((input: RequestInfo | URL, init?: RequestInit) => fetchImpl(input, { ...init, signal })) as FetchLike;
}

export interface CapturedCheckpoint {
  /** Topology and weight specs; the weight bytes are `weights`. */
  artifacts: tf.io.ModelArtifacts;
  weights: Uint8Array;
  optimizerSpecs: OptimizerSpecs;
  optimizerData: Uint8Array;
  metadata: CheckpointMetadata;
}

export interface CaptureContext {
  room: string;
  run: number;
  backend: Backend;
  members: MemberInfo[];
}

/**
 * Reads the replica's weights, optimizer state and position. Everything is read before
 * this resolves, so training may go on while the result is being written.
 */
export async function captureCheckpoint(trainer: ReplicaState, ctx: CaptureContext): Promise<CapturedCheckpoint> {
  const { weights, optimizerData: innerData, optimizerSpecs: specs, optimizer, weightSpecs, ...topology } = await trainer.replica.snapshot();
  const captured: tf.io.ModelArtifacts = { ...(topology as tf.io.ModelArtifacts), weightSpecs };
  const momentum = trainer.outer?.momentum ?? null;
  const optimizerSpecs = optimizerSpecsSchema.parse({
    optimizer,
    weightSpecs: momentum ? [...specs, { name: OUTER_MOMENTUM_SPEC, shape: [momentum.length], dtype: 'float32' }] : specs,
  });
  const optimizerData = momentum ? concatBytes(innerData, new Uint8Array(momentum.buffer.slice(momentum.byteOffset, momentum.byteOffset + momentum.byteLength))) : innerData;

  const cursor = trainer.dataCursor;
  const metadata: CheckpointMetadata = {
    format: CHECKPOINT_FORMAT_VERSION,
    room: ctx.room,
    run: ctx.run,
    step: trainer.step,
    epoch: cursor.epoch,
    dataCursor: cursor,
    learningRateRamp: trainer.schedule.state,
    round: trainer.round,
    epochTally: trainer.tally.accounts(),
    ownRoster: trainer.dataRoster,
    worldSize: trainer.worldSize,
    members: ctx.members.map((m) => ({
      id: m.id,
      name: m.name,
      index: m.index,
      backend: m.backend,
      kind: m.kind,
      examplesPerSec: m.examplesPerSec,
    })),
    config: trainer.config,
    backend: ctx.backend,
    createdAt: new Date().toISOString(),
    weightsSha256: sha256Hex(weights),
    optimizerSha256: sha256Hex(optimizerData),
    // model.save wrote the weights in variable order as float32: the same bytes that
    // Trainer.weightsHash reads, so hash them here instead of reading the GPU again.
    weightsHash: new WeightsHasher().update(new Float32Array(weights.buffer, weights.byteOffset, weights.byteLength / 4)).digest(),
  };
  return { artifacts: captured, weights, optimizerSpecs, optimizerData, metadata };
}

export function checkpointsUrl(baseUrl: string, room: string): string {
  return `${baseUrl.replace(/\/$/, '')}/api/rooms/${encodeURIComponent(room)}/checkpoints`;
}

/**
 * Uploads with tf.io.http, which sends model.json and model.weights.bin as multipart form
 * data; the optimizer state and the metadata travel as further parts of the same request,
 * so the server can store the checkpoint all-or-nothing.
 */
export function uploadCheckpoint(
  baseUrl: string,
  memberToken: string,
  checkpoint: CapturedCheckpoint,
  options: CheckpointRequestOptions = {},
): Promise<CheckpointInfo> {
  const ms = options.timeoutMs ?? CHECKPOINT_UPLOAD_TIMEOUT_MS;
  return deadline('checkpoint upload', ms, options.clock, (signal) => postCheckpoint(baseUrl, memberToken, checkpoint, signalled(options.fetchImpl ?? fetch, signal)));
}

async function postCheckpoint(baseUrl: string, memberToken: string, checkpoint: CapturedCheckpoint, fetchImpl: FetchLike): Promise<CheckpointInfo> {
  let response: Response | null = null;
  const handler = tf.io.http(checkpointsUrl(baseUrl, checkpoint.metadata.room), {
    requestInit: { method: 'POST', headers: { Authorization: `Bearer ${memberToken}` } },
    fetchFunc: (async (url: RequestInfo | URL, init?: RequestInit) => {
      const form = init!.body as FormData;
      form.append(CHECKPOINT_FILES.optimizerSpecs, new Blob([JSON.stringify(checkpoint.optimizerSpecs)], { type: 'application/json' }), CHECKPOINT_FILES.optimizerSpecs);
      form.append(CHECKPOINT_FILES.optimizerData, new Blob([checkpoint.optimizerData as Uint8Array<ArrayBuffer>], { type: 'application/octet-stream' }), CHECKPOINT_FILES.optimizerData);
      form.append(CHECKPOINT_FILES.metadata, new Blob([JSON.stringify(checkpoint.metadata)], { type: 'application/json' }), CHECKPOINT_FILES.metadata);
      response = await fetchImpl(url, init);
      return response;
    }) as typeof fetch,
  });
  try {
    // `weights` is the one copy of the weight bytes: the one the metadata's sha256 covers.
    await handler.save!({ ...checkpoint.artifacts, weightData: checkpoint.weights.slice().buffer });
  } catch (err) {
    const res = response as Response | null;
    if (res) {
      const body = (await res.json().catch(() => null)) as { error?: { code?: string; message?: string } } | null;
      // The server's own code (ERR_NOT_CHIEF, ERR_BAD_STATE, ERR_STEP_OUT_OF_RANGE, ...): the writer decides on it.
      const code = ERROR_CODES.find((c) => c === body?.error?.code) ?? 'ERR_BAD_REQUEST';
      throw new WebringError(code, `checkpoint upload refused: HTTP ${res.status} ${body?.error?.message ?? ''}`);
    }
    // No response at all: the server is down or the network is gone.
    throw new WebringError('ERR_UNREACHABLE', `checkpoint upload failed: ${err instanceof Error ? err.message : String(err)}`);
  }
  const body = (await (response as unknown as Response).json()) as { checkpoint: CheckpointInfo };
  return body.checkpoint;
}

/**
 * The server's checkpoints of `room`, newest first, read with a member's token. Fails with
 * ERR_BAD_REQUEST when the server refuses, ERR_TIMEOUT after CHECKPOINT_LIST_TIMEOUT_MS.
 */
export function listCheckpoints(baseUrl: string, room: string, memberToken: string, options: CheckpointRequestOptions = {}): Promise<CheckpointInfo[]> {
  const ms = options.timeoutMs ?? CHECKPOINT_LIST_TIMEOUT_MS;
  const fetchImpl = options.fetchImpl ?? fetch;
  return deadline(`listing the checkpoints of ${room}`, ms, options.clock, async (signal) => {
    const res = await fetchImpl(checkpointsUrl(baseUrl, room), { headers: { authorization: `Bearer ${memberToken}` }, signal });
    if (!res.ok) throw new WebringError('ERR_BAD_REQUEST', `listing the checkpoints of ${room} answered HTTP ${res.status}`);
    return (await res.json()) as CheckpointInfo[];
  });
}

/**
 * Downloads checkpoint `id` and makes the trainer's weights, optimizer state and position
 * equal to it; fails with ERR_TIMEOUT after CHECKPOINT_RESTORE_TIMEOUT_MS.
 */
export function restoreFromServer(
  baseUrl: string,
  room: string,
  id: string,
  trainer: ReplicaState,
  memberToken: string,
  options: CheckpointRequestOptions = {},
): Promise<CheckpointMetadata> {
  const ms = options.timeoutMs ?? CHECKPOINT_RESTORE_TIMEOUT_MS;
  return deadline(`restoring checkpoint ${id}`, ms, options.clock, (signal) =>
    downloadInto(baseUrl, room, id, trainer, memberToken, signalled(options.fetchImpl ?? fetch, signal)),
  );
}

async function downloadInto(baseUrl: string, room: string, id: string, trainer: ReplicaState, memberToken: string, fetchImpl: FetchLike): Promise<CheckpointMetadata> {
  const base = `${checkpointsUrl(baseUrl, room)}/${encodeURIComponent(id)}`;
  // Reading a room's checkpoints takes a member's token (or the join code, or the teacher's).
  const authorization = `Bearer ${memberToken}`;
  const get = async (file: string): Promise<Response> => {
    const res = await fetchImpl(`${base}/${file}`, { headers: { authorization } });
    if (!res.ok) throw new WebringError('ERR_BAD_DATA', `checkpoint ${id}: ${file} answered HTTP ${res.status}`);
    return res;
  };
  // tfjs calls fetchFunc as a method of its handler; a browser's fetch throws "Illegal
  // invocation" unless it is called unbound, so wrap it.
  const fetchFunc = ((input: RequestInfo | URL, init?: RequestInit) => fetchImpl(input, { ...init, headers: { ...(init?.headers as Record<string, string> | undefined), authorization } })) as typeof fetch;
  const artifacts = await tf.io.http(`${base}/${CHECKPOINT_FILES.model}`, { fetchFunc }).load!();
  const metadata = (await (await get(CHECKPOINT_FILES.metadata)).json()) as CheckpointMetadata;
  const optimizerSpecs = optimizerSpecsSchema.parse(await (await get(CHECKPOINT_FILES.optimizerSpecs)).json());
  const optimizerData = await (await get(CHECKPOINT_FILES.optimizerData)).arrayBuffer();
  const { weightData, ...topology } = artifacts;
  await applyCheckpoint(trainer, {
    artifacts: topology,
    weights: concatBuffers(weightData),
    optimizerSpecs,
    optimizerData: new Uint8Array(optimizerData),
    metadata,
  });
  return metadata;
}

/** Loads a captured or downloaded checkpoint into a replica, and proves it by the weights hash. */
export async function applyCheckpoint(trainer: ReplicaState, checkpoint: CapturedCheckpoint): Promise<void> {
  const { inner, momentum } = splitOuterMomentum(checkpoint.optimizerSpecs, checkpoint.optimizerData);
  await trainer.replica.load({
    weightSpecs: (checkpoint.artifacts.weightSpecs ?? []).map((s) => ({ name: s.name, shape: [...s.shape], dtype: s.dtype })),
    weights: checkpoint.weights,
    optimizerSpecs: inner.specs,
    optimizerData: inner.data,
  });
  trainer.setPosition(checkpoint.metadata.step, checkpoint.metadata.dataCursor, checkpoint.metadata.ownRoster ?? null, checkpoint.metadata.epochTally ?? []);
  // Without a momentum (an every-step checkpoint, or one from before), the outer optimizer starts at zero.
  trainer.restoreOuter(checkpoint.metadata.round ?? checkpoint.metadata.step, trainer.outer ? momentum : null);
  // A checkpoint without a ramp (older ones) lets the schedule start afresh at the resumed step.
  trainer.schedule.restore(checkpoint.metadata.learningRateRamp ?? null);
  const hash = await trainer.weightsHash();
  if (hash !== checkpoint.metadata.weightsHash) {
    throw new WebringError('ERR_BAD_DATA', `restored weights hash ${hash} differs from the checkpoint's ${checkpoint.metadata.weightsHash}`);
  }
}

/** The inner optimizer's entries and bytes, and the outer momentum after them if the checkpoint has one (OUTER_MOMENTUM_SPEC). */
export function splitOuterMomentum(specs: OptimizerSpecs, data: Uint8Array): { inner: { specs: OptimizerSpecs['weightSpecs']; data: Uint8Array }; momentum: Float32Array | null } {
  const last = specs.weightSpecs.at(-1);
  if (last?.name !== OUTER_MOMENTUM_SPEC) return { inner: { specs: specs.weightSpecs, data }, momentum: null };
  const floats = last.shape.reduce((a, b) => a * b, 1);
  const at = data.byteLength - floats * 4;
  if (last.dtype !== 'float32' || at < 0) throw new WebringError('ERR_BAD_DATA', `the checkpoint's outer momentum (${floats} floats) does not fit its optimizer.bin of ${data.byteLength} bytes`);
  // A copy: the bytes may sit at any offset, and a Float32Array needs 4-byte alignment.
  const momentum = new Float32Array(data.slice(at).buffer);
  return { inner: { specs: specs.weightSpecs.slice(0, -1), data: data.subarray(0, at) }, momentum };
}

function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}
