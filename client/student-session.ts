/**
 * The heavy half of the student page, loaded after the first paint: the tab's member of the
 * class, opened through the library's own `openMember` (client/library.ts), the API any
 * developer's page uses. Its maths (TensorFlow.js and its backends) runs in a Web Worker;
 * the page itself (form, status, chart) paints without any of it.
 */
import { BACKENDS, openMember, type Backend, type ComputePlace, type MemberSetup, type OwnExamples, type OwnRun, type RoomMember } from './library';

export interface SessionOptions {
  /** The page's `?backend=` value, if any: that backend is tried first. */
  preferredBackend: string | null;
  /** Where the maths runs: the tab's compute thread (the default), or the page (`?compute=main`). */
  compute: ComputePlace;
  /** Faults to play (test builds only). */
  faults?: MemberSetup['faults'];
  /** This tab's own examples for a run's classes, or null. */
  ownExamples(run: OwnRun): OwnExamples | null;
}

/** The tab's member: joined later, when the student presses Join. */
export async function startSession(options: SessionOptions): Promise<RoomMember> {
  const requested = options.preferredBackend;
  const backend = requested !== null && (BACKENDS as readonly string[]).includes(requested) ? (requested as Backend) : null;
  return openMember({
    url: location.origin,
    backend,
    compute: options.compute,
    ownExamples: options.ownExamples,
    ...(options.faults ? { faults: options.faults } : {}),
    log: (m) => console.info(`[webring] ${m}`),
  });
}
