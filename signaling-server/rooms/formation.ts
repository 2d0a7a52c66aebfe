/**
 * How a running ring forms and re-forms in a class of thirty: one admission at a time, and
 * shedding the members a new generation cannot reach instead of waiting on them forever.
 *
 * Admissions. Students who arrive while an admission is still forming (its generation
 * announced, the ring not yet switched to it) wait for the next one: a class walking in
 * over a minute is admitted in a few batches, never in a pile of generations that each
 * restart the dialling before the last one finished (seen with 24 Node workers: twelve
 * generations in 31 s, and the ring never switched). The ring has switched once any member
 * reports a step trained in the admitting generation or a newer one.
 *
 * Shedding. A member whose ring links in the current generation stay shut past its
 * deadline names the neighbours it cannot reach (ring:reform with `unreachable`). After a
 * short window for the other side's report, the room sheds:
 *   - every member named by both of its ring neighbours (two clients) that named one of
 *     them too (it reaches nobody);
 *   - else, for a link named from both ends, one end: the client that was party to shed
 *     links with more different classmates before in this run (the common factor of broken
 *     links), else to more shed links, else the older of the two (issue 57, defect 6: the
 *     newer went before, so a seat that refused one newcomer's link kept it out for good;
 *     now a pure one-to-one refusal costs the two ends in turn, never the newcomer first);
 *   - a report from one end only sheds nobody: one client cannot drop a classmate by
 *     naming it;
 *   - never the chief (membersToShed says why).
 * The ring is never shed empty. A shed member is told why (ERR_UNREACHABLE) and may join
 * again; a joiner shed this way never costs the class its run.
 */
import { WebringError } from '../../shared/protocol/errors';

/**
 * An admission the ring has not switched to this long after it went out, and at least
 * ADMISSION_DEADLINE_TURNS turns later, applies without the tail's vote (switchNow): the
 * class re-forms with the joiners, as after a loss. Three times the link deadline
 * (LINK_OPEN_DEADLINE_MS): a joiner whose links stayed shut has been shed by then.
 */
export const ADMISSION_DEADLINE_MS = 30_000;
/** Turns the class trains past an admission before the deadline may apply it (a round of local steps can outlast the deadline). */
export const ADMISSION_DEADLINE_TURNS = 2;

/** After the first unreachable report of a generation, the room waits this long for the other ends' reports before it sheds. */
export const SHED_REPORT_WINDOW_MS = 1_500;
/** Different classmates kept per client in a run's record of shed links: a class, twice; past it, more tells nothing new. */
const MAX_SHED_PARTNERS_KEPT = 64;

/** One member's report of the neighbours it cannot reach in `generation`. */
export interface UnreachableReport {
  generation: number;
  reporter: string;
  unreachable: string[];
}

/** The formation's state as plain data, in the run's record (so every signaling node sees it). */
export interface FormationRecord {
  /** The newest generation a ring member reported a step trained in, this run. */
  trained: number;
  /** The generation of the newest admission, or null before any this run. */
  admitting: number | null;
  /** The class's step when that admission went out (absent in records from before). */
  admittedAtStep?: number;
  /** Unreachable reports of the current generation. */
  reports: UnreachableReport[];
  /** How many shed links each client was an end of this run (its address, else its member id → count). */
  shedLinks: Record<string, number>;
  /** The different classmates (history keys) each client's shed links were with this run; absent in records from before. */
  shedPartners?: Record<string, string[]>;
  /** The run's bare re-form requests (reform-votes.ts); absent in records from before. */
  reformVotes?: ReformVoteRecord;
}

/** The run's bare re-form requests, as plain data: the votes of one generation, and what each member asked this run. */
export interface ReformVoteRecord {
  /** The generation the current votes are for. */
  generation: number;
  /** Members (ids) who asked for that generation to be re-formed. */
  voters: string[];
  /** Requests that counted this run, per member id (ring members only). */
  counted: Record<string, number>;
  /** Requests past the cap this run, per member id. */
  ignored: Record<string, number>;
}

const newReformVotes = (): ReformVoteRecord => ({ generation: -1, voters: [], counted: {}, ignored: {} });

/**
 * The step most of `members` reported, by their own reports: the median, which neither a
 * chief nor a few extra tabs of one student can move (a maximum, issue 38 showed, could be
 * set to 10⁹ by one of them).
 */
export function medianStep(members: ReadonlyArray<{ step: number }>): number {
  const steps = members.map((m) => m.step).sort((a, b) => a - b);
  return steps[Math.floor(steps.length / 2)] ?? 0;
}

