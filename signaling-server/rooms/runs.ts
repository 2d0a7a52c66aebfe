/**
 * Starting a run, from the teacher's Start or automatically after a failure: pick the
 * checkpoint to resume from (BackupAndRestore) and tell the room. Also the admission window
 * for students arriving mid-run. Timers are the server's (ctx.timers), cleared on close.
 */
import { WebringError } from '../../shared/protocol/errors';
import { LATEST_CHECKPOINT } from '../../shared/checkpoints/checkpoint';
import { sameClasses, type ResumePoint, type StartConfig, type TrainStart } from '../../shared/protocol';
import type { Room } from './room';
import { channelOf, type RoomContext } from './room-context';
import { ADMISSION_DEADLINE_MS } from './formation';
import { scheduleKeyDeadline } from './key-deadline';
import { watchForStall } from './stall-timer';

/** Lets the new generation reach every worker before the resumed run's start does. */
const AUTO_RESUME_DELAY_MS = 500;
/**
 * Students who arrive within this window of the first are admitted in one generation
 * change. Short, because it only gathers those arriving together: whoever arrives while an
 * admission forms waits for the next one anyway (formation.ts), so a class walking in costs
 * the ring a few pauses, not thirty, and a thawed phone is not kept waiting (750 ms before).
 */
const ADMISSION_WINDOW_MS = 250;

/**
 * Admits everyone waiting into the running ring after the admission window: one new
 * generation, then each joiner is told the run it joins. The ring switches to the new
 * generation at a step boundary, once every member's links to the joiners are open. With
 * several signaling nodes each may schedule one; the first admits, the others find nobody
 * waiting.
 */
export function scheduleAdmission(ctx: RoomContext, name: string): void {
  // Keyed by room name: rooms are re-read when the timer fires, never held.
  ctx.timers.once(`admission:${name}`, ADMISSION_WINDOW_MS, () => {
    admit(ctx, name).catch((err: unknown) => ctx.log.error(`room ${name}: admission failed: ${String(err)}`));
  });
}

async function admit(ctx: RoomContext, name: string): Promise<void> {
  const updated = await ctx.rooms.update(name, (r) => r.admitWaiting());
  const admission = updated?.result;
  if (!updated || !admission) return;
  const { generation, joiners, start } = admission;
  ctx.log.info(`room ${name}: admitting ${joiners.length} joiner(s) in generation ${generation.generation}`);
  ctx.io.to(channelOf(name)).emit('ring:generation', generation);
  for (const id of joiners) {
    const socketId = updated.room.socketIdOf(id);
    if (socketId) ctx.io.to(socketId).emit('train:start', start);
  }
  scheduleAdmissionDeadline(ctx, name, generation.generation);
  scheduleKeyDeadline(ctx, updated.room, generation.generation);
}

/** Past the deadline an admission still forming applies without the ring's vote (Room.admissionOverdue). */
function scheduleAdmissionDeadline(ctx: RoomContext, name: string, generation: number): void {
  ctx.timers.once(`admission-deadline:${name}:${generation}`, ctx.admissionDeadlineMs ?? ADMISSION_DEADLINE_MS, () => {
    void (async () => {
      const updated = await ctx.rooms.update(name, (r) => r.admissionOverdue(generation));
      if (!updated) return;
      if (updated.result.again) return scheduleAdmissionDeadline(ctx, name, generation);
      const forced = updated.result.change.generation;
      if (!forced) return;
      ctx.log.warn(`room ${name}: the ring did not switch to admission ${generation} in time; generation ${forced.generation} applies without the vote`);
      ctx.io.to(channelOf(name)).emit('ring:generation', forced);
      scheduleKeyDeadline(ctx, updated.room, forced.generation);
    })().catch((err: unknown) => ctx.log.error(`room ${name}: the admission deadline failed: ${String(err)}`));
  });
}

/**
 * Why a checkpoint's run cannot go on as `config`'s, or null: its data cursor counts
 * through another dataset's epochs, or another kind of data's, and a model of other
 * classes has another output layer.
 */
