import { leaseName } from './unguarded.js';
import { ConfigError } from '../../packages/executor/src/plane/index.js';
import { type Budget, budgetFrom, budgetUntil } from '../lifecycle/deadline.js';
import { ReaperLease } from './lease.js';
import { relationProblems } from '../config/bounds.js';
import { runTick } from './tick.js';
import { TickLog } from './tickLog.js';
import { collect, newTally, type PassTotals, type Tally, tallied } from './totals.js';
import type { PassName, PlannedAction, ReaperDeps, ReaperState, TickResult } from './types.js';

export type { ReaperDeps } from './types.js';
export type { PassTotals } from './totals.js';

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
  dryRun?: boolean | undefined;
  /** Stop after this many ticks (tests, `afterlife-plane reap --once`). */
  maxTicks?: number | undefined;
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

export type ReaperSummary =
  | { outcome: 'skipped'; reason: string; holder: string; dryRun: boolean }
  | {
      outcome: 'completed';
      holder: string;
      dryRun: boolean;
      ticks: number;
      durationMs: number;
      stoppedBecause: 'budget' | 'max-ticks' | 'lease-lost' | 'shutting-down';
      passes: Record<PassName, PassTotals>;
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
      errors: Array<{ tick: number; pass: PassName; error: string }>;
    };

export { leaseName };

export async function runReaper(deps: ReaperDeps, opts: ReaperOptions = {}): Promise<ReaperSummary> {
  const { config, db } = deps;
  const startedAt = opts.startedAt ?? deps.clock();
  const dryRun = opts.dryRun ?? false;
  // The instance's name, not the invocation's: after a blip the same instance takes its own lease back.
  const holder = deps.detectedBy;
  const log = deps.logger.child({ fn: 'reaper', holder, dryRun });
  const tickMs = config.reaper.tickMs;
  // loadConfig already refused such a lease; a config built in code (tests, embedders) meets the same rule.
  const problems = relationProblems({ REAPER_TICK_MS: tickMs, REAPER_LEASE_MS: config.reaper.leaseMs });
  if (problems.length) throw new ConfigError(problems);
  const lease = new ReaperLease(db, {
    name: leaseName(config.applicationName),
    holder,
    leaseMs: config.reaper.leaseMs,
    clock: deps.clock,
    log,
  });
  const budget = budgetFrom(startedAt, config.functionTimeoutS, config.budgetMarginMs, deps.clock);
  const taken = await takeLease(deps, opts, lease, budget);
  if (!taken.acquired) {
    log.info('another reaper holds the lease: skipped', { event: 'reaper_skipped', standby: opts.standby ?? false });
    return { outcome: 'skipped', reason: 'another reaper holds the lease', holder, dryRun };
  }
  // Worth a line: longer than an ordinary hand-over between invocations (a tick or two, ~250–600 ms).
  const gapWorthLogging = Math.max(GAP_LOG_AFTER_MS, 4 * tickMs);
  if (taken.sinceLastTickMs !== undefined && taken.sinceLastTickMs > gapWorthLogging) {
    log.warn('no reaper ticked for a while before this one took the lease', { gapMs: taken.sinceLastTickMs, event: 'reaper_tick_gap' });
  }
  const v: Invocation = {
    deps,
    opts,
    log,
    lease,
    budget,
    dryRun,
    holder,
    gapWorthLogging,
    tally: newTally(),
    state: {},
    ticks: 0,
    lastTickAt: deps.clock(),
    stoppedBecause: 'budget',
  };
  const tickLog = new TickLog(log, deps.clock);
  try {
    await tickUntilDone(v, tickLog);
  } finally {
    tickLog.flush();
    await lease.release(Math.max(deps.clock() + 1_000, budget.deadline + config.budgetMarginMs / 2));
  }
  const summary: ReaperSummary = {
    outcome: 'completed',
    holder,
    dryRun,
    ticks: v.ticks,
    durationMs: deps.clock() - startedAt,
    stoppedBecause: v.stoppedBecause,
    ...tallied(v.tally, dryRun),
  };
  log.info('reaper invocation finished', { event: 'reaper_summary', ...summary, planned: dryRun ? v.tally.planned.length : undefined });
  return summary;
}

/** A stretch without a tick longer than this (or four ticks) is logged with its length (`reaper_tick_gap`). */
export const GAP_LOG_AFTER_MS = 1_000;

