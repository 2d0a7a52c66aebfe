/**
 * The training config form. It is validated here with the server's own schema
 * (startConfigSchema), so a typo is caught before the request; a 400 from the server names
 * its field too, and both kinds of message appear next to that field (aria-invalid and
 * aria-describedby, so a screen reader reads the message with the field).
 */
import { startConfigSchema, defaultConfigOf } from '../../shared/tasks/start-config';
import { TASKS, findTask } from '../../shared/tasks/registry';
import type { z } from 'zod';
import { classesSchema, defaultWire, sameClasses, secureByDefault, type CollectSetting, type StartConfig } from '../../shared/protocol';
import type { OwnData } from '../../shared/tasks/task';
import type { ErrorBody } from '../../shared/protocol/errors';

export type StartConfigInput = z.input<typeof startConfigSchema>;

const NUMBER_FIELDS = ['learningRate', 'warmupSteps', 'referenceBatch', 'batchSizePerWorker', 'epochs', 'maxSteps', 'saveEverySteps', 'maxToKeep', 'localSteps', 'localLearningRate', 'outerLearningRate', 'outerMomentum', 'powerSgdRank'] as const;
/** Left empty, these mean "no cap" rather than "missing". */
const OPTIONAL_FIELDS = new Set<string>(['maxSteps']);

type Issue = z.core.$ZodIssue;

/** A message a teacher understands, for one schema issue. */
export function issueText(issue: Issue): string {
  switch (issue.code) {
    case 'invalid_type':
      return issue.expected === 'int' ? 'Enter a whole number.' : 'Enter a number.';
    case 'too_small':
      return issue.inclusive ? `At least ${String(issue.minimum)}.` : `More than ${String(issue.minimum)}.`;
    case 'too_big':
      return issue.inclusive ? `At most ${String(issue.maximum)}.` : `Less than ${String(issue.maximum)}.`;
    default:
      return issue.message;
  }
}

export class ConfigForm {
  private readonly shown = new Set<string>();

  constructor(readonly form: HTMLFormElement, defaultTask?: string) {
    const task = this.control('task') as HTMLSelectElement;
    task.replaceChildren(...TASKS.map((t) => new Option(t.title, t.id)));
    // A task's defaults are its recipe (docs/recipe.md); the page's markup holds none of its own.
    this.fill(defaultConfigOf(defaultTask && findTask(defaultTask) ? defaultTask : TASKS[0]!.id));
    // Another task: its models, datasets, classes and recipe.
    task.addEventListener('change', () => this.fill(defaultConfigOf(task.value)));
    // Re-check as the teacher corrects a field; only fields already flagged, or just edited, speak.
    form.addEventListener('change', (e) => {
      const name = (e.target as HTMLInputElement | null)?.name;
      if (!name) return;
      const issues = this.issues();
      for (const field of [...this.shown, name]) this.showAt(field, issues.get(field) ?? null);
    });
  }

  /** The config to send, or null after marking the invalid fields and focusing the first. */
  read(): StartConfigInput | null {
    this.clear();
    const issues = this.issues();
    if (issues.size === 0) return this.raw() as StartConfigInput;
    for (const [field, message] of issues) this.showAt(field, message);
    this.control([...issues.keys()][0]!)?.focus();
    return null;
  }

  /** The config the form holds now, every default filled in, or null while a field is invalid (nothing is marked). */
  current(): StartConfig | null {
    const parsed = startConfigSchema.safeParse(this.raw());
    return parsed.success ? parsed.data : null;
  }

  /** Shows a server error at its field; false when the error names no field of this form. */
  showServerError(error: ErrorBody): boolean {
    const field = error.field === 'resumeFrom' ? 'startFresh' : error.field;
    if (!field || !this.control(field)) return false;
    this.showAt(field, error.message);
    this.control(field)?.focus();
    return true;
  }

  clear(): void {
    for (const field of [...this.shown]) this.showAt(field, null);
  }

  /** The defaults of `task` (the server's TASK=), unless the form shows them already. */
  showDefaults(task: string): void {
    if (findTask(task) && this.control('task')!.value !== task) this.fill(defaultConfigOf(task));
  }

  /** Shows the config of the run in progress (after a reload of this page). */
  fill(config: StartConfig): void {
    this.showTask(config.task);
    for (const name of ['task', 'model', 'dataset', 'data', 'optimizer', 'wire', 'sumWordBits', 'allreduce', 'sync', 'localOptimizer', 'outerOptimizer', ...NUMBER_FIELDS] as const) {
      const control = this.control(name);
      const value = config[name];
      if (control) control.value = value === undefined ? '' : String(value);
    }
    (this.control('startFresh') as HTMLInputElement).checked = config.resumeFrom === 'none';
    (this.control('scaleLearningRate') as HTMLInputElement).checked = config.scaleLearningRate;
    (this.control('balanceShares') as HTMLInputElement).checked = config.balanceShares;
    // What the data's default gives shows as 'automatic', so changing the data changes it too.
    this.control('secureAggregation')!.value = config.secureAggregation === secureByDefault(config.data) ? 'auto' : config.secureAggregation ? 'on' : 'off';
    // Likewise the wire: what the mode's default gives shows as 'automatic'.
    if (config.wire === defaultWire(config.sync, config.secureAggregation)) this.control('wire')!.value = 'auto';
    this.control('classes')!.value = config.classes.join(', ');
  }

