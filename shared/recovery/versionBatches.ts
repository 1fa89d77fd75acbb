import { type BatchCursor, type BatchResult, isRowLockWait, LOCK_WAIT_MS, lockedLeft, reenqueueBatch } from '../dbos/recovery.js';
import {
  BudgetExhaustedError,
  type CreatedRange,
  HeartbeatUnknownError,
  type PendingByVersion,
} from '../../packages/executor/src/plane/index.js';
import type { RecoverySummary } from './recoverExecutor.js';
import { contradicted, falseAlarm, heartbeatBack, NULL_VERSION, rechecked, type Run, stopAtBoundary } from './recoveryRun.js';

/**
 * One version's PENDING rows of a recovery, batch by batch: before each batch the reasons to stop (lock
 * lost, shutting down, budget spent, the heartbeat back), then DBOS's recovery statement, then the tally.
 * Its own file so recoverExecutor.ts reads as the recovery's steps and this as a batch loop's.
 */

/** Where one version's batches are: the keyset cursor and whether the end-of-range sweep has run. */
interface Cursor {
  after: BatchCursor | undefined;
  /** Counted down by each batch's scan; unknown during the sweep, which rescans from the start. */
  unscanned: number | undefined;
  shortfall: boolean;
  swept: boolean;
  /** A claim-now hint failed in this version: reported once, not per batch. */
  hintReported: boolean;
}

/** Recovers one version's rows; a summary when the heartbeat came back mid-way (a false alarm), else undefined. */
export async function recoverVersion(
  r: Run,
  { applicationVersion, created, count }: PendingByVersion,
  live: Set<string> | undefined,
): Promise<RecoverySummary | undefined> {
  const label = applicationVersion ?? NULL_VERSION;
  const noExecutor = live !== undefined && !(applicationVersion !== null && live.has(applicationVersion));
  const c: Cursor = { after: undefined, unscanned: count, shortfall: false, swept: false, hintReported: false };
  for (;;) {
    const alarm = await beforeBatch(r, applicationVersion);
    if (alarm) return alarm;
    const batch = await oneBatch(r, applicationVersion, created, c, noExecutor);
    if (c.unscanned !== undefined) c.unscanned -= batch.candidates;
    await tally(r, label, applicationVersion, batch);
    if (batch.hintFailed && !c.hintReported) {
      c.hintReported = true;
      r.log.warn('re-enqueued work moved, but survivors could not be asked to claim it now: it waits for their next queue poll', {
        applicationVersion: label,
        err: batch.hintFailed,
        event: 'requeued_hint_failed',
        fix: 'shorten queue names or the application name if they are the cause; otherwise check the notification queue (pg_notification_queue_usage())',
      });
    }
    c.shortfall ||= batch.moved < batch.candidates;
    if (!batch.next) {
      // A row updated while its batch ran (still PENDING, still this executor's) has a new tuple ID,
      // so the batch's re-check skips it and the cursor moves past it. One sweep from the start picks
      // such rows up; rows another writer claimed or finished no longer match and cost nothing.
      if (!c.shortfall || c.swept) break;
      c.swept = true;
      c.after = undefined;
      c.unscanned = undefined;
      continue;
    }
    c.after = batch.next;
  }
  // Held rows were passed over and fewer moved than counted: which are still held. Only then is it asked.
  if (r.skipLocked && (r.versions[label] ?? 0) < count) {
    r.locked.push(
      ...(await lockedLeft(
        r.deps.db,
        { applicationName: r.notice.applicationName, executorId: r.notice.executorId, applicationVersion },
        created,
      )),
    );
  }
  return undefined;
}