type StopReason = 'budget' | 'max-ticks' | 'lease-lost' | 'shutting-down';

/** One invocation's running state between its ticks. */
interface Invocation {
  deps: ReaperDeps;
  opts: ReaperOptions;
  log: ReaperDeps['logger'];
  lease: ReaperLease;
  budget: Budget;
  dryRun: boolean;
  holder: string;
  gapWorthLogging: number;
  tally: Tally;
  state: ReaperState;
  ticks: number;
  lastTickAt: number;
  stoppedBecause: StopReason;
}

/** Takes the lease, or — as a standby — keeps trying until the holder lets go or dies. */
async function takeLease(
  deps: ReaperDeps,
  opts: ReaperOptions,
  lease: ReaperLease,
  budget: Budget,
): Promise<Awaited<ReturnType<ReaperLease['tryAcquire']>>> {
  const tickMs = deps.config.reaper.tickMs;
  let taken = await lease.tryAcquire();
  while (!taken.acquired && opts.standby && !opts.signal?.aborted && deps.clock() + tickMs < budget.deadline) {
    if (!(await sleepUntil(deps.clock() + tickMs, deps.clock, opts.signal))) break;
    taken = await lease.tryAcquire();
  }
  return taken;
}

/** Ticks every REAPER_TICK_MS until the budget, the tick limit, the lease or a shutdown stops it. */
async function tickUntilDone(v: Invocation, tickLog: TickLog): Promise<void> {
  const { deps, opts } = v;
  for (;;) {
    const tickStart = deps.clock();
    v.ticks += 1;
    if (deps.faults.enabled) await deps.faults.hit('reaper.tick', { tick: v.ticks, holder: v.holder });
    // A tick stops at a boundary when the invocation's budget or the lease runs out, whichever is first.
    const tickBudget = budgetUntil(Math.min(v.budget.deadline, v.lease.validUntil), deps.clock);
    const r = await runTick(
      deps,
      { tick: v.ticks, dryRun: v.dryRun, planned: v.tally.planned, signal: opts.signal, budget: tickBudget },
      v.state,
    );
    const ticked = collect(v.tally, r);
    if (ticked) {
      const now = deps.clock();
      // A tick that found the database down is no tick: the gap is logged once ticks resume.
      if (now - v.lastTickAt > v.gapWorthLogging + r.durationMs)
        v.log.warn('reaper ticks resumed after a gap', { gapMs: now - v.lastTickAt, event: 'reaper_tick_gap' });
      v.lastTickAt = now;
    }
    tickLog.record(r);
    opts.onTick?.(r);
    const stop = await afterTick(v, r, ticked, tickStart + deps.config.reaper.tickMs);
    if (stop) {
      v.stoppedBecause = stop;
      return;
    }
  }
}

/** Renews the lease and waits for the next tick; why to stop instead, if anything says so. */
async function afterTick(v: Invocation, r: TickResult, tickDone: boolean, next: number): Promise<StopReason | undefined> {
  // A dry run's tick is not a guard's tick: last_tick_at tells kits and `status` that a plane guards the app.
  const ticked = tickDone && !v.dryRun;
  if (v.opts.maxTicks !== undefined && v.ticks >= v.opts.maxTicks) {
    // The last tick is recorded too, so the next holder measures its gap from here.
    await v.lease.renew(ticked);
    return 'max-ticks';
  }
  // Stop when the next tick could not finish inside the budget (assume it takes as long as this one).
  if (next + r.durationMs >= v.budget.deadline) {
    await v.lease.renew(ticked);
    return 'budget';
  }
  const renewed = await v.lease.renew(ticked);
  if (renewed === 'lost') {
    v.log.warn('reaper lease lost (lapsed and taken over): stopping', { event: 'reaper_lease_lost' });
    return 'lease-lost';
  }
  if (!(await sleepUntil(next, v.deps.clock, v.opts.signal))) return 'shutting-down';
  // A renew that failed (the database is away) is simply tried again after the next tick: the lease is
  // named after this instance, so once the database answers the renew succeeds — unless another
  // reaper took the lease meanwhile, and then it says 'lost'. Until then the lapsed lease leaves the
  // tick no budget, so it acts on nothing.
  return undefined;
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
