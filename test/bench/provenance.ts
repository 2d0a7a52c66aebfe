/**
 * Where a bench's figures come from: the commit (with "+changes" when the tree had
 * uncommitted changes), the versions and the machine, written beside every result.
 */
import os from 'node:os';
import * as tf from '@tensorflow/tfjs';
import { commitOf } from '../../lab/provenance';

export { commitOf };

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
