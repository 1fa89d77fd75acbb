import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import type { Db } from '../db/pool.js';
import { setState } from '../db/queries/executors.js';
import { finishRecovery, startRecovery } from '../db/queries/recoveries.js';
import { type BatchCursor, isRowLockWait, LOCK_WAIT_MS, lockedLeft, pendingByVersion, reenqueueBatch, type RecoveryGuard } from '../dbos/recovery.js';
import { BudgetExhaustedError, HeartbeatUnknownError, RowsLockedError } from '../errors.js';
import type { DeathNotice } from '../events/deathNotice.js';
import { beatEvidence } from '../heartbeat/bounds.js';
import { type HeartbeatReading, heartbeatKey, readAllHeartbeats, readHeartbeat } from '../heartbeat/index.js';
import type { Budget } from '../lifecycle/deadline.js';
import { unlimitedBudget } from '../lifecycle/deadline.js';
import { LockUnavailableError } from '../lock/errors.js';
import type { RedisLock } from '../lock/lock.js';
import { waitReady } from '../lock/redis.js';
import type { Logger } from '../log.js';
import { noFaults, type Faults } from '../testing/faults.js';

/**
 * Recovery of one dead executor: the Redis lock (or degraded mode) → the executor marked dead → DBOS's
 * recovery statement per version in batches, stopping at a batch boundary when the lock is lost or the
 * budget runs out → the audit → a summary. It re-enqueues; live executors of the same version claim and
 * run the rows. Every statement re-checks its premise, so running this twice or concurrently is harmless.
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
  /** The beat interval assumed for a heartbeat that does not say its own (the plane's HEARTBEAT_INTERVAL_MS). */
  heartbeatIntervalMs?: number;
  /** Who runs this recovery, for the audit. */
  recoveredBy?: string;
  /**
   * What happens to re-enqueued work no live executor can claim (ORPHANED_VERSION_POLICY and its grace), so
   * the WARNING that reports it says so.
   */
  orphanedVersions?: { policy: 'leave' | 'fork-to-latest'; graceMs: number };
  /** The orphaned-version policy hook: called for versions no live executor runs, after re-enqueueing. */
  onOrphanedVersion?: (info: { applicationName: string; executorId: string; applicationVersion: string | null; workflowIds: string[] }) => Promise<void>;
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

const NULL_VERSION = '(none)';
/** The kit's default beat interval, for heartbeats that do not carry theirs. */
const DEFAULT_INTERVAL_MS = 250;

