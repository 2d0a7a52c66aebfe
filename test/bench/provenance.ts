/**
 * Where a bench's figures come from: the commit (with "+changes" when the tree had
 * uncommitted changes), the versions and the machine, written beside every result.
 */
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import * as tf from '@tensorflow/tfjs';

/** The commit this tree is; where there is no git (a lent machine's bundle), why not. */
export function commitOf(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== '';
    return dirty ? `${head}+changes` : head;
  } catch (error) {
    return `unknown (${(error as Error).message.split('\n')[0]})`;
  }
}

export interface Provenance {
  generatedAt: string;
  commit: string;
  versions: { node: string; tfjs: string };
  machine: { cpu: string; cores: number; kernel: string };
}

export function provenance(): Provenance {
  return {
    generatedAt: new Date().toISOString(),
    commit: commitOf(),
    versions: { node: process.version, tfjs: tf.version.tfjs },
    machine: { cpu: os.cpus()[0]?.model ?? 'unknown CPU', cores: os.availableParallelism(), kernel: os.release() },
  };
}
