/**
 * What this process holds, not garbage it has yet to collect: a full collection before each
 * look, then its heap and its Buffers. For tests that bound what the in-process server keeps.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** Bytes of heap and Buffers this process retains after a collection. */
export function retainedBytes(): number {
  gc();
  const { arrayBuffers, heapUsed } = process.memoryUsage();
  return arrayBuffers + heapUsed;
}
