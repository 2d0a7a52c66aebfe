/**
 * fitDataset's `backup`, Keras's BackupAndRestore for a room: the chief copies each of the
 * run's checkpoints to a tf.io store of the program's choosing (the newest `maxToKeep`), and
 * a run started again resumes from the newest copy of the same program when the server
 * holds nothing as new: a server restarted with an empty data folder, or a class moved to
 * another server. The copy reaches the server as the teacher's import, checked as the
 * chief's uploads are, and the run resumes from it at its step.
 */
import { toWebringError } from '../protocol/errors';
import { checkpointFiles, type TfIoCheckpoints } from '../checkpoints/tfio-checkpoints';
import type { CapturedCheckpoint } from '../checkpoints/checkpoint-io';
import type { RoomControl } from './room-control';

/**
 * The id of the checkpoint the run should resume from, imported from `store`; null when the
 * store holds no copy of this program newer than the server's newest checkpoint.
 */
export async function restoreFromBackup(store: TfIoCheckpoints, control: RoomControl, room: string, fingerprint: string, log: (message: string) => void): Promise<string | null> {
  const newestOnServer = Math.max(-1, ...(await control.checkpoints(room)).map((c) => c.step));
  for (const url of await store.list(room)) {
    let copy: CapturedCheckpoint;
    try {
      copy = await store.load(url);
    } catch (err) {
      // A damaged copy (a half-written folder, a foreign model) is passed over for an older one.
      log(`backup ${url} passed over: ${toWebringError(err).message}`);
      continue;
    }
    if (copy.metadata.config.program?.fingerprint !== fingerprint) continue;
    if (copy.metadata.step <= newestOnServer) return null;
    const imported = await control.importCheckpoint(room, checkpointFiles(copy));
    log(`resuming from the backup ${url} (step ${copy.metadata.step}), imported as ${imported.id}`);
    return imported.id;
  }
  return null;
}