export const newFormation = (): FormationRecord => ({ trained: -1, admitting: null, reports: [], shedLinks: {} });

/** A ring member as the shedding rule sees it: its id, its room index (lower is older) and its client address. */
export interface RingPosition {
  id: string;
  index: number;
  address?: string;
}

export class Formation {
  constructor(private readonly r: FormationRecord) {}

  /** The run's bare re-form requests (reform-votes.ts has the rule). */
  get reformVotes(): ReformVoteRecord {
    return (this.r.reformVotes ??= newReformVotes());
  }

  /** An admission was announced and the ring has not switched to it yet: joiners wait. */
  get admissionForming(): boolean {
    return this.r.admitting !== null && this.r.admitting > this.r.trained;
  }

  /** An admission went out in `generation`, with the class at `step`. */
  admitted(generation: number, step: number): void {
    this.r.admitting = generation;
    this.r.admittedAtStep = step;
  }

  /**
   * Whether admission `generation` is overdue: still forming though the class, by most of
   * its members' own reports (`steps`), trained ADMISSION_DEADLINE_TURNS turns since it went
   * out. A ring switches at the first turn boundary after every member voted ready, so an
   * honest one is long done; one member voting "not ready" forever (issue 38) is not.
   */
  admissionOverdue(generation: number, classStep: number, stepsPerTurn: number): boolean {
    if (!this.forming(generation)) return false;
    return classStep >= (this.r.admittedAtStep ?? 0) + ADMISSION_DEADLINE_TURNS * stepsPerTurn;
  }

  /** Whether admission `generation` is still forming. */
  forming(generation: number): boolean {
    return this.admissionForming && this.r.admitting === generation;
  }

  /** A member trained a step in `generation`; true when that completed the forming admission. */
  trainedIn(generation: number): boolean {
    const wasForming = this.admissionForming;
    this.r.trained = Math.max(this.r.trained, generation);
    return wasForming && !this.admissionForming;
  }

  /**
   * Records `reporter`'s unreachable neighbours in the current generation, replacing its
   * earlier report. Returns true for the generation's first report: the caller schedules
   * the shedding after SHED_REPORT_WINDOW_MS.
   */
  report(report: UnreachableReport): boolean {
    this.r.reports = this.r.reports.filter((x) => x.generation === report.generation && x.reporter !== report.reporter);
    this.r.reports.push(report);
    return this.r.reports.length === 1;
  }

  /** The members to shed from `ring` (generation `generation`), by the rule above; records the links shed. */
  shed(generation: number, ring: readonly RingPosition[]): string[] {
    const reports = this.r.reports.filter((x) => x.generation === generation);
    this.r.reports = [];
    const partners = (this.r.shedPartners ??= {});
    const shed = membersToShed(reports, ring, this.r.shedLinks, partners);
    const byId = new Map(ring.map((m) => [m.id, m]));
    for (const link of shed.links) {
      const [a, b] = link.map((end) => historyKey(byId.get(end)!)) as [string, string];
      for (const [key, other] of [[a, b], [b, a]] as const) {
        this.r.shedLinks[key] = (this.r.shedLinks[key] ?? 0) + 1;
        const known = (partners[key] ??= []);
        if (!known.includes(other) && known.length < MAX_SHED_PARTNERS_KEPT) known.push(other);
      }
    }
    return shed.members;
  }
}

/**
 * The shedding rule as a pure function: `reports` of one generation, the `ring` in rank
 * order, how many shed links each history key (an address, else a member id) was an end of
 * before (`history`), and with which different history keys (`partners`). Issue 38 found
 * two neighbours could shed anyone, the chief included, by naming it; so:
 * - a member named by both neighbours is shed only when it named one of them too (a link
 *   that is really shut is seen from both ends; a claim its other end denies is not), and
 *   when the two are not one client's tabs (different history keys);
 * - the chief is never shed on reports alone: of a shut link to it, the other end goes;
 * - the history follows the client's address, so a seat that rejoins with a fresh member
 *   id keeps the record of the links it broke.
 */
