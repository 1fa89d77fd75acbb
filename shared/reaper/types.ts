import type { DryStreaks } from './observe.js';
import type { FleetView } from './fleetView.js';
import type { Budget } from '../lifecycle/deadline.js';
import type { OrphanInfo, OrphanOutcome } from '../repair/situations/orphanOutcome.js';
import type { Runtime } from '../runtime.js';
import type { RetentionPassResult, RetentionTuning } from '../retention/pass.js';
import type { TimelinePassResult } from './timelines.js';

/**
 * What the reaper needs, passed in. The repair hooks are dependencies rather than imports so that the
 * reaper's passes run (and are tested) without the repair module: without them, diverged workflows are
 * only reported and stuck ones only cancelled. shared/reaper/deps.ts wires them for both entry points.
 */
export interface ReaperDeps extends Pick<Runtime, 'config' | 'db' | 'redis' | 'lock' | 'publisher' | 'logger' | 'faults' | 'clock'> {
  /** Who detects, for death notices and the recovery audit. */
  detectedBy: string;
  /** Repairs one diverged workflow (rewind, or fork under REPAIR_MODE=fork: `repairDiverged` of shared/repair). */
  repairDiverged?: (workflowId: string) => Promise<unknown>;
  /** Repairs a stuck workflow the reaper just cancelled (`cancel-and-repair` / `cancel-and-fork`); returns the ID its work goes on under. */
  repairStuck?: (workflowId: string) => Promise<string | undefined>;
  /** Repairs one version's orphaned rows onto the latest version (`repairOrphaned` of shared/repair/situations: rewind, or fork). */
  repairOrphaned?: (info: OrphanInfo & { applicationVersion: string }) => Promise<OrphanOutcome[]>;
  /** Cancels originals of fork-to-latest forks interrupted before their cancel (`cancelForkedOriginals`). */
  finishInterruptedForks?: () => Promise<string[]>;
}

/** One planned action, listed in dry-run summaries instead of being carried out. */
export interface PlannedAction {
  pass: Exclude<PassName, 'timelines'>;
  action: 'declare-dead' | 'recover-inline' | 'report' | 'cancel' | 'fork' | 'delete';
  executorId?: string;
  workflowId?: string;
  detail?: Record<string, unknown>;
}

export interface TickContext {
  tick: number;
  dryRun: boolean;
  planned: PlannedAction[];
  /** Aborts long work at the next boundary (our own SIGTERM, the invocation budget). */
  signal?: AbortSignal | undefined;
  /** The tick's work budget (the invocation's, capped by the lease): every pass stops at a boundary when it runs out. */
  budget: Budget;
}

/** A pass's loops stop here: shutting down, or the tick's budget spent (the rest waits for the next tick). */
export function shouldStop(ctx: TickContext): boolean {
  return (ctx.signal?.aborted ?? false) || ctx.budget.expired();
}

/** What one invocation remembers between its ticks: a diverged workflow only needs finding once. */
export interface ReaperState {
  /** A dry run's absence streaks, kept here instead of executor_observations (observe.ts). */
  dryStreaks?: DryStreaks;
  /** When the sessions that name no executor were last looked for (epoch ms): every 5 s (unattributed.ts). */
  unattributedCheckedAt?: number;
  /** When each executor without the kit last had a session this invocation saw (epoch ms): a death's timeline start. */
  sessionsSeenAt?: Map<string, number>;
  /** When the unguarded-applications check last ran (epoch ms): every 10 s (unguarded.ts). */
  unguardedCheckedAt?: number;
  /** The diverged pass has looked at every workflow that ended before this (epoch ms). */
  divergedScannedTo?: number;
  /** Diverged workflows already handed to the fork module in this invocation (scans overlap by a slack). */
  divergedHanded?: Set<string>;
  /** When each part of the once-a-second sweep last ran (epoch ms; tick.ts's sweepSlice). */
  sweptAt?: Partial<Record<SweepPassName | 'unguarded', number>>;
  /** When the orphaned-versions pass last ran (epoch ms); it runs at most once a minute. */
  orphanedScannedAt?: number;
  /** Workflows an inline recovery left because another transaction holds them, by dead executor (lockedRows.ts). */
  lockedRows?: Map<string, string[]>;
  /** When the retention pass is next due (epoch ms), and its adapted batch size. */
  retentionDueAt?: number;
  retentionTuning?: RetentionTuning;
  /** The fleet as the dead pass last read it, so the next tick reads what changed (fleetView.ts). */
  fleet?: FleetView;
}

