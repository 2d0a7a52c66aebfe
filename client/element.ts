/** Typed element creation: shared with the tasks' page panels (shared/tasks/element.ts). */
export { el } from '../shared/tasks/element';
