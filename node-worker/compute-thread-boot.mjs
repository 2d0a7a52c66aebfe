// The compute thread's entry: Node hands a worker's own module loader no --import hooks
// (tsx issue #354), so this plain module registers tsx, then loads the TypeScript entry.
import { register } from 'tsx/esm/api';

register();
await import('./compute-thread.ts');
