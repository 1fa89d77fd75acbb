import { ConfigError } from '../errors.js';
import { budgetFrom, budgetUntil } from '../lifecycle/deadline.js';
import { ReaperLease } from './lease.js';
import { isNotDue } from './orphanedVersions.js';
import { runTick } from './tick.js';
import { TickLog } from './tickLog.js';
import type { PlannedAction, ReaperDeps, ReaperState, TickResult } from './types.js';

export type { ReaperDeps } from './types.js';

/**
 * One reaper invocation: take the single-flight lease, then tick every REAPER_TICK_MS until the budget
 * (the function timeout minus a margin) runs out, renewing the lease each tick, and answer with a JSON
 * summary. Detection is therefore bound to the tick, not to Cloud Scheduler's one-minute floor.
 *
 * The lease is renewed only between ticks, so a tick's work is budgeted against the lease as well as the
 * invocation: its loops stop at a boundary by `renewedAt + REAPER_LEASE_MS − DB_STATEMENT_TIMEOUT_MS`, so
 * the statement after the last boundary commits before the lease can lapse and a second reaper take it.
 */
export interface ReaperOptions {
  dryRun?: boolean;
  /** Stop after this many ticks (tests, `afterlife reap --once`). */
  maxTicks?: number;
  /** When the invocation started; the budget counts from here. */
  startedAt?: number;
  signal?: AbortSignal;
  /** Called after every tick with its result (the CLI's progress). */
  onTick?: (r: TickResult) => void;
  /**
   * When another reaper holds the lease, wait for it (polling every tick) until the budget ends instead of
   * returning `skipped`: the Scheduler-driven function does, so a dead holder is replaced within a lease.
   */
  standby?: boolean;
}

export interface PassTotals {
  runs: number;
  errors: number;
  durationMs: number;
  maxDurationMs: number;
  [count: string]: number;
}

export type ReaperSummary =
  | { outcome: 'skipped'; reason: string; holder: string; dryRun: boolean }
  | {
      outcome: 'completed';
      holder: string;
      dryRun: boolean;
      ticks: number;
      durationMs: number;
      stoppedBecause: 'budget' | 'max-ticks' | 'lease-lost' | 'shutting-down';
      passes: { dead: PassTotals; stuck: PassTotals; diverged: PassTotals; orphaned: PassTotals; retention: PassTotals };
      declaredDead: string[];
      stuckWorkflows: string[];
      /** Why heartbeat evidence was skipped, per distinct reason (e.g. redis unreachable). */
      heartbeatSkipped: string[];
      /** Why the orphaned-versions pass was skipped, per distinct reason (e.g. redis unreachable). */
      orphanedSkipped: string[];
      /** ENQUEUED workflows found on a version no live executor runs. */
      orphanedWorkflows: string[];
      sessions: 'visible' | 'unknown' | 'not-needed';
      planned?: PlannedAction[];
      errors: Array<{ tick: number; pass: string; error: string }>;
    };

export const leaseName = (applicationName: string) => `reaper:${applicationName}`;

