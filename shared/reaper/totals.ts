import { isNotDue } from './orphanedVersions.js';
import { type CountKey, PASS_NAMES, type PassName, type PassResults, type PlannedAction, type TickResult } from './types.js';

/**
 * What one reaper invocation adds up across its ticks for its summary: per-pass runs, errors, durations
 * and counts, the executors declared dead, the workflows found stuck or orphaned, and why evidence was
 * skipped. Apart from index.ts so the invocation there reads as lease, ticks, summary.
 */
export interface PassTotals {
  runs: number;
  errors: number;
  durationMs: number;
  maxDurationMs: number;
  [count: string]: number;
}

/** The counts each pass adds up in the summary (the compiler holds each list to its pass's numeric fields). */
const COUNTS: { [P in PassName]: ReadonlyArray<CountKey<PassResults[P]>> } = {
  dead: ['candidates', 'alive', 'absent', 'unknown', 'published', 'recoveredInline', 'reenqueued', 'reappeared', 'activityResumed'],
  stuck: ['examined', 'found', 'reported', 'cancelled', 'forked', 'raced'],
  diverged: ['found', 'handed', 'failed'],
  orphaned: ['found', 'reported', 'forked', 'failed', 'notForked'],
  retention: ['deleted', 'steps', 'batches', 'timedOut'],
  timelines: ['closed', 'bounded'],
};

export interface Tally {
  totals: Record<PassName, PassTotals>;
  declaredDead: string[];
  stuck: Set<string>;
  heartbeatSkipped: Set<string>;
  orphanedSkipped: Set<string>;
  orphaned: Set<string>;
  errors: Array<{ tick: number; pass: PassName; error: string }>;
  /** Dry-run actions; the tick appends to this list itself. */
  planned: PlannedAction[];
  sessions: 'visible' | 'unknown' | 'not-needed';
}

export function newTally(): Tally {
  const totals: Record<PassName, PassTotals> = {
    dead: emptyTotals(),
    stuck: emptyTotals(),
    diverged: emptyTotals(),
    orphaned: emptyTotals(),
    retention: emptyTotals(),
    timelines: emptyTotals(),
  };
  return {
    totals,
    declaredDead: [],
    stuck: new Set(),
    heartbeatSkipped: new Set(),
    orphanedSkipped: new Set(),
    orphaned: new Set(),
    errors: [],
    planned: [],
    sessions: 'not-needed',
  };
}

/** Adds one tick in; whether it ticked at all (its dead pass ran rather than failing, e.g. on a database outage). */
export function collect(t: Tally, r: TickResult): boolean {
  accumulate(t.totals, r, t.errors);
  if (r.dead.kind === 'ran') {
    t.declaredDead.push(...r.dead.declared);
    if (typeof r.dead.heartbeat === 'object') t.heartbeatSkipped.add(r.dead.heartbeat.skipped);
    if (r.dead.sessions !== 'not-needed' && t.sessions !== 'unknown') t.sessions = r.dead.sessions;
  }
  if (r.stuck.kind === 'ran') for (const id of r.stuck.workflowIds) t.stuck.add(id);
  if (r.orphaned.kind === 'ran') {
    for (const id of r.orphaned.workflowIds) t.orphaned.add(id);
    // Ran, but could not act (no fork module wired): said like a skip.
    if (r.orphaned.skipped !== undefined) t.orphanedSkipped.add(r.orphaned.skipped);
  } else if (r.orphaned.kind === 'skipped' && !isNotDue(r.orphaned)) t.orphanedSkipped.add(r.orphaned.reason);
  return r.dead.kind === 'ran';
}

/** The tally as the summary's fields, in the summary's order. */
export function tallied(t: Tally, dryRun: boolean) {
  return {
    passes: t.totals,
    declaredDead: t.declaredDead,
    stuckWorkflows: [...t.stuck],
    heartbeatSkipped: [...t.heartbeatSkipped],
    orphanedSkipped: [...t.orphanedSkipped],
    orphanedWorkflows: [...t.orphaned],
    sessions: t.sessions,
    ...(dryRun ? { planned: t.planned } : {}),
    errors: t.errors,
  };
}

function emptyTotals(): PassTotals {
  return { runs: 0, errors: 0, durationMs: 0, maxDurationMs: 0 };
}

function accumulate(totals: Record<PassName, PassTotals>, r: TickResult, errors: Tally['errors']): void {
  for (const pass of PASS_NAMES) {
    const o = r[pass];
    const t = totals[pass];
    // A pass that did not run this tick (not due, or its prerequisite failed) is not counted.
    if (o.kind === 'skipped') continue;
    t.runs += 1;
    t.durationMs += o.durationMs;
    t.maxDurationMs = Math.max(t.maxDurationMs, o.durationMs);
    if (o.kind === 'error') {
      t.errors += 1;
      errors.push({ tick: r.tick, pass, error: o.error });
      continue;
    }
    for (const [key, n] of countsOf(o, COUNTS[pass])) t[key] = (t[key] ?? 0) + n;
  }
}

/** The listed counts a pass reported (a count a pass leaves out is not added). */
export function countsOf(result: object, keys: readonly string[]): Array<[string, number]> {
  const fields = new Map<string, unknown>(Object.entries(result));
  return keys.flatMap((key): Array<[string, number]> => {
    const v = fields.get(key);
    return typeof v === 'number' ? [[key, v]] : [];
  });
}
