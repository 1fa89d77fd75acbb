import { hostname } from 'node:os';
import { type DeathNotice, type Faults, type Logger, noFaults, setState } from '../../packages/executor/src/plane/index.js';
import { discardTimeline } from '../db/queries/discardTimeline.js';
import { finishRecovery, startRecovery } from '../db/queries/recoveries.js';
import type { RecoveryGuard } from '../dbos/recovery.js';
import type { Budget } from '../lifecycle/deadline.js';
import { unlimitedBudget } from '../lifecycle/deadline.js';
import { timelineStart } from '../timeline/cause.js';
import { readBeat, showsLife } from './alive.js';
import type { RecoveryDeps, RecoveryOptions, RecoverySummary } from './recoverExecutor.js';

/**
 * One recovery's running state and the small steps every part of it shares (the audit row, marking the
 * executor dead, the heartbeat re-read), so recoverExecutor.ts and versionBatches.ts read as their steps.
 */
export interface Run {
  deps: RecoveryDeps;
  notice: DeathNotice;
  opts: RecoveryOptions;
  log: Logger;
  faults: Faults;
  budget: Budget;
  lockMode: 'locked' | 'degraded';
  lockSignal: AbortSignal | undefined;
  started: number;
  /** A heartbeat-lapsed notice: the reaper's inference, which the recovery can still contradict. */
  inferred: boolean;
  guard: RecoveryGuard | undefined;
  recoveryId: number;
  /** The death was already recorded and nothing is PENDING: `recoveryId` is that row's, and nothing is written. */
  duplicate: boolean;
  /** The notice named an incarnation the registry does not hold, with nothing PENDING: no death to audit. */
  unknownIncarnation: boolean;
  markedDead: boolean;
  versions: Record<string, number>;
  /** IDs re-enqueued onto versions no live executor runs, for the orphaned-version report and hook. */
  orphanedIds: Map<string | null, string[]>;
  reenqueued: number;
  batches: number;
  /**
   * Rows the batches passed over because another transaction holds them (see lockedLeft), and whether
   * they pass such rows over at all: only once a batch found one (the lock clause has a cost per row).
   */
  locked: string[];
  skipLocked: boolean;
}

export const NULL_VERSION = '(none)';
/** The kit's default beat interval, for heartbeats that do not carry theirs. */
const DEFAULT_INTERVAL_MS = 250;

/** The registry and the audit row, before any batch. */
export async function beginRun(
  deps: RecoveryDeps,
  notice: DeathNotice,
  opts: RecoveryOptions,
  lock: { lockMode: 'locked' | 'degraded'; lockSignal: AbortSignal | undefined; log: Logger },
): Promise<Run> {
  // A notice from the executor itself (or an operator) is the death: the registry says so at once. A
  // heartbeat-lapsed notice is the reaper's inference, which the recovery can still contradict (the key
  // comes back, or the guard rejects every row): the registry says dead only once rows actually moved on
  // that evidence, or there was nothing to move, so a contradicted death never reads as one.
  const inferred = notice.reason === 'heartbeat-lapsed';
  // A death read off a free liveness lock holds only while the lock stays free: every batch re-checks it.
  // An inferred death is re-checked against the lock whatever the notice says its evidence was: the
  // sender's fields never decide what is re-checked (a lock nobody takes is free, so this costs nothing).
  const guard = inferred || notice.evidence === 'liveness' ? { ...opts.guard, livenessFree: true } : opts.guard;
  const partial = {
    deps,
    notice,
    opts,
    ...lock,
    faults: deps.faults ?? noFaults,
    budget: opts.budget ?? unlimitedBudget(),
    started: deps.clock(),
    inferred,
    guard,
  };
  const r: Run = {
    ...partial,
    recoveryId: 0,
    duplicate: false,
    unknownIncarnation: false,
    markedDead: false,
    versions: {},
    orphanedIds: new Map(),
    reenqueued: 0,
    batches: 0,
    locked: [],
    skipLocked: false,
  };
  if (!inferred) await markDead(r);
  const started = await startRecovery(
    deps.db,
    {
      applicationName: notice.applicationName,
      executorId: notice.executorId,
      reason: notice.reason,
      detectedBy: notice.detectedBy,
      messageId: opts.messageId,
      recoveredBy: deps.recoveredBy ?? `${hostname()}:${process.pid}`,
      lockMode: lock.lockMode,
      incarnation: notice.incarnation,
    },
    deps.recordTimeline === false ? undefined : timelineStart(notice, opts.signOfLife),
  );
  r.recoveryId = started.id;
  r.duplicate = started.duplicate;
  r.unknownIncarnation = started.unknownIncarnation;
  return r;
}

