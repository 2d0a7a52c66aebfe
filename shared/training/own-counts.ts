/**
 * A device's own examples per class, as the worker tells the server (`worker:own-examples`,
 * counts only): the counts as last reported, sent again after every join (the server keeps
 * none across a restart), and only those of the classes the room collects for or its run on
 * own data trains, nothing while it has none. The server refuses any other label
 * (Room.recordOwnExamples), and a Node worker's folder may hold more classes than the lesson's.
 */
import type { StartConfig } from '../protocol';
import { runOwnLabels } from '../tasks/collect';

export class OwnCounts {
  /** As last reported; null: this device reports none. */
  private counts: Record<string, number> | null = null;
  /** The labels the room collects (its classes, or a text task's one label), or null (the join reply, then `room:collect`). */
  private collectClasses: readonly string[] | null = null;
  /** The labels of the room's run on own data, or null. */
  private runClasses: readonly string[] | null = null;

  /** `send` reports counts; `joined` says whether there is a membership to report them for. */
  constructor(
    private readonly send: (counts: Record<string, number>) => void,
    private readonly joined: () => boolean,
  ) {}

  /** This device's counts changed: sent now if joined. */
  report(counts: Record<string, number>): void {
    this.counts = { ...counts };
    this.sendNow();
  }

  /** What the room collects changed (or a join told it): the labels its items are counted under. */
  collecting(labels: readonly string[] | null): void {
    this.collectClasses = labels;
    this.sendNow();
  }

  /** A run starts: on own data its labels count too. */
  runStarting(config: StartConfig): void {
    this.runClasses = runOwnLabels(config);
    this.sendNow();
  }

  /** Sends the counts as last reported, for the classes that count now (after a join, say). */
  sendNow(): void {
    const classes = this.collectClasses ?? this.runClasses;
    if (!this.counts || !classes || !this.joined()) return;
    this.send(Object.fromEntries(Object.entries(this.counts).filter(([label]) => classes.includes(label))));
  }
}
