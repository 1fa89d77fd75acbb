import { LEFT_ALONE_LIMIT, LEFT_ALONE_PROBE_MS, type LeftAlone, leftAloneRows, whyLeftAlone } from '../dbos/statuses.js';
import type { Redis } from 'ioredis';
import {
  BudgetExhaustedError,
  type Db,
  type DeathNotice,
  errorMessage,
  type Faults,
  HeartbeatUnknownError,
  type Logger,
  pendingByVersion,
  type PendingByVersion,
  readAllHeartbeats,
  RowsLockedError,
  redisKey,
} from '../../packages/executor/src/plane/index.js';
import type { RecoveryGuard } from '../dbos/recovery.js';
import type { SignOfLife } from '../db/queries/recoveries.js';
import { sessionVersions } from '../dbos/reaper.js';
import type { Budget } from '../lifecycle/deadline.js';
import { LockUnavailableError } from '../lock/errors.js';
import type { RedisLock } from '../lock/lock.js';
import {
  beginRun,
  contradicted,
  falseAlarm,
  finish,
  heartbeatBack,
  markDead,
  NULL_VERSION,
  rechecked,
  type Run,
  stopAtBoundary,
} from './recoveryRun.js';
import { recoverVersion } from './versionBatches.js';

/**
 * Recovery of one dead executor: the Redis lock (or degraded mode) → the executor marked dead → DBOS's
 * recovery statement per version in batches, stopping at a batch boundary when the lock is lost or the
 * budget runs out → the audit → a summary. It re-enqueues; live executors of the same version claim and
 * run the rows. Every statement re-checks its premise, so running this twice or concurrently is harmless.
 * The batch loop is versionBatches.ts; the state the steps share, recoveryRun.ts.
 */
export interface RecoveryDeps {
  db: Db;
  redis: Redis | undefined;
  lock: RedisLock | undefined;
  logger: Logger;
  faults?: Faults;
  batchSize: number;
  lockTtlMs: number;
  keyPrefix?: string;
  /** The one clock of the recovery: its duration and the heartbeat's age (tests backdate through it). */
  clock: () => number;
  /** The beat interval assumed for a heartbeat that does not say its own (the plane's HEARTBEAT_INTERVAL_MS). */
  heartbeatIntervalMs?: number;
  /**
   * Whether the recovery's first statement also opens the death's timeline (shared/timeline). Only
   * bench/recovery.ts turns it off, to measure what it costs.
   */
  recordTimeline?: boolean;
  /** Who runs this recovery, for the audit. */
  recoveredBy?: string;
  /**
   * What happens to re-enqueued work no live executor can claim (ORPHANED_VERSION_POLICY and its grace), so
   * the WARNING that reports it says so.
   */
  orphanedVersions?: { policy: 'leave' | 'fork-to-latest'; graceMs: number };
  /** The orphaned-version policy hook: called for versions no live executor runs, after re-enqueueing. */
  onOrphanedVersion?: (info: {
    applicationName: string;
    executorId: string;
    applicationVersion: string | null;
    workflowIds: string[];
  }) => Promise<void>;
}

export interface RecoveryOptions {
  messageId?: string;
  budget?: Budget;
  /** Aborts at the next batch boundary (SIGTERM of our own instance). */
  signal?: AbortSignal;
  /** Extra premise re-checked by every batch (the reaper's no-kit evidence); see RecoveryGuard. */
  guard?: RecoveryGuard;
  /**
   * The registry's word on whether the executor's kit holds a liveness lock (executorDeath looks it up):
   * `false` means a notice's `evidence: "liveness"` is not evidence (the lock was never taken), so the
   * heartbeat must still be re-read. Undefined: the caller is the plane itself (the reaper), trusted.
   */
  livenessTracked?: boolean;
  /** What the reaper last saw of an executor without the kit (a session, a checkpoint): its timeline's start. */
  signOfLife?: SignOfLife;
  /** Called after every batch statement (the CLI's progress). */
  onBatch?: (b: { batchNo: number; reenqueued: number }) => void;
}

