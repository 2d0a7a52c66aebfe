/**
 * What a task's pages hand the student and teacher pages (shared/tasks/pages.ts loads
 * them): the try panel, mounted in `[data-testid="task-try"]`. Browser-only, DOM types.
 */

export interface TryPanelOptions {
  /**
   * The model's output probabilities for `n` examples (n × F numbers, as the model takes
   * them), n × outputs; null while no model is ready.
   */
  ask(features: Float32Array, n: number): Promise<Float32Array | null>;
  /** Who answers: this tab's live weights, or the latest checkpoint (the teacher's page). */
  source: 'live' | 'checkpoint';
  /** The model's outputs in order (the run's classes, or the task's vocabulary). */
  classes: readonly string[];
}

export interface TryPanel {
  /** Asks again, e.g. after the weights changed; `about` names what answers now ("epoch 3, step 420"). */
  refresh(about?: string): void;
  /** Disabled, it shows `reason` instead of an answer. */
  setEnabled(enabled: boolean, reason?: string): void;
  /** The run's outputs changed (a run on the class's own classes). */
  setClasses(classes: readonly string[]): void;
  /** One sentence for the student: what to try. */
  readonly hint: string;
  /** What the student made, as the model's input (a drawing to collect as an example), or null; absent where nothing is made. */
  input?(): Float32Array | null;
  clear?(): void;
  destroy(): void;
}

export interface TaskPages {
  mountTry(container: HTMLElement, options: TryPanelOptions): TryPanel;
}
