/**
 * Starting a run, from the teacher's Start or automatically after a failure: pick the
 * checkpoint to resume from (BackupAndRestore), tell the room, remember it on disk.
 */
import { WebringError } from '../shared/errors';
import { LATEST_CHECKPOINT, type ResumePoint } from '../shared/checkpoint';
import type { StartConfig, TrainStart } from '../shared/protocol';
import type { Room } from './room';
import { channelOf, type ServerContext } from './context';

/** Lets the new generation reach every worker before the resumed run's start does. */
export const AUTO_RESUME_DELAY_MS = 500;
/**
 * Students who arrive within this window of the first are admitted in one generation
 * change: a class walking in at once costs the ring one pause, not thirty.
 */
export const ADMISSION_WINDOW_MS = 750;

const admissionTimers = new WeakMap<Room, ReturnType<typeof setTimeout>>();

/**
 * Admits everyone waiting into the running ring after the admission window: one new
 * generation, then each joiner is told the run it joins. The ring switches to the new
 * generation at a step boundary, once every member's links to the joiners are open.
 */
export function scheduleAdmission(ctx: ServerContext, room: Room): void {
  if (admissionTimers.has(room)) return;
  admissionTimers.set(
    room,
    setTimeout(() => {
      admissionTimers.delete(room);
      const admission = room.admitWaiting();
      if (!admission) return;
      const { generation, joiners, start } = admission;
      ctx.log.info(`room ${room.name}: admitting ${joiners.length} joiner(s) in generation ${generation.generation}`);
      ctx.io.to(channelOf(room.name)).emit('ring:generation', generation);
      for (const id of joiners) {
        const socketId = room.socketIdOf(id);
        if (socketId) ctx.io.to(socketId).emit('train:start', start);
      }
      void ctx.persistence.save(room);
    }, ADMISSION_WINDOW_MS),
  );
}

/** The newest checkpoint of the same model for 'latest', or the named one. */
async function resumePoint(ctx: ServerContext, room: string, config: StartConfig): Promise<ResumePoint | null> {
  if (config.resumeFrom === 'none') return null;
  const found = await ctx.checkpoints.metadata(room, config.resumeFrom);
  if (!found) {
    if (config.resumeFrom === LATEST_CHECKPOINT) return null;
    throw new WebringError('ERR_UNKNOWN_CHECKPOINT', `room ${room} has no checkpoint ${config.resumeFrom}`, 'resumeFrom');
  }
  const { meta } = found;
  if (meta.config.model !== config.model) {
    if (config.resumeFrom === LATEST_CHECKPOINT) return null; // a different model starts fresh
    throw new WebringError('ERR_BAD_STATE', `checkpoint ${config.resumeFrom} holds a ${meta.config.model}, not a ${config.model}`, 'resumeFrom');
  }
  const id = (await ctx.checkpoints.resolve(room, config.resumeFrom))!.id;
  return { checkpointId: id, step: meta.step, dataCursor: meta.dataCursor, weightsHash: meta.weightsHash };
}

export async function startRun(ctx: ServerContext, room: Room, config: StartConfig): Promise<TrainStart> {
  room.assertCanStart();
  const resume = await resumePoint(ctx, room.name, config);
  const start = room.start(config, resume);
  const from = resume ? `resuming ${resume.checkpointId} at step ${resume.step}` : 'fresh';
  ctx.log.info(`room ${room.name}: run ${start.run} started (${from}), generation ${start.generation}`);
  ctx.io.to(channelOf(room.name)).emit('train:start', start);
  void ctx.persistence.save(room);
  return start;
}

/**
 * After a run broke because a member vanished, the survivors go on from the latest
 * checkpoint by themselves, as TensorFlow's BackupAndRestore restarts a job. Without a
 * checkpoint there is nothing to go back to, and the room waits for the teacher.
 */
export function scheduleAutoResume(ctx: ServerContext, room: Room): void {
  const config = room.runConfig;
  if (!config) return;
  setTimeout(() => {
    void (async () => {
      if (room.isTraining || room.isEmpty || !(await ctx.checkpoints.resolve(room.name, LATEST_CHECKPOINT))) return;
      try {
        await startRun(ctx, room, { ...config, resumeFrom: LATEST_CHECKPOINT });
      } catch (err) {
        ctx.log.warn(`room ${room.name}: automatic resume failed: ${(err as Error).message}`);
      }
    })();
  }, AUTO_RESUME_DELAY_MS);
}