export type RecoverySummary =
  | {
      outcome: 'false-alarm';
      executorId: string;
      applicationName: string;
      heartbeatTtlMs: number | undefined;
      /**
       * What contradicted the death: its heartbeat key is back (before or during the recovery), or the
       * guard rejected every PENDING row (the no-kit executor's workflows moved again or it reconnected).
       */
      contradictedBy: 'heartbeat' | 'guard';
      /** The audit row, when the contradiction came after the recovery started. */
      recoveryId?: number;
      /** Rows moved before the contradiction (recorded in the audit's batches). */
      reenqueued: number;
      batches: number;
    }
  | {
      outcome: 'completed' | 'nothing-to-do';
      executorId: string;
      applicationName: string;
      recoveryId: number;
      lockMode: 'locked' | 'degraded';
      reenqueued: number;
      batches: number;
      durationMs: number;
      versions: Record<string, number>;
      /** Versions with re-enqueued rows and no live executor to claim them (or `unknown` without Redis). */
      versionsWithoutExecutor: string[];
      liveVersionsKnown: boolean;
    };

export async function recoverExecutor(deps: RecoveryDeps, notice: DeathNotice, opts: RecoveryOptions = {}): Promise<RecoverySummary> {
  const log = deps.logger.child({ executorId: notice.executorId, applicationName: notice.applicationName, messageId: opts.messageId });

  if (notice.reason === 'heartbeat-lapsed') {
    const back = await heartbeatBack(deps, notice, { waitReadyMs: 500 });
    // Fail closed: a death inferred from the heartbeat alone needs the re-read; no reading is no evidence.
    // Evidence Postgres re-checks in every batch (the no-kit guard, a free liveness lock) stands without it.
    if (back.life === 'unknown' && !rechecked(notice, opts)) throw new HeartbeatUnknownError(notice.executorId);
    if (back.life === true) {
      log.notice('heartbeat is fresh: false alarm, nothing recovered', { heartbeatTtlMs: back.ttlMs, state: back.state });
      return falseAlarm(notice, 'heartbeat', back.ttlMs, { reenqueued: 0, batches: 0 });
    }
  }

  const resource = redisKey(deps.keyPrefix, notice.applicationName, 'recover', notice.executorId);
  if (deps.lock) {
    try {
      return await deps.lock.using(resource, deps.lockTtlMs, (signal) => run(deps, notice, opts, 'locked', signal, log));
    } catch (err) {
      if (!(err instanceof LockUnavailableError)) throw err;
      log.warn('redis unavailable: recovering without the lock (degraded); Postgres still fences every write', { err });
    }
  } else {
    log.warn('no REDIS_URL: recovering without the lock (degraded)');
  }
  return run(deps, notice, opts, 'degraded', undefined, log);
}

/** The recovery under the lock (or degraded): its audit row, each version's batches, then the conclusion. */
async function run(
  deps: RecoveryDeps,
  notice: DeathNotice,
  opts: RecoveryOptions,
  lockMode: 'locked' | 'degraded',
  lockSignal: AbortSignal | undefined,
  log: Logger,
): Promise<RecoverySummary> {
  const r = await beginRun(deps, notice, opts, { lockMode, lockSignal, log });
  if (r.duplicate) return duplicate(r);
  try {
    // A notice that names versions scopes the recovery to them (an executor that ran several builds).
    const named = notice.applicationVersions ? new Set(notice.applicationVersions) : undefined;
    const pending = (await pendingByVersion(deps.db, notice.applicationName, notice.executorId)).filter(
      (p) => !named || (p.applicationVersion !== null && named.has(p.applicationVersion)),
    );
    const live = await liveVersions(deps, notice.applicationName, notice.executorId, pending, log);
    for (const version of pending) {
      const contradicted = await recoverVersion(r, version, live);
      if (contradicted) return contradicted;
    }
    return await conclude(r, pending, live);
  } catch (err) {
    // Stops at a boundary have recorded themselves; anything else is recorded failed, best effort.
    if (!(err instanceof BudgetExhaustedError) && !(err instanceof RowsLockedError)) {
      await stopAtBoundary(r, 'failed', errorMessage(err)).catch(() => undefined);
    }
    throw err;
  }
}