export async function recoverExecutor(deps: RecoveryDeps, notice: DeathNotice, opts: RecoveryOptions = {}): Promise<RecoverySummary> {
  const log = deps.logger.child({ executorId: notice.executorId, applicationName: notice.applicationName, messageId: opts.messageId });

  if (notice.reason === 'heartbeat-lapsed' && deps.redis) {
    await waitReady(deps.redis, 500);
    const hb = await heartbeatBack(deps, notice);
    // Fail closed: a death inferred from the heartbeat alone needs the re-read; no reading is no evidence.
    // Evidence Postgres re-checks in every batch (the no-kit guard, a free liveness lock) stands without it.
    if (hb === 'unknown' && !rechecked(notice, opts)) throw new HeartbeatUnknownError(notice.executorId);
    if (hb && hb !== 'unknown') {
      log.notice('heartbeat is fresh: false alarm, nothing recovered', { heartbeatTtlMs: hb.ttlMs, state: hb.value?.state });
      return falseAlarm(notice, 'heartbeat', hb.ttlMs, { reenqueued: 0, batches: 0 });
    }
  }

  const resource = `${deps.keyPrefix ?? 'afterlife'}:${notice.applicationName}:recover:${notice.executorId}`;
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

async function run(
  deps: RecoveryDeps,
  notice: DeathNotice,
  opts: RecoveryOptions,
  lockMode: 'locked' | 'degraded',
  lockSignal: AbortSignal | undefined,
  log: Logger,
): Promise<RecoverySummary> {
  const faults = deps.faults ?? noFaults;
  const budget = opts.budget ?? unlimitedBudget();
  const started = Date.now();
  const { db } = deps;
  const app = notice.applicationName;

  // A notice from the executor itself (or an operator) is the death: the registry says so at once. A
  // heartbeat-lapsed notice is the reaper's inference, which the recovery can still contradict (the key
  // comes back, or the guard rejects every row): the registry says dead only once rows actually moved on
  // that evidence, or there was nothing to move, so a contradicted death never reads as one.
  const inferred = notice.reason === 'heartbeat-lapsed';
  // A death read off a free liveness lock holds only while the lock stays free: every batch re-checks it.
  // An inferred death is re-checked against the lock whatever the notice says its evidence was: the
  // sender's fields never decide what is re-checked (a lock nobody takes is free, so this costs nothing).
  const guard = inferred || notice.evidence === 'liveness' ? { ...opts.guard, livenessFree: true } : opts.guard;
  let markedDead = false;
  const markDead = async () => {
    if (markedDead) return;
    await setState(db, { applicationName: app, executorId: notice.executorId, state: 'dead', reason: notice.reason, detectedBy: notice.detectedBy, ...(notice.incarnation ? { incarnation: notice.incarnation } : {}) });
    markedDead = true;
  };
  if (!inferred) await markDead();
  const recoveryId = await startRecovery(db, {
    applicationName: app,
    executorId: notice.executorId,
    reason: notice.reason,
    detectedBy: notice.detectedBy,
    messageId: opts.messageId,
    recoveredBy: deps.recoveredBy ?? `${hostname()}:${process.pid}`,
    lockMode,
    incarnation: notice.incarnation,
  });

  const versions: Record<string, number> = {};
  const orphanedIds = new Map<string | null, string[]>();
  let reenqueued = 0;
  let batches = 0;
  // Rows the batches passed over because another transaction holds them (see lockedLeft), and whether
  // they pass such rows over at all: only once a batch found one (the lock clause has a cost per row).
  const locked: string[] = [];
  let skipLocked = false;
  const finish = (outcome: 'completed' | 'partial' | 'failed', versionsWithoutExecutor: string[], error?: string) =>
    finishRecovery(db, recoveryId, { outcome, reenqueued, batches, versions, versionsWithoutExecutor, ...(error ? { error } : {}) });

  try {
    // A notice that names versions scopes the recovery to them (an executor that ran several builds).
    const named = notice.applicationVersions ? new Set(notice.applicationVersions) : undefined;
    const pending = (await pendingByVersion(db, app, notice.executorId)).filter(
      (p) => !named || (p.applicationVersion !== null && named.has(p.applicationVersion)),
    );
    const live = await liveVersions(deps, app, notice.executorId, log);
    const stopReason = () =>
      lockSignal?.aborted ? 'lock lost' : opts.signal?.aborted ? 'shutting down' : budget.expired() ? 'work budget' : undefined;

    for (const { applicationVersion, created, count } of pending) {
      const label = applicationVersion ?? NULL_VERSION;
      const noExecutor = live !== undefined && !(applicationVersion !== null && live.has(applicationVersion));
      let after: BatchCursor | undefined;
      // Counted down by each batch's scan; unknown during the sweep, which rescans from the start.
      let unscanned: number | undefined = count;
      let shortfall = false;
      let swept = false;
      for (;;) {
        const why = stopReason();
        if (why) {
          // Rows moved on this evidence: the executor was treated as dead, and the redelivery goes on.
          if (reenqueued > 0) await markDead();
          await finish('partial', []);
          log.warn('recovery stopped at a batch boundary; redelivery finishes it', { why, reenqueued, batches });
          throw new BudgetExhaustedError(`recovery of ${notice.executorId} (${why})`);
        }
        if (faults.enabled) await faults.hit('recover.beforeBatch', { recoveryId, batchNo: batches + 1, applicationVersion });
        // The heartbeat read before the lock is stale by now (a lock wait, earlier batches): a key that
        // came back means the executor lives, and every further row moved would run its step twice.
        const back = inferred ? await heartbeatBack(deps, notice) : undefined;
        if (back === 'unknown' && !rechecked(notice, opts)) {
          if (reenqueued > 0) await markDead();
          await finish('partial', []);
          log.warn('heartbeat unreadable mid-recovery: stopped at a batch boundary; redelivery re-checks it', { reenqueued, batches });
          throw new HeartbeatUnknownError(notice.executorId);
        }
        if (back && back !== 'unknown') {
          await finish('partial', [], `heartbeat returned after ${reenqueued} re-enqueued in ${batches} batch(es): the executor is alive`);
          log.notice('heartbeat returned mid-recovery: stopped, the rest stays with the executor', { reenqueued, batches, event: 'recovery_false_alarm' });
          return falseAlarm(notice, 'heartbeat', back.ttlMs, { recoveryId, reenqueued, batches });
        }
        const runBatch = () =>
          reenqueueBatch(
            db,
            { applicationName: app, executorId: notice.executorId, applicationVersion },
            {
              limit: deps.batchSize,
              range: created,
              after,
              recoveryId,
              batchNo: batches + 1,
              unscanned,
              // Only the orphaned-version hook needs the IDs themselves.
              returnIds: noExecutor,
              ...(guard ? { guard } : {}),
              skipLocked,
            },
          );
        let batch: Awaited<ReturnType<typeof reenqueueBatch>>;
        try {
          batch = await runBatch();
        } catch (err) {
          // A held row (a host lost inside a transaction?): the batch rolled back after LOCK_WAIT_MS; it and
          // every later batch of this attempt pass held rows over, and what they leave is reported below.
          if (skipLocked || !isRowLockWait(err)) throw err;
          skipLocked = true;
          log.info('a batch waited on a row another transaction holds: passing held rows over', { waitedMs: LOCK_WAIT_MS, batchNo: batches + 1 });
          batch = await runBatch();
        }
        batches += 1;
        if (unscanned !== undefined) unscanned -= batch.candidates;
        reenqueued += batch.moved;
        versions[label] = (versions[label] ?? 0) + batch.moved;
        if (batch.ids?.length) {
          // Appended in place: copying the list on every batch made a 1M-row recovery quadratic (74 s against 39 s).
          const acc = orphanedIds.get(applicationVersion);
          if (acc) for (const id of batch.ids) acc.push(id);
          else orphanedIds.set(applicationVersion, [...batch.ids]);
        }
        if (faults.enabled) await faults.hit('recover.afterBatch', { recoveryId, batchNo: batches, reenqueued: batch.moved });
        opts.onBatch?.({ batchNo: batches, reenqueued: batch.moved });
        shortfall ||= batch.moved < batch.candidates;
        if (!batch.next) {
          // A row updated while its batch ran (still PENDING, still this executor's) has a new tuple ID,
          // so the batch's re-check skips it and the cursor moves past it. One sweep from the start picks
          // such rows up; rows another writer claimed or finished no longer match and cost nothing.
          if (!shortfall || swept) break;
          swept = true;
          after = undefined;
          unscanned = undefined;
          continue;
        }
        after = batch.next;
      }
      // Held rows were passed over and fewer moved than counted: which are still held. Only then is it asked.
      if (skipLocked && (versions[label] ?? 0) < count) {
        locked.push(...(await lockedLeft(db, { applicationName: app, executorId: notice.executorId, applicationVersion }, created)));
      }
    }

    // Locked rows were never offered to the guard, so they do not count as rows it refused.
    const pendingCount = pending.reduce((n, p) => n + p.count, 0) - locked.length;
    if (guard && pendingCount > 0 && reenqueued === 0) {
      // The guard re-checks the no-kit evidence per row; rejecting all of them means that evidence no
      // longer holds (a checkpoint, a claim or a session since the reaper judged it). Not a death.
      await finish('partial', [], `the guard rejected all ${pendingCount} PENDING row(s): activity or a session since detection, not dead`);
      log.notice('the guard rejected every PENDING row: the executor is not dead after all', { pending: pendingCount, batches, event: 'recovery_false_alarm' });
      return falseAlarm(notice, 'guard', undefined, { recoveryId, reenqueued, batches });
    }
    // With every row locked nothing moved on this evidence yet: the registry waits for the attempt that moves them.
    if (reenqueued > 0 || locked.length === 0) await markDead();
    const versionsWithoutExecutor =
      live === undefined ? (reenqueued > 0 ? ['unknown'] : []) : [...orphanedIds.keys()].map((v) => v ?? NULL_VERSION);
    // Never recorded as finished while rows remain: `partial`, with what is left and why.
    const lockedError = locked.length > 0 ? new RowsLockedError(notice.executorId, locked, reenqueued) : undefined;
    await finish(lockedError ? 'partial' : 'completed', versionsWithoutExecutor, lockedError?.message);
    for (const [applicationVersion, workflowIds] of orphanedIds) {
      const o = deps.orphanedVersions;
      // One line per version, at once: the work is ENQUEUED and nothing will claim it until an executor of
      // that version starts, or the orphaned-version pass acts after its grace.
      log.warn('recovered work has nowhere to go: re-enqueued workflows of a version no live executor runs wait until one appears', {
        applicationVersion,
        count: workflowIds.length,
        event: 'orphaned_version',
        ...(o
          ? {
              policy: o.policy,
              policyActsAfterMs: o.graceMs,
              then: o.policy === 'fork-to-latest' ? 'forked to the latest live version' : 'reported again, left ENQUEUED (ORPHANED_VERSION_POLICY=leave)',
            }
          : {}),
      });
      await deps.onOrphanedVersion?.({ applicationName: app, executorId: notice.executorId, applicationVersion, workflowIds });
    }
    if (lockedError) {
      log.warn('recovery left workflows another transaction holds (a host lost inside a transaction?); retried once the lock is gone', {
        event: 'recovery_rows_locked',
        locked: locked.length,
        workflowIds: locked.slice(0, 10),
        reenqueued,
        batches,
      });
      throw lockedError;
    }
    return {
      outcome: reenqueued > 0 ? 'completed' : 'nothing-to-do',
      executorId: notice.executorId,
      applicationName: app,
      recoveryId,
      lockMode,
      reenqueued,
      batches,
      durationMs: Date.now() - started,
      versions,
      versionsWithoutExecutor,
      liveVersionsKnown: live !== undefined,
    };
  } catch (err) {
    if (!(err instanceof BudgetExhaustedError) && !(err instanceof RowsLockedError)) {
      if (reenqueued > 0) await markDead().catch(() => undefined);
      await finish('failed', [], err instanceof Error ? err.message : String(err)).catch(() => undefined);
    }
    throw err;
  }
}

/** Whether the death rests on evidence each batch re-checks in Postgres, so it stands while Redis is down. */
function rechecked(notice: DeathNotice, opts: RecoveryOptions): boolean {
  return opts.guard !== undefined || (notice.evidence === 'liveness' && opts.livenessTracked !== false);
}

function falseAlarm(
  notice: DeathNotice,
  contradictedBy: 'heartbeat' | 'guard',
  heartbeatTtlMs: number | undefined,
  moved: { recoveryId?: number; reenqueued: number; batches: number },
): RecoverySummary {
  return { outcome: 'false-alarm', executorId: notice.executorId, applicationName: notice.applicationName, heartbeatTtlMs, contradictedBy, ...moved };
}

/**
 * The executor's heartbeat, if it shows life since the declaration, judged with the plane's own clock and
 * thresholds (shared/heartbeat/bounds.ts): a key outside what a kit writes (no TTL, unreadable, absurd
 * interval, a beat from the future) is no evidence. A beat inside the bounds is life when it is fresh, or —
 * when the notice names the stale beat the declaration saw — newer than that one. The sender's
 * `staleBeatAt` can only narrow a death this way (an old one makes more beats count as life), never widen
 * it: a fresh beat is life whatever it says. Without `staleBeatAt` any beat inside the bounds is life.
 * `unknown` when Redis is configured but does not answer: no evidence either way (callers whose death was
 * inferred from the heartbeat fail closed on it). Without REDIS_URL there are no heartbeats to read at all.
 */
async function heartbeatBack(deps: RecoveryDeps, notice: DeathNotice): Promise<HeartbeatReading | undefined | 'unknown'> {
  if (!deps.redis) return undefined;
  if (deps.redis.status !== 'ready') return 'unknown';
  const hb = await readHeartbeat(deps.redis, heartbeatKey(notice.applicationName, notice.executorId, deps.keyPrefix)).catch(() => 'unknown' as const);
  if (hb === 'unknown' || !hb) return hb;
  const e = beatEvidence(hb, Date.now(), deps.heartbeatIntervalMs ?? DEFAULT_INTERVAL_MS);
  if (e.kind === 'none') return undefined;
  if (notice.staleBeatAt === undefined || e.fresh) return hb;
  return Date.parse(e.value.beatAt) > Date.parse(notice.staleBeatAt) ? hb : undefined;
}

/**
 * Versions run by live (not draining) executors, from their heartbeats; undefined when Redis can't say. The
 * executor being recovered does not count: a SIGKILLed kit's last beat stays readable until its TTL (15 s),
 * long after the liveness lock showed it dead, and would make its own version look served.
 */
async function liveVersions(deps: RecoveryDeps, app: string, dead: string, log: Logger): Promise<Set<string> | undefined> {
  if (!deps.redis) return undefined;
  try {
    const versions = new Set<string>();
    for (const [executorId, v] of await readAllHeartbeats(deps.redis, app, deps.keyPrefix)) {
      if (executorId !== dead && v?.state === 'alive') versions.add(v.applicationVersion);
    }
    return versions;
  } catch (err) {
    log.warn('could not read heartbeats: live versions unknown', { err });
    return undefined;
  }
}