export function membersToShed(
  reports: readonly UnreachableReport[],
  ring: readonly RingPosition[],
  history: Readonly<Record<string, number>>,
  partners: Readonly<Record<string, readonly string[]>> = {},
): { members: string[]; links: Array<[string, string]> } {
  const inRing = new Map(ring.map((m) => [m.id, m]));
  const chief = ring[0]?.id;
  const named = new Map<string, Set<string>>();
  for (const { reporter, unreachable } of reports) {
    if (!inRing.has(reporter)) continue;
    for (const id of unreachable) if (inRing.has(id) && id !== reporter) (named.get(id) ?? named.set(id, new Set()).get(id)!).add(reporter);
  }
  /** Whether `id` named `other` unreachable too. */
  const namesBack = (id: string, other: string) => named.get(other)?.has(id) ?? false;
  // Named by both ring neighbours, two clients, and naming one of them itself: it reaches nobody.
  const isolated = [...named]
    .filter(([id, by]) => id !== chief && new Set([...by].map((b) => historyKey(inRing.get(b)!))).size >= 2 && [...by].some((b) => namesBack(id, b)))
    .map(([id]) => id);
  const shed = new Set(isolated);
  const links: Array<[string, string]> = [];
  // This round's links named from both ends, and each end's different partners among them.
  const both: Array<[string, string]> = [];
  const brokenWith = new Map<string, Set<string>>();
  for (const [a, byA] of named) {
    for (const b of byA) {
      if (a >= b || !namesBack(a, b)) continue;
      both.push([a, b]);
      (brokenWith.get(a) ?? brokenWith.set(a, new Set()).get(a)!).add(b);
      (brokenWith.get(b) ?? brokenWith.set(b, new Set()).get(b)!).add(a);
    }
  }
  // Between members not shed already, one end goes (culpritOf).
  const breadth = (id: string) => brokenWith.get(id)?.size ?? 0;
  for (const [a, b] of both) {
    if (shed.has(a) || shed.has(b)) continue;
    links.push([a, b]);
    shed.add(culpritOf(inRing.get(a)!, inRing.get(b)!, history, partners, breadth, chief));
  }
  // Never shed the whole ring: the oldest member stays.
  if (shed.size >= ring.length) shed.delete(ring.reduce((o, m) => (m.index < o.index ? m : o)).id);
  return { members: ring.filter((m) => shed.has(m.id)).map((m) => m.id), links };
}

/** Where a member's record of broken links is kept: its client address when known, else its member id. */
export function historyKey(m: RingPosition): string {
  return m.address ?? m.id;
}

/**
 * Of a broken link's two ends: never the chief; else the one whose shed links before were
 * with more different classmates (a seat refusing many), else the one party to more shed
 * links, else the one whose links to more classmates broke in this round (`breadth`: a
 * joiner that reaches nobody, where the class shares one address and the isolated rule
 * cannot tell its neighbours apart), else the older. A tie is one-to-one, and the server cannot tell which end refuses:
 * shedding the newer let one seat keep one newcomer out for ever (issue 57, defect 6), so the
 * older goes, and a pair that keeps on refusing costs its two ends in turn.
 */
function culpritOf(
  a: RingPosition,
  b: RingPosition,
  history: Readonly<Record<string, number>>,
  partners: Readonly<Record<string, readonly string[]>>,
  breadth: (id: string) => number,
  chief: string | undefined,
): string {
  if (a.id === chief) return b.id;
  if (b.id === chief) return a.id;
  const pa = partners[historyKey(a)]?.length ?? 0;
  const pb = partners[historyKey(b)]?.length ?? 0;
  if (pa !== pb) return pa > pb ? a.id : b.id;
  const ha = history[historyKey(a)] ?? 0;
  const hb = history[historyKey(b)] ?? 0;
  if (ha !== hb) return ha > hb ? a.id : b.id;
  const ba = breadth(a.id);
  const bb = breadth(b.id);
  if (ba !== bb) return ba > bb ? a.id : b.id;
  return a.index < b.index ? a.id : b.id;
}

/**
 * Throws ERR_BAD_REQUEST unless every member `reporter` names is one of its ring
 * neighbours in the current generation: nobody may name a member it does not link to.
 */
export function checkNamedNeighbours(ring: readonly RingPosition[], reporter: string, unreachable: readonly string[]): void {
  const rank = ring.findIndex((m) => m.id === reporter);
  const n = ring.length;
  const neighbours = new Set(rank < 0 || n < 2 ? [] : [ring[(rank + n - 1) % n]!.id, ring[(rank + 1) % n]!.id]);
  const stranger = unreachable.find((id) => !neighbours.has(id));
  if (stranger !== undefined) throw new WebringError('ERR_BAD_REQUEST', `member ${stranger} is not a ring neighbour of the reporter in this generation`, 'unreachable');
}