/** A notice repeating a death already audited, with nothing PENDING: the earlier row stands, nothing is written. */
function duplicate(r: Run): RecoverySummary {
  if (r.unknownIncarnation)
    r.log.info('notice about an incarnation the registry does not hold, and nothing PENDING: no death to audit, no audit row', {
      incarnation: r.notice.incarnation,
      event: 'recovery_duplicate',
      why: 'unknown_incarnation',
    });
  else
    r.log.info('death already recorded and nothing PENDING: duplicate notice, no new audit row', {
      recoveryId: r.recoveryId,
      event: 'recovery_duplicate',
    });
  return {
    outcome: 'nothing-to-do',
    executorId: r.notice.executorId,
    applicationName: r.notice.applicationName,
    recoveryId: r.recoveryId,
    lockMode: r.lockMode,
    reenqueued: 0,
    batches: 0,
    durationMs: r.deps.clock() - r.started,
    versions: {},
    versionsWithoutExecutor: [],
    liveVersionsKnown: false,
  };
}

/** After the last batch: a death the guard contradicted, or the registry, the audit, the report and the summary. */
async function conclude(r: Run, pending: PendingByVersion[], live: Set<string> | undefined): Promise<RecoverySummary> {
  const { notice, log } = r;
  // Locked rows were never offered to the guard, so they do not count as rows it refused.
  const pendingCount = pending.reduce((n, p) => n + p.count, 0) - r.locked.length;
  if (r.guard && pendingCount > 0 && r.reenqueued === 0) {
    // The guard re-checks the no-kit evidence per row; rejecting all of them means that evidence no
    // longer holds (a checkpoint, a claim or a session since the reaper judged it). Not a death.
    await contradicted(r, `the guard rejected all ${pendingCount} PENDING row(s): activity or a session since detection, not dead`);
    log.notice('the guard rejected every PENDING row: the executor is not dead after all', {
      pending: pendingCount,
      batches: r.batches,
      event: 'recovery_false_alarm',
    });
    return falseAlarm(notice, 'guard', undefined, { recoveryId: r.recoveryId, reenqueued: r.reenqueued, batches: r.batches });
  }
  // With every row locked nothing moved on this evidence yet: the registry waits for the attempt that moves them.
  if (r.reenqueued > 0 || r.locked.length === 0) await markDead(r);
  const versionsWithoutExecutor =
    live === undefined ? (r.reenqueued > 0 ? ['unknown'] : []) : [...r.orphanedIds.keys()].map((v) => v ?? NULL_VERSION);
  // Never recorded as finished while rows remain: `partial`, with what is left and why.
  const lockedError = r.locked.length > 0 ? new RowsLockedError(notice.executorId, r.locked, r.reenqueued) : undefined;
  await finish(r, lockedError ? 'partial' : 'completed', versionsWithoutExecutor, lockedError?.message);
  await reportOrphaned(r);
  await reportLeftAlone(r);
  if (lockedError) {
    log.warn('recovery left workflows another transaction holds (a host lost inside a transaction?); retried once the lock is gone', {
      event: 'recovery_rows_locked',
      locked: r.locked.length,
      workflowIds: r.locked.slice(0, 10),
      reenqueued: r.reenqueued,
      batches: r.batches,
    });
    throw lockedError;
  }
  return {
    outcome: r.reenqueued > 0 ? 'completed' : 'nothing-to-do',
    executorId: notice.executorId,
    applicationName: notice.applicationName,
    recoveryId: r.recoveryId,
    lockMode: r.lockMode,
    reenqueued: r.reenqueued,
    batches: r.batches,
    durationMs: r.deps.clock() - r.started,
    versions: r.versions,
    versionsWithoutExecutor,
    liveVersionsKnown: live !== undefined,
  };
}