export async function markDead(r: Run): Promise<void> {
  if (r.markedDead) return;
  const n = r.notice;
  await setState(r.deps.db, {
    applicationName: n.applicationName,
    executorId: n.executorId,
    state: 'dead',
    reason: n.reason,
    detectedBy: n.detectedBy,
    ...(n.incarnation ? { incarnation: n.incarnation } : {}),
  });
  r.markedDead = true;
}

export function finish(
  r: Run,
  outcome: 'completed' | 'partial' | 'failed',
  versionsWithoutExecutor: string[],
  error?: string,
): Promise<unknown> {
  const { reenqueued, batches, versions } = r;
  return finishRecovery(r.deps.db, r.recoveryId, {
    outcome,
    reenqueued,
    batches,
    versions,
    versionsWithoutExecutor,
    ...(error ? { error } : {}),
  });
}

/**
 * A recovery that stops before its rows are all moved (lock lost, shutdown, budget, the heartbeat
 * unreadable, a failure): the registry says dead only if rows moved on this evidence, and the audit says
 * how it ended; the rest is the redelivery's. Both steps are tried; the first failure is rethrown.
 */
export async function stopAtBoundary(r: Run, outcome: 'partial' | 'failed', error?: string): Promise<void> {
  const failures: unknown[] = [];
  if (r.reenqueued > 0) await markDead(r).catch((err: unknown) => failures.push(err));
  await finish(r, outcome, [], error).catch((err: unknown) => failures.push(err));
  if (failures.length) throw failures[0];
}

/** A recovery contradicted after it began: its audit says partial, and the timeline it opened was no death's. */
export async function contradicted(r: Run, error: string): Promise<void> {
  await finish(r, 'partial', [], error);
  if (r.deps.recordTimeline !== false) await discardTimeline(r.deps.db, r.recoveryId);
}

/** Whether the death rests on evidence each batch re-checks in Postgres, so it stands while Redis is down. */
export function rechecked(notice: DeathNotice, opts: RecoveryOptions): boolean {
  return opts.guard !== undefined || (notice.evidence === 'liveness' && opts.livenessTracked !== false);
}

export function falseAlarm(
  notice: DeathNotice,
  contradictedBy: 'heartbeat' | 'guard',
  heartbeatTtlMs: number | undefined,
  moved: { recoveryId?: number; reenqueued: number; batches: number },
): RecoverySummary {
  return {
    outcome: 'false-alarm',
    executorId: notice.executorId,
    applicationName: notice.applicationName,
    heartbeatTtlMs,
    contradictedBy,
    ...moved,
  };
}

/**
 * The heartbeat re-read of a death inferred from it, by the recovery's standard (alive.ts, `LifeStandard`): `life`
 * true when the key is back, with what the false-alarm line reports of it.
 */
export async function heartbeatBack(
  deps: RecoveryDeps,
  notice: DeathNotice,
  o: { waitReadyMs: number },
): Promise<{ life: boolean | 'unknown'; ttlMs: number | undefined; state: string | undefined }> {
  const beat = await readBeat(
    { ...deps, heartbeatIntervalMs: deps.heartbeatIntervalMs ?? DEFAULT_INTERVAL_MS },
    notice.applicationName,
    notice.executorId,
    o,
  );
  const life = showsLife(beat, { of: 'recovery', staleBeatAt: notice.staleBeatAt });
  return beat.kind === 'beating'
    ? { life, ttlMs: beat.reading.ttlMs, state: beat.value.state }
    : { life, ttlMs: undefined, state: undefined };
}