  /**
   * What the students would collect for the form's task before the run: its classes as
   * typed, or a text task's items; null (and the classes marked, with `mark`) when the typed
   * classes are not valid or the task takes no examples of the class's own.
   */
  readCollect(mark = true): CollectSetting | null {
    const task = findTask(this.control('task')!.value);
    if (!task?.own) return null;
    if (task.own.collects === 'text') return { task: task.id };
    const result = classesSchema.safeParse(this.typedClasses());
    if (mark) this.showAt('classes', result.success ? null : issueText(result.error.issues[0]!));
    return result.success ? { task: task.id, classes: [...result.data] } : null;
  }

  /** The form's task's own data, or null when it takes none. */
  get ownData(): OwnData | null {
    return findTask(this.control('task')!.value)?.own ?? null;
  }

  /** A checkpoint restores only into the task, model and optimizer it was trained with. */
  useArchitecture(task: string, model: string, optimizer: StartConfig['optimizer']): void {
    if (this.control('task')!.value !== task) this.fill(defaultConfigOf(task));
    this.control('model')!.value = model;
    this.control('optimizer')!.value = optimizer;
  }

  /** The task's models and datasets as the selects' options, its summary as the hint, its data and collect fields only where the class may bring its own, and its classes only where the class names them. */
  private showTask(id: string): void {
    const task = findTask(id);
    if (!task) return;
    (this.control('model') as HTMLSelectElement).replaceChildren(...task.models.map((m) => new Option(m.title, m.id)));
    (this.control('dataset') as HTMLSelectElement).replaceChildren(...task.datasets.map((d) => new Option(d.title, d.id)));
    document.getElementById('cfg-task-hint')!.textContent = task.summary;
    this.form.dataset.task = task.id;
    this.control('classes')!.closest('.field')?.toggleAttribute('hidden', task.own?.collects !== 'classes');
    this.control('data')!.closest('.field')?.toggleAttribute('hidden', !task.own);
    document.getElementById('collect-field')?.toggleAttribute('hidden', !task.own);
  }

  private raw(): Record<string, unknown> {
    const els = this.form.elements;
    const data = (els.namedItem('data') as HTMLSelectElement).value;
    const raw: Record<string, unknown> = {
      task: (els.namedItem('task') as HTMLSelectElement).value,
      model: (els.namedItem('model') as HTMLSelectElement).value,
      dataset: (els.namedItem('dataset') as HTMLSelectElement).value,
      data,
      optimizer: (els.namedItem('optimizer') as HTMLSelectElement).value,
      allreduce: (els.namedItem('allreduce') as HTMLSelectElement).value,
      sync: (els.namedItem('sync') as HTMLSelectElement).value,
      localOptimizer: (els.namedItem('localOptimizer') as HTMLSelectElement).value,
      outerOptimizer: (els.namedItem('outerOptimizer') as HTMLSelectElement).value,
    };
    // The classes typed count where the class names its own; otherwise they are the task's
    // (a text task's class adds text, never classes).
    const task = findTask(String(raw.task));
    const classes = this.typedClasses();
    const named = task?.own?.collects !== 'text' && (data === 'own' || !sameClasses(classes, task?.outputs ?? []));
    if (named) raw.classes = classes;
    const wire = (els.namedItem('wire') as HTMLSelectElement).value;
    if (wire !== 'auto') raw.wire = wire;
    raw.sumWordBits = Number((els.namedItem('sumWordBits') as HTMLSelectElement).value);
    for (const name of NUMBER_FIELDS) {
      const value = (els.namedItem(name) as HTMLInputElement).value.trim();
      if (value === '' && OPTIONAL_FIELDS.has(name)) continue;
      raw[name] = value === '' ? Number.NaN : Number(value);
    }
    if ((els.namedItem('startFresh') as HTMLInputElement).checked) raw.resumeFrom = 'none';
    raw.scaleLearningRate = (els.namedItem('scaleLearningRate') as HTMLInputElement).checked;
    raw.balanceShares = (els.namedItem('balanceShares') as HTMLInputElement).checked;
    const secure = (els.namedItem('secureAggregation') as HTMLSelectElement).value;
    if (secure !== 'auto') raw.secureAggregation = secure === 'on';
    return raw;
  }

  /** The first problem of each field, in form order. */
  private issues(): Map<string, string> {
    const result = startConfigSchema.safeParse(this.raw());
    const byField = new Map<string, string>();
    if (result.success) return byField;
    for (const issue of result.error.issues) {
      const field = String(issue.path[0] ?? 'model');
      if (!byField.has(field)) byField.set(field, issueText(issue));
    }
    return byField;
  }

  private typedClasses(): string[] {
    return (this.control('classes')!.value).split(',').map((c) => c.trim()).filter((c) => c !== '');
  }

  private control(name: string): HTMLInputElement | HTMLSelectElement | null {
    const el = this.form.elements.namedItem(name);
    return el instanceof HTMLInputElement || el instanceof HTMLSelectElement ? el : null;
  }

  private showAt(field: string, message: string | null): void {
    const control = this.control(field);
    const slot = document.getElementById(`cfg-${field}-error`);
    if (!control || !slot) return;
    slot.textContent = message ?? '';
    slot.hidden = message === null;
    if (message === null) {
      control.removeAttribute('aria-invalid');
      this.shown.delete(field);
    } else {
      control.setAttribute('aria-invalid', 'true');
      this.shown.add(field);
      // A refused field under Advanced must be seen: open the section it is in.
      const advanced = control.closest('details');
      if (advanced) advanced.open = true;
    }
  }
}