/** One WARNING per version nothing live runs, then the orphaned-version hook (recoveryDeps decides who has one). */
/**
 * The dead executor's rows in statuses afterlife never acts on (SUSPENDED, or one it does not know): left
 * where they are, and said so once per recovery, with why. A probe that could not finish in its bound is
 * not a finding; it only costs a DEBUG line.
 */
async function reportLeftAlone(r: Run): Promise<void> {
  const { notice, log } = r;
  let left: LeftAlone[] | undefined;
  try {
    left = await leftAloneRows(r.deps.db, notice.applicationName, notice.executorId);
  } catch (err) {
    log.debug("could not read the dead executor's rows in other statuses", { err });
    return;
  }
  if (left === undefined) {
    log.debug('rows in statuses afterlife leaves alone: not read within the bound', { boundMs: LEFT_ALONE_PROBE_MS });
    return;
  }
  if (!left.length) return;
  log.warn('the dead executor owns workflows in statuses afterlife never acts on: left alone', {
    event: 'recovery_left_alone',
    statuses: Object.fromEntries(left.map((x) => [x.status, x.count])),
    why: Object.fromEntries(left.map((x) => [x.status, whyLeftAlone(x.status)])),
    atLeast: left.reduce((n, x) => n + x.count, 0) >= LEFT_ALONE_LIMIT,
  });
}

async function reportOrphaned(r: Run): Promise<void> {
  const o = r.deps.orphanedVersions;
  for (const [applicationVersion, workflowIds] of r.orphanedIds) {
    // One line per version, at once: the work is ENQUEUED and nothing will claim it until an executor of
    // that version starts, or the orphaned-version pass acts after its grace.
    r.log.warn('recovered work has nowhere to go: re-enqueued workflows of a version no live executor runs wait until one appears', {
      applicationVersion,
      count: workflowIds.length,
      event: 'orphaned_version',
      ...(o
        ? {
            policy: o.policy,
            // With the hook (executorDeath, fork-to-latest) the repair runs right after this line, not after the grace.
            policyActsAfterMs: r.deps.onOrphanedVersion ? 0 : o.graceMs,
            then:
              o.policy === 'fork-to-latest'
                ? 'forked to the latest live version'
                : 'reported again, left ENQUEUED (ORPHANED_VERSION_POLICY=leave)',
          }
        : {}),
    });
    await r.deps.onOrphanedVersion?.({
      applicationName: r.notice.applicationName,
      executorId: r.notice.executorId,
      applicationVersion,
      workflowIds,
    });
  }
}

/**
 * Versions run by live executors: kits' heartbeats saying `alive`, and executors without the kit whose
 * sessions name their version (`dbos_transact_<executorID>_<version>`). Undefined — unknown, so nothing is
 * reported or forked as orphaned — when Redis can't say, or when a session that names nobody is open (DBOS
 * for Python's `dbos_transact`): such a process may run any version. The executor being recovered does not
 * count: a SIGKILLed kit's last beat stays readable until its TTL (15 s), long after the liveness lock
 * showed it dead, and would make its own version look served.
 */
async function liveVersions(
  deps: RecoveryDeps,
  app: string,
  dead: string,
  pending: PendingByVersion[],
  log: Logger,
): Promise<Set<string> | undefined> {
  if (!deps.redis) return undefined;
  try {
    const versions = new Set<string>();
    for (const [executorId, v] of await readAllHeartbeats(deps.redis, app, deps.keyPrefix)) {
      if (executorId !== dead && v?.state === 'alive') versions.add(v.applicationVersion);
    }
    const unserved = pending.flatMap((p) =>
      p.applicationVersion !== null && !versions.has(p.applicationVersion) ? [p.applicationVersion] : [],
    );
    if (unserved.length === 0) return versions;
    const sessions = await sessionVersions(deps.db, unserved, dead);
    if (sessions.unattributed) return undefined;
    for (const v of sessions.versions) versions.add(v);
    return versions;
  } catch (err) {
    log.warn('could not read heartbeats or sessions: live versions unknown', { err });
    return undefined;
  }
}