export interface DeadPassResult {
  candidates: number;
  alive: number;
  absent: number;
  declared: string[];
  published: number;
  recoveredInline: number;
  reenqueued: number;
  reappeared: number;
  /** No-kit executors whose recovery moved none of their PENDING rows: the guard saw activity or a session. */
  activityResumed: number;
  /** 'checked', or why the heartbeat evidence was not used this tick. */
  heartbeat: 'checked' | { skipped: string };
  /** 'checked', or why free liveness locks were no evidence this tick (the heartbeat then decided alone). */
  liveness: 'checked' | { skipped: string };
  /**
   * Whether "no session in pg_stat_activity" could be trusted for executors without the kit: `unknown` when
   * this role cannot see other sessions, the operator said not to trust them, or a session names no executor.
   */
  sessions: 'visible' | 'unknown' | 'not-needed';
  /** Executors without the kit left unjudged because their state is unknown (never a death). */
  unknown: number;
  /** Executors judged alive this tick (heartbeat, or sessions for those without the kit). */
  liveOwners: string[];
}

export interface StuckPassResult {
  /** Live executors whose workflows this tick examined (a rotating slice of them, see stuckSlice). */
  examined: number;
  found: number;
  reported: number;
  cancelled: number;
  forked: number;
  raced: number;
  workflowIds: string[];
}

export interface DivergedPassResult {
  found: number;
  handed: number;
  failed: number;
  skipped?: string;
}

export interface OrphanedPassResult {
  /** ENQUEUED rows on a version no live executor runs, untouched for the grace (at most ORPHANED_BATCH). */
  found: number;
  /** Those rows per version. */
  versions: Record<string, number>;
  reported: number;
  forked: number;
  failed: number;
  /** Left as they were under fork-to-latest: the version is the latest, came back to life, busy, ... */
  notForked: number;
  workflowIds: string[];
  skipped?: string;
}

/**
 * The passes of a tick, in the order a tick runs them: the one declaration of their names. The dead pass
 * runs every tick; the others (the sweep) each at most once a second (tick.ts).
 */
export const SWEEP_PASS_NAMES = ['stuck', 'diverged', 'orphaned', 'retention', 'timelines'] as const;
export const PASS_NAMES = ['dead', ...SWEEP_PASS_NAMES] as const;
export type PassName = (typeof PASS_NAMES)[number];
export type SweepPassName = (typeof SWEEP_PASS_NAMES)[number];

/** What each pass reports when it ran: keyed by exactly the names above (the check below fails otherwise). */
export interface PassResults {
  dead: DeadPassResult;
  stuck: StuckPassResult;
  diverged: DivergedPassResult;
  orphaned: OrphanedPassResult;
  retention: RetentionPassResult;
  timelines: TimelinePassResult;
}
const namesAgree: [PassName, keyof PassResults] extends [keyof PassResults, PassName] ? true : never = true;
void namesAgree;

/** A pass that had nothing to do this tick, and why (not due, switched off, a dry run, its premise unknown). */
export interface Skipped {
  kind: 'skipped';
  reason: string;
}
export const skip = (reason: string): Skipped => ({ kind: 'skipped', reason });

/** One pass's outcome in a tick: it ran (with what it reports), was skipped, or failed; each timed. */
export type PassOutcome<R> =
  ({ kind: 'ran'; durationMs: number } & R) | (Skipped & { durationMs: number }) | { kind: 'error'; error: string; durationMs: number };

/** The counts a pass reports: the keys of its result whose values are numbers. */
export type CountKey<R> = { [K in keyof R]-?: R[K] extends number | undefined ? K : never }[keyof R] & string;

export type TickResult = { tick: number; durationMs: number } & { [P in PassName]: PassOutcome<PassResults[P]> };