export async function runReaper(deps: ReaperDeps, opts: ReaperOptions = {}): Promise<ReaperSummary> {
  const { config, db } = deps;
  const startedAt = opts.startedAt ?? deps.clock();
  const dryRun = opts.dryRun ?? false;
  // The instance's name, not the invocation's: after a blip the same instance takes its own lease back.
  const holder = deps.detectedBy;
  const log = deps.logger.child({ fn: 'reaper', holder, dryRun });
  const tickMs = config.reaper.tickMs;
  if (config.reaper.leaseMs < 2 * tickMs) {
    throw new ConfigError([`REAPER_LEASE_MS (${config.reaper.leaseMs}) must be at least two ticks (REAPER_TICK_MS ${tickMs})`]);
  }
  const lease = new ReaperLease(db, leaseName(config.applicationName), holder, config.reaper.leaseMs, deps.clock, log);
  const budget = budgetFrom(startedAt, config.functionTimeoutS, config.budgetMarginMs, deps.clock);

  // Take the lease, or — as a standby — keep trying until the holder lets go or dies.
  let taken = await lease.tryAcquire();
  while (!taken.acquired && opts.standby && !opts.signal?.aborted && deps.clock() + tickMs < budget.deadline) {
    if (!(await sleepUntil(deps.clock() + tickMs, deps.clock, opts.signal))) break;
    taken = await lease.tryAcquire();
  }
  if (!taken.acquired) {
    log.info('another reaper holds the lease: skipped', { event: 'reaper_skipped', standby: opts.standby ?? false });
    return { outcome: 'skipped', reason: 'another reaper holds the lease', holder, dryRun };
  }
  // Worth a line: longer than an ordinary hand-over between invocations (a tick or two, ~250–600 ms).
  const gapWorthLogging = Math.max(GAP_LOG_AFTER_MS, 4 * tickMs);
  if (taken.sinceLastTickMs !== undefined && taken.sinceLastTickMs > gapWorthLogging) {
    log.warn('no reaper ticked for a while before this one took the lease', { gapMs: taken.sinceLastTickMs, event: 'reaper_tick_gap' });
  }
  const totals = { dead: emptyTotals(), stuck: emptyTotals(), diverged: emptyTotals(), orphaned: emptyTotals(), retention: emptyTotals() };
  const declaredDead: string[] = [];
  const stuck = new Set<string>();
  const heartbeatSkipped = new Set<string>();
  const orphanedSkipped = new Set<string>();
  const orphaned = new Set<string>();
  const errors: Array<{ tick: number; pass: string; error: string }> = [];
  const planned: PlannedAction[] = [];
  let sessions: 'visible' | 'unknown' | 'not-needed' = 'not-needed';
  const state: ReaperState = {};
  let ticks = 0;
  let lastTickAt = deps.clock();
  let stoppedBecause: 'budget' | 'max-ticks' | 'lease-lost' | 'shutting-down' = 'budget';
  const tickLog = new TickLog(log, deps.clock);

  try {
    for (;;) {
      const tickStart = deps.clock();
      ticks += 1;
      if (deps.faults.enabled) await deps.faults.hit('reaper.tick', { tick: ticks, holder });
      // A tick stops at a boundary when the invocation's budget or the lease runs out, whichever is first.
      const tickBudget = budgetUntil(Math.min(budget.deadline, lease.validUntil), deps.clock);
      const r = await runTick(deps, { tick: ticks, dryRun, planned, signal: opts.signal }, tickBudget, state);
      accumulate(totals, r, errors);
      const ticked = !('error' in r.dead);
      if (!('error' in r.dead)) {
        declaredDead.push(...r.dead.declared);
        if (typeof r.dead.heartbeat === 'object') heartbeatSkipped.add(r.dead.heartbeat.skipped);
        if (r.dead.sessions !== 'not-needed' && sessions !== 'unknown') sessions = r.dead.sessions;
      }
      if ('workflowIds' in r.stuck) for (const id of r.stuck.workflowIds) stuck.add(id);
      if ('workflowIds' in r.orphaned) for (const id of r.orphaned.workflowIds) orphaned.add(id);
      if ('skipped' in r.orphaned && typeof r.orphaned.skipped === 'string' && !isNotDue(r.orphaned)) orphanedSkipped.add(r.orphaned.skipped);
      if (ticked) {
        const now = deps.clock();
        // A tick that found the database down is no tick: the gap is logged once ticks resume.
        if (now - lastTickAt > gapWorthLogging + r.durationMs) log.warn('reaper ticks resumed after a gap', { gapMs: now - lastTickAt, event: 'reaper_tick_gap' });
        lastTickAt = now;
      }
      tickLog.record(r);
      opts.onTick?.(r);

      if (opts.maxTicks !== undefined && ticks >= opts.maxTicks) {
        stoppedBecause = 'max-ticks';
        // The last tick is recorded too, so the next holder measures its gap from here.
        await lease.renew(ticked);
        break;
      }
      const next = tickStart + tickMs;
      // Stop when the next tick could not finish inside the budget (assume it takes as long as this one).
      if (next + r.durationMs >= budget.deadline) {
        await lease.renew(ticked);
        break;
      }
      const renewed = await lease.renew(ticked);
      if (renewed === 'lost') {
        log.warn('reaper lease lost (lapsed and taken over): stopping', { event: 'reaper_lease_lost' });
        stoppedBecause = 'lease-lost';
        break;
      }
      if (!(await sleepUntil(next, deps.clock, opts.signal))) {
        stoppedBecause = 'shutting-down';
        break;
      }
      // A renew that failed (the database is away) is simply tried again after the next tick: the lease is
      // named after this instance, so once the database answers the renew succeeds — unless another
      // reaper took the lease meanwhile, and then it says 'lost'. Until then the lapsed lease leaves the
      // tick no budget, so it acts on nothing.
    }
  } finally {
    tickLog.flush();
    await lease.release(Math.max(deps.clock() + 1_000, budget.deadline + config.budgetMarginMs / 2));
  }
  const summary: ReaperSummary = {
    outcome: 'completed',
    holder,
    dryRun,
    ticks,
    durationMs: deps.clock() - startedAt,
    stoppedBecause,
    passes: totals,
    declaredDead,
    stuckWorkflows: [...stuck],
    heartbeatSkipped: [...heartbeatSkipped],
    orphanedSkipped: [...orphanedSkipped],
    orphanedWorkflows: [...orphaned],
    sessions,
    ...(dryRun ? { planned } : {}),
    errors,
  };
  log.info('reaper invocation finished', { event: 'reaper_summary', ...summary, planned: dryRun ? planned.length : undefined });
  return summary;
}

/** A stretch without a tick longer than this (or four ticks) is logged with its length (`reaper_tick_gap`). */
export const GAP_LOG_AFTER_MS = 1_000;

function emptyTotals(): PassTotals {
  return { runs: 0, errors: 0, durationMs: 0, maxDurationMs: 0 };
}

type Pass = 'dead' | 'stuck' | 'diverged' | 'orphaned' | 'retention';
const PASSES: readonly Pass[] = ['dead', 'stuck', 'diverged', 'orphaned', 'retention'];

const COUNTS: Record<Pass, string[]> = {
  dead: ['candidates', 'alive', 'absent', 'published', 'recoveredInline', 'reenqueued', 'reappeared', 'activityResumed'],
  stuck: ['examined', 'found', 'reported', 'cancelled', 'forked', 'raced'],
  diverged: ['found', 'handed', 'failed'],
  orphaned: ['found', 'reported', 'forked', 'failed', 'notForked'],
  retention: ['deleted', 'steps', 'batches', 'timedOut'],
};

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

/** Sleeps until `at`; false if the signal aborted first. Holds no connection. */
function sleepUntil(at: number, clock: () => number, signal: AbortSignal | undefined): Promise<boolean> {
  const ms = Math.max(0, at - clock());
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