function otherDataThan(saved: StartConfig, config: StartConfig): string | null {
  if (saved.data !== config.data) return `trained on data '${saved.data}', not '${config.data}'`;
  if (config.data !== 'own' && saved.dataset !== config.dataset) return `trained on ${saved.dataset}, not ${config.dataset}`;
  if (!sameClasses(saved.classes, config.classes)) return `tells apart ${saved.classes.join(', ')}, not ${config.classes.join(', ')}`;
  return null;
}

/** The newest checkpoint of the same task, model and data for 'latest', or the named one. */
async function resumePoint(ctx: RoomContext, room: string, config: StartConfig): Promise<ResumePoint | null> {
  if (config.resumeFrom === 'none') return null;
  const found = await ctx.checkpoints.metadata(room, config.resumeFrom);
  if (!found) {
    if (config.resumeFrom === LATEST_CHECKPOINT) return null;
    throw new WebringError('ERR_UNKNOWN_CHECKPOINT', `room ${room} has no checkpoint ${config.resumeFrom}`, 'resumeFrom');
  }
  const { meta } = found;
  if (meta.config.task !== config.task) {
    if (config.resumeFrom === LATEST_CHECKPOINT) return null; // another task starts fresh
    throw new WebringError('ERR_OTHER_TASK', `checkpoint ${config.resumeFrom} is of the task ${meta.config.task}, not ${config.task}: its weights and data position mean nothing to this run`, 'resumeFrom');
  }
  // Two programs' models are the same model only when their fingerprints are.
  if (meta.config.model !== config.model || meta.config.program?.fingerprint !== config.program?.fingerprint) {
    if (config.resumeFrom === LATEST_CHECKPOINT) return null; // a different model starts fresh
    throw new WebringError('ERR_BAD_STATE', `checkpoint ${config.resumeFrom} holds a ${meta.config.model}, not a ${config.model}`, 'resumeFrom');
  }
  const otherData = otherDataThan(meta.config, config);
  if (otherData) {
    if (config.resumeFrom === LATEST_CHECKPOINT) return null;
    throw new WebringError('ERR_BAD_STATE', `checkpoint ${config.resumeFrom} ${otherData}`, 'resumeFrom');
  }
  const id = (await ctx.checkpoints.resolve(room, config.resumeFrom))!.id;
  return { checkpointId: id, step: meta.step, dataCursor: meta.dataCursor, weightsHash: meta.weightsHash };
}

/** Starts a run in the room (throws a coded error when it cannot start), and tells its members. */
export async function startRun(ctx: RoomContext, name: string, config: StartConfig): Promise<{ room: Room; start: TrainStart }> {
  const before = await ctx.rooms.read(name);
  if (!before) throw new WebringError('ERR_NO_WORKERS', `no workers have joined room ${name}`);
  before.assertCanStart();
  const resume = await resumePoint(ctx, name, config);
  // Checked again inside the update: another node or request may have started it meanwhile.
  const updated = await ctx.rooms.update(name, (r) => r.start(config, resume));
  if (!updated) throw new WebringError('ERR_NO_WORKERS', `no workers have joined room ${name}`);
  const { room, result: start } = updated;
  const from = resume ? `resuming ${resume.checkpointId} at step ${resume.step}` : 'fresh';
  ctx.log.info(`room ${name}: run ${start.run} started (${from}), generation ${start.generation}`);
  ctx.io.to(channelOf(name)).emit('train:start', start);
  scheduleKeyDeadline(ctx, room, start.generation);
  watchForStall(ctx, name);
  return { room, start };
}

/**
 * After a run broke (its last member failed or left), whoever is in the room goes on from
 * the latest checkpoint by themselves, as TensorFlow's BackupAndRestore restarts a job;
 * without a checkpoint of this model and data, from the start. A room never sits idle with
 * its class still in it: only the teacher's Stop ends the lesson.
 */
export function scheduleAutoResume(ctx: RoomContext, name: string, config: StartConfig | null): void {
  if (!config) return;
  ctx.timers.after(AUTO_RESUME_DELAY_MS, () => {
    void (async () => {
      const room = await ctx.rooms.read(name);
      if (!room || room.isTraining || !room.hasWorkers) return;
      await startRun(ctx, name, { ...config, resumeFrom: LATEST_CHECKPOINT });
    })().catch((err: unknown) => ctx.log.warn(`room ${name}: automatic resume failed: ${(err as Error).message}`));
  });
}
