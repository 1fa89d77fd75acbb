import { isNotDue } from './orphanedVersions.js';
import type { PlannedAction, TickResult } from './types.js';

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

type Pass = 'dead' | 'stuck' | 'diverged' | 'orphaned' | 'retention' | 'timelines';
const PASSES: readonly Pass[] = ['dead', 'stuck', 'diverged', 'orphaned', 'retention', 'timelines'];

const COUNTS: Record<Pass, string[]> = {
  dead: ['candidates', 'alive', 'absent', 'unknown', 'published', 'recoveredInline', 'reenqueued', 'reappeared', 'activityResumed'],
  stuck: ['examined', 'found', 'reported', 'cancelled', 'forked', 'raced'],
  diverged: ['found', 'handed', 'failed'],
  orphaned: ['found', 'reported', 'forked', 'failed', 'notForked'],
  retention: ['deleted', 'steps', 'batches', 'timedOut'],
  timelines: ['closed', 'bounded'],
};

export interface Tally {
  totals: Record<Pass, PassTotals>;
  declaredDead: string[];
  stuck: Set<string>;
  heartbeatSkipped: Set<string>;
  orphanedSkipped: Set<string>;
  orphaned: Set<string>;
  errors: Array<{ tick: number; pass: string; error: string }>;
  /** Dry-run actions; the tick appends to this list itself. */
  planned: PlannedAction[];
  sessions: 'visible' | 'unknown' | 'not-needed';
}

export function newTally(): Tally {
  const totals = {
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
  const ticked = !('error' in r.dead);
  if (!('error' in r.dead)) {
    t.declaredDead.push(...r.dead.declared);
    if (typeof r.dead.heartbeat === 'object') t.heartbeatSkipped.add(r.dead.heartbeat.skipped);
    if (r.dead.sessions !== 'not-needed' && t.sessions !== 'unknown') t.sessions = r.dead.sessions;
  }
  if ('workflowIds' in r.stuck) for (const id of r.stuck.workflowIds) t.stuck.add(id);
  if ('workflowIds' in r.orphaned) for (const id of r.orphaned.workflowIds) t.orphaned.add(id);
  if ('skipped' in r.orphaned && typeof r.orphaned.skipped === 'string' && !isNotDue(r.orphaned)) t.orphanedSkipped.add(r.orphaned.skipped);
  return ticked;
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

function accumulate(totals: Record<Pass, PassTotals>, r: TickResult, errors: Array<{ tick: number; pass: string; error: string }>): void {
  for (const pass of PASSES) {
    const p = r[pass] as unknown as Record<string, unknown>;
    const t = totals[pass];
    // A pass that did not run this tick (not due, or its prerequisite failed) is not counted.
    if (typeof p.skipped === 'string' && !('found' in p)) continue;
    t.runs += 1;
    t.durationMs += Number(p.durationMs);
    t.maxDurationMs = Math.max(t.maxDurationMs, Number(p.durationMs));
    if (typeof p.error === 'string') {
      t.errors += 1;
      errors.push({ tick: r.tick, pass, error: p.error });
      continue;
    }
    for (const key of COUNTS[pass]) if (typeof p[key] === 'number') t[key] = (t[key] ?? 0) + p[key];
  }
}
