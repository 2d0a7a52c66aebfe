/**
 * Runs one `ip` or `tc` command and checks its exit status. A model half built is worse
 * than none, so every failure stops the build and names the command that failed.
 */
import { spawnSync } from 'node:child_process';
import { LabError } from './lab-error';
import type { Command } from './network-models';

/** Long enough for `ip netns add` on a busy machine; these commands take milliseconds. */
const COMMAND_TIMEOUT_MS = 10_000;

export interface CommandResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `argv` and returns what it printed, whatever its status (for probes and listings). */
export function tryCommand(argv: Command): CommandResult {
  const [file, ...args] = argv;
  if (!file) throw new LabError('ERR_LAB_USAGE', 'an empty command');
  const r = spawnSync(file, args, { encoding: 'utf8', timeout: COMMAND_TIMEOUT_MS });
  if (r.error) return { status: null, stdout: '', stderr: r.error.message };
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Runs `argv`; a non-zero status (or no status at all) throws ERR_LAB_COMMAND_FAILED naming it. */
export function runCommand(argv: Command): string {
  const r = tryCommand(argv);
  if (r.status !== 0) {
    throw new LabError('ERR_LAB_COMMAND_FAILED', `\`${argv.join(' ')}\` ${r.status === null ? 'could not run' : `exited with ${r.status}`}: ${r.stderr.trim()}`);
  }
  return r.stdout;
}