/** The reasons to stop at this batch boundary: throws to hand the rest to a redelivery, or a false alarm. */
async function beforeBatch(r: Run, applicationVersion: string | null): Promise<RecoverySummary | undefined> {
  const { notice, log } = r;
  const why = r.lockSignal?.aborted
    ? 'lock lost'
    : r.opts.signal?.aborted
      ? 'shutting down'
      : r.budget.expired()
        ? 'work budget'
        : undefined;
  if (why) {
    await stopAtBoundary(r, 'partial');
    log.warn('recovery stopped at a batch boundary; redelivery finishes it', { why, reenqueued: r.reenqueued, batches: r.batches });
    throw new BudgetExhaustedError(`recovery of ${notice.executorId} (${why})`);
  }
  if (r.faults.enabled) await r.faults.hit('recover.beforeBatch', { recoveryId: r.recoveryId, batchNo: r.batches + 1, applicationVersion });
  if (!r.inferred) return undefined;
  // The heartbeat read before the lock is stale by now (a lock wait, earlier batches): a key that
  // came back means the executor lives, and every further row moved would run its step twice.
  const back = await heartbeatBack(r.deps, notice, { waitReadyMs: 0 });
  if (back.life === 'unknown' && !rechecked(notice, r.opts)) {
    await stopAtBoundary(r, 'partial');
    log.warn('heartbeat unreadable mid-recovery: stopped at a batch boundary; redelivery re-checks it', {
      reenqueued: r.reenqueued,
      batches: r.batches,
    });
    throw new HeartbeatUnknownError(notice.executorId);
  }
  if (back.life === true) {
    await contradicted(r, `heartbeat returned after ${r.reenqueued} re-enqueued in ${r.batches} batch(es): the executor is alive`);
    log.notice('heartbeat returned mid-recovery: stopped, the rest stays with the executor', {
      reenqueued: r.reenqueued,
      batches: r.batches,
      event: 'recovery_false_alarm',
    });
    return falseAlarm(notice, 'heartbeat', back.ttlMs, { recoveryId: r.recoveryId, reenqueued: r.reenqueued, batches: r.batches });
  }
  return undefined;
}

/** DBOS's recovery statement for the next batch, passing held rows over once one made a batch wait. */
async function oneBatch(
  r: Run,
  applicationVersion: string | null,
  created: CreatedRange,
  c: Cursor,
  noExecutor: boolean,
): Promise<BatchResult> {
  const runBatch = () =>
    reenqueueBatch(
      r.deps.db,
      { applicationName: r.notice.applicationName, executorId: r.notice.executorId, applicationVersion },
      {
        limit: r.deps.batchSize,
        range: created,
        after: c.after,
        recoveryId: r.recoveryId,
        batchNo: r.batches + 1,
        unscanned: c.unscanned,
        // Only the orphaned-version hook needs the IDs themselves.
        returnIds: noExecutor,
        ...(r.guard ? { guard: r.guard } : {}),
        skipLocked: r.skipLocked,
      },
    );
  try {
    return await runBatch();
  } catch (err) {
    // A held row (a host lost inside a transaction?): the batch rolled back after LOCK_WAIT_MS; it and
    // every later batch of this attempt pass held rows over, and what they leave is reported at the end.
    if (r.skipLocked || !isRowLockWait(err)) throw err;
    r.skipLocked = true;
    r.log.info('a batch waited on a row another transaction holds: passing held rows over', {
      waitedMs: LOCK_WAIT_MS,
      batchNo: r.batches + 1,
    });
    return runBatch();
  }
}

/** Counts a batch into the run (and the cursor's scan), then tells the fault point and the caller's progress. */
async function tally(r: Run, label: string, applicationVersion: string | null, batch: BatchResult): Promise<void> {
  r.batches += 1;
  r.reenqueued += batch.moved;
  r.versions[label] = (r.versions[label] ?? 0) + batch.moved;
  if (batch.ids?.length) {
    // Appended in place: copying the list on every batch made a 1M-row recovery quadratic (74 s against 39 s).
    const acc = r.orphanedIds.get(applicationVersion);
    if (acc) for (const id of batch.ids) acc.push(id);
    else r.orphanedIds.set(applicationVersion, [...batch.ids]);
  }
  if (r.faults.enabled) await r.faults.hit('recover.afterBatch', { recoveryId: r.recoveryId, batchNo: r.batches, reenqueued: batch.moved });
  r.opts.onBatch?.({ batchNo: r.batches, reenqueued: batch.moved });
}
