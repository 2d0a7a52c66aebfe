/**
 * The classroom lab's failures. Callers (the CLI, the lab test, a row runner) branch on
 * `code`, never on the message, as everywhere else in webring (shared/protocol/errors.ts).
 */
export type LabErrorCode =
  /** The lab makes namespaces, links, qdiscs and cgroups: only root may. */
  | 'ERR_LAB_NEEDS_ROOT'
  /** `ip netns add` fails, `ip`/`tc` are missing, or the kernel lacks ifb or tbf. */
  | 'ERR_LAB_NO_NETNS'
  /** The cgroup v1 cpu controller is not mounted where the lab writes its caps. */
  | 'ERR_LAB_NO_CGROUP'
  /** The CPU caps asked for add up to more cores than the machine has. */
  | 'ERR_LAB_CPU_OVERCOMMIT'
  /** One `ip` or `tc` command of a model failed; the message names it. */
  | 'ERR_LAB_COMMAND_FAILED'
  /** A model's measured rates are outside the tolerance of what its profile says. */
  | 'ERR_LAB_MODEL_INVALID'
  /** A flow, the server or a worker did not start, answer or finish in time. */
  | 'ERR_LAB_PROCESS'
  /** Bad arguments to the lab (unknown model, worker count out of range, …). */
  | 'ERR_LAB_USAGE';

export class LabError extends Error {
  constructor(
    readonly code: LabErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'LabError';
  }
}
