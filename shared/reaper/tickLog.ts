import type { Fields, Logger } from '../../packages/executor/src/plane/index.js';
import { countsOf } from './totals.js';
import { type CountKey, PASS_NAMES, type PassName, type PassOutcome, type PassResults, type TickResult } from './types.js';

/**
 * What the reaper says about its ticks: a tick that did something (declared, recovered, repaired,
 * reported, or failed) gets its own `reaper_tick` line at the level it deserves; every tick, eventful or
 * quiet, is counted into one `reaper_ticks` line a minute (and one at the end of the invocation) with the
 * counts and the slowest tick. A line per quiet tick would be four a second (~260 MB a day in Cloud
 * Logging); an idle reaper prints one summary a minute, and the "reaper is not ticking"
 * alert counts those summaries (infra/monitoring.tf).
 */

/** One `reaper_ticks` summary per this much time, and one when the invocation ends. */
export const TICK_SUMMARY_EVERY_MS = 60_000;

/**
 * The events an idle reaper still logs: its per-minute summary and its per-invocation summary. The
 * absence alert and the dashboard's tick panel may only count these (test/infra/check.ts), and the idle
 * log test (test/integration/reaper/quietLogs.test.ts) sees exactly these.
 */
export const IDLE_EVENTS = ['reaper_ticks', 'reaper_summary'] as const;

/** The budget docs/logging.md states: lines an idle reaper writes per minute of ticking, at most. */
export const IDLE_LINES_PER_MINUTE = 4;

/** While every tick fails (the database is down), one tick line in this many, not four a second. */
const TICK_LOG_EVERY_FAILED = 20;

type Counts = { [P in PassName]: ReadonlyArray<CountKey<PassResults[P]>> };

/** Counts that mean the pass did or found something worth a line of its own. */
const ACTIONS: Counts = {
  dead: ['published', 'recoveredInline', 'reenqueued', 'reappeared', 'activityResumed'],
  stuck: ['found', 'reported', 'cancelled', 'forked', 'raced'],
  diverged: ['found', 'handed', 'failed'],
  orphaned: ['found', 'reported', 'forked', 'failed'],
  retention: ['deleted', 'timedOut'],
  // A closed timeline has its own line (recovery_timeline): it makes no tick eventful.
  timelines: [],
};
const FAILURES: Counts = {
  dead: [],
  stuck: ['raced'],
  diverged: ['failed'],
  orphaned: ['failed'],
  retention: [],
  timelines: [],
};

export type TickKind = 'quiet' | 'eventful' | 'failed';

export function tickKind(r: TickResult): TickKind {
  if (PASS_NAMES.some((pass) => r[pass].kind === 'error')) return 'failed';
  const declared = r.dead.kind === 'ran' && r.dead.declared.length > 0;
  return declared || counted(r, ACTIONS) ? 'eventful' : 'quiet';
}

function hasFailures(r: TickResult): boolean {
  return counted(r, FAILURES);
}

/** Whether any pass that ran reported a count above zero among those listed for it. */
function counted(r: TickResult, lists: Counts): boolean {
  return PASS_NAMES.some((pass) => {
    const o = r[pass];
    return o.kind === 'ran' && countsOf(o, lists[pass]).some(([, n]) => n > 0);
  });
}

export class TickLog {
  private windowStart: number;
  private ticks = 0;
  private eventful = 0;
  private failed = 0;
  private failingStreak = 0;
  private totalMs = 0;
  private slowest: { ms: number; tick: number } = { ms: 0, tick: 0 };
  private candidatesMax = 0;
  private aliveLast: number | undefined;

  constructor(
    private readonly log: Logger,
    private readonly clock: () => number,
    private readonly everyMs = TICK_SUMMARY_EVERY_MS,
  ) {
    this.windowStart = clock();
  }

  /** One tick's result: its own line if it did something, and its share of the next summary. */
  record(r: TickResult): void {
    const kind = tickKind(r);
    this.ticks += 1;
    this.totalMs += r.durationMs;
    if (r.durationMs > this.slowest.ms) this.slowest = { ms: r.durationMs, tick: r.tick };
    if (r.dead.kind === 'ran') {
      this.candidatesMax = Math.max(this.candidatesMax, r.dead.candidates);
      this.aliveLast = r.dead.alive;
    }
    if (kind === 'failed') {
      this.failed += 1;
      // The pass logged its ERROR with the cause; this says which tick, without repeating it four times a second.
      if (this.failingStreak++ % TICK_LOG_EVERY_FAILED === 0)
        this.log.warn('reaper tick failed', { event: 'reaper_tick', outcome: 'failed', failingTicks: this.failingStreak, ...tickLine(r) });
    } else {
      this.failingStreak = 0;
      if (kind === 'eventful') {
        this.eventful += 1;
        const fields = { event: 'reaper_tick', outcome: 'eventful', ...tickLine(r) };
        if (hasFailures(r)) this.log.warn('reaper tick: some actions failed', fields);
        else this.log.notice('reaper tick acted', fields);
      }
    }
    if (this.clock() - this.windowStart >= this.everyMs) this.flush();
  }

  /** The summary of the ticks since the last one (at most a minute's); nothing if there were none. */
  flush(): void {
    const now = this.clock();
    if (this.ticks > 0) {
      const quiet = this.ticks - this.eventful - this.failed;
      const fields: Fields = {
        event: 'reaper_ticks',
        windowMs: now - this.windowStart,
        ticks: this.ticks,
        quiet,
        eventful: this.eventful,
        failed: this.failed,
        meanMs: Math.round((this.totalMs / this.ticks) * 100) / 100,
        slowestMs: this.slowest.ms,
        slowestTick: this.slowest.tick,
        candidates: this.candidatesMax,
        ...(this.aliveLast !== undefined ? { alive: this.aliveLast } : {}),
      };
      const message = `reaper: ${this.ticks} ticks (${quiet} quiet, ${this.eventful} acted, ${this.failed} failed), slowest ${this.slowest.ms} ms`;
      if (this.failed > 0) this.log.warn(message, fields);
      else this.log.info(message, fields);
    }
    this.windowStart = now;
    this.ticks = 0;
    this.eventful = 0;
    this.failed = 0;
    this.totalMs = 0;
    this.slowest = { ms: 0, tick: 0 };
    this.candidatesMax = 0;
    this.aliveLast = undefined;
  }
}

/** An eventful tick's line: durations and counts, no long lists. */
function tickLine(r: TickResult): Record<string, unknown> {
  return {
    tick: r.tick,
    durationMs: r.durationMs,
    ...Object.fromEntries(PASS_NAMES.map((pass) => [pass, onTheLine(r[pass])])),
  };
}

/**
 * A pass's outcome as the line carries it (log-based metrics and docs/logging.md read these fields): a
 * result's fields, `{ skipped }` or `{ error }`, each with durationMs; lists longer than 10 left out.
 */
function onTheLine(o: PassOutcome<object>): Record<string, unknown> {
  if (o.kind === 'skipped') return { skipped: o.reason, durationMs: o.durationMs };
  if (o.kind === 'error') return { error: o.error, durationMs: o.durationMs };
  return Object.fromEntries(Object.entries(o).filter(([k, v]) => k !== 'kind' && (!Array.isArray(v) || v.length <= 10)));
}
