import {
  appScope,
  type CreatedRange,
  type Db,
  ident,
  livenessHeldSql,
  NOW_MS,
  REQUEUED_MAX_QUEUES,
  REQUEUED_NUDGE_TARGETS,
  requeuedChannel,
  requeuedPayload,
} from '../../packages/executor/src/plane/index.js';
import { quietSince } from './activity.js';
import { UNATTRIBUTED_SESSION_NAMES, unattributedSql } from './reaper.js';

/**
 * DBOS's own recovery statement (recoverPendingWorkflows, system_database.ts), scoped by application
 * name, dead executor and version, applied to one keyset-ordered batch at a time. The WHERE clause of the
 * UPDATE re-checks the full premise, so a row a live executor claimed in the meantime (its executor_id
 * changed) or one another recovery already moved (no longer PENDING) is left alone. The same statement
 * records the moved IDs in afterlife's audit, so the audit commits if and only if the re-enqueue does, and
 * picks a few live executors of the version to ask to claim the rows now. The asking (a NOTIFY;
 * packages/executor/src/contract/requeued.ts says why and what they do with it) is a statement of its own
 * after the batch committed: a hint must never fail the move, and a NOTIFY inside it could (a payload of
 * 8,000 bytes or more, a full notification queue, both raised at the statement or at its commit).
 */
export interface BatchScope {
  applicationName: string;
  executorId: string;
  applicationVersion: string | null;
}

/**
 * Extra premise re-checked in the UPDATE itself, because it is the evidence the decision rested on. For
 * executors judged dead without a heartbeat (no kit): every moved row must still be quiet since
 * `quietSinceMs` and the executor must still have no session in pg_stat_activity. For executors judged by
 * their liveness lock: the lock must still be free (a kit that took it again is alive).
 */
export interface RecoveryGuard {
  quietSinceMs?: number;
  noSessionsPrefix?: string;
  livenessFree?: boolean;
}

export interface BatchCursor {
  createdAt: string; // bigint as text
  workflowId: string;
}

export interface BatchResult {
  /** Rows re-enqueued. */
  moved: number;
  /** Their IDs, only when asked for (`returnIds`): 1,000 IDs cost about a millisecond to parse, per batch. */
  ids: string[] | undefined;
  /** Rows the candidate scan found; more than `moved` when the UPDATE's re-check left some alone. */
  candidates: number;
  next: BatchCursor | undefined;
  /** Why the claim-now hint for the moved rows could not be sent (the rows moved all the same). */
  hintFailed?: string;
}

/*
 * Why a batch commits without waiting for the WAL flush. A batch holds its rows' locks until its commit is
 * done, and a synchronous commit waits for the fsync of its WAL, which queues behind whatever else the disk
 * is doing. At 1M orphans the recovery's own WAL starts a checkpoint every few seconds, and sampling the
 * recovering session's wait events showed every batch over 100 ms spending most of its time in
 * IO:WALSync, its own commit flush, holding 1,000 row locks for 150–340 ms instead of 30 (bench/HISTORY.md).
 * DBOS's single statement waits for one flush at its end; a batched recovery would wait once per batch.
 *
 * Durability is unchanged where it matters. WAL is one sequence, and a synchronous commit flushes all of
 * it up to its own record, so:
 * - nothing can build on a lost batch durably: a live executor that claims a re-enqueued row commits
 *   synchronously, and its flush covers this batch;
 * - the recovery ends with `finishRecovery` (a synchronous commit; recoverExecutor.ts) before the notice
 *   is acknowledged, which makes every batch durable (test/integration/recovery/durability.test.ts);
 * - a Postgres crash before that loses at most the last batches, whose rows are PENDING on the dead
 *   executor again; the notice was never acknowledged, and its redelivery moves them.
 */

/** How long a batch waits for a row another transaction holds before the recovery passes such rows over. */
export const LOCK_WAIT_MS = 1_000;

/** Postgres's `lock_not_available`: the batch gave up waiting for a held row (LOCK_WAIT_MS). */
export function isRowLockWait(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '55P03';
}

/** The recovery's premise on a row (alias prefix `t`), with $1 executor, $2 version, $3 application name. */
function scopePremise(scope: BatchScope, t: string): string {
  // Equality (or IS NULL) rather than IS NOT DISTINCT FROM, which no index can take: with the opt-in owner
  // index the candidate scan is then a plain range of (executor_id, application_version, created_at, workflow_uuid).
  const version = scope.applicationVersion === null ? `${t}application_version IS NULL` : `${t}application_version = $2`;
  return `${t}status = 'PENDING' AND ${t}executor_id = $1 AND ${version}
          AND ${appScope(`${t}application_name`, '$3')}`;
}

export interface BatchOptions {
  limit: number;
  range: CreatedRange;
  after: BatchCursor | undefined;
  recoveryId: number;
  batchNo: number;
  guard?: RecoveryGuard;
  /**
   * Rows of the range not yet scanned, from the PENDING count the range came with: a batch whose scan
   * reaches it has read the range to its end, so no further statement is run to find that out. Rows
   * cannot join a dead executor's range; one that did (it was alive) waits for the next recovery.
   */
  unscanned?: number | undefined;
  /** Return the moved IDs (the audit records them either way). */
  returnIds?: boolean;
  /**
   * Pass over rows another transaction holds (`SKIP LOCKED`) instead of waiting up to `LOCK_WAIT_MS` for
   * them. The lock clause costs a WAL record per row (bench/skipLocked.ts), so a recovery takes it only
   * after a batch found a held row (RowLockWaitError).
   */
  skipLocked?: boolean;
}

export async function reenqueueBatch(db: Db, scope: BatchScope, opts: BatchOptions): Promise<BatchResult> {
  const { text, values } = batchStatement(db, scope, opts);
  const res = await db.query<{
    ids: string[] | null;
    moved: number | null;
    candidates: number | null;
    last: [string, string] | null;
    nudge_to: string[] | null;
    nudge_queues: string[] | null;
    nudge_queue_count: number | null;
  }>(text, values, 'recover.batch', {
    prepared: true,
  });
  const row = res.rows[0];
  const hintFailed = row?.nudge_to?.length
    ? await askToClaim(db, scope, row.nudge_to, row.nudge_queues ?? [], row.nudge_queue_count ?? 0)
    : undefined;
  const moved = row?.moved ?? 0;
  const ids = opts.returnIds ? (row?.ids ?? []) : undefined;
  const candidates = row?.candidates ?? 0;
  // A short batch, or one that reached the count, read the range to its end: no statement is run to find that out.
  const more = candidates >= opts.limit && (opts.unscanned === undefined || candidates < opts.unscanned);
  const next = row?.last && more ? { createdAt: row.last[0], workflowId: row.last[1] } : undefined;
  return { moved, ids, candidates, next, ...(hintFailed ? { hintFailed } : {}) };
}

/**
 * Asks the chosen executors to claim the moved rows now, best-effort: the payload is bounded below
 * Postgres's limit (requeuedPayload), and any error (a full notification queue, a lost connection) is
 * returned for the caller to report, never thrown: the rows are ENQUEUED already and DBOS's next poll
 * claims them anyway.
 */
async function askToClaim(db: Db, scope: BatchScope, to: string[], queues: string[], queueCount: number): Promise<string | undefined> {
  const payload = requeuedPayload({
    applicationName: scope.applicationName,
    applicationVersion: scope.applicationVersion,
    to,
    queues,
    queueCount,
  });
  if (payload === undefined) return 'the application name, version and executor IDs alone exceed the notification payload bound';
  try {
    await db.query('SELECT pg_notify($1::text, $2::text)', [requeuedChannel(db.afterlifeSchema), payload], 'recover.askToClaim');
    return undefined;
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown };
    return `${typeof e.code === 'string' ? `${e.code} ` : ''}${typeof e.message === 'string' ? e.message : String(err)}`;
  }
}

/** The batch's parameters and the clauses that depend on them (lock wait, held rows, the guard's evidence). */
function batchStatement(db: Db, scope: BatchScope, opts: BatchOptions): { text: string; values: unknown[] } {
  const values: unknown[] = [
    scope.executorId,
    scope.applicationVersion,
    scope.applicationName,
    opts.limit,
    // Before the first batch the cursor sits just below the oldest row: every ID is greater than ''.
    opts.after?.createdAt ?? (BigInt(opts.range.oldest) - 1n).toString(),
    opts.after?.workflowId ?? '',
    opts.recoveryId,
    opts.batchNo,
    opts.range.newest,
  ];
  const param = (v: unknown, type: string) => {
    values.push(v);
    return `$${values.length}::${type}`;
  };
  // A row another transaction holds (a lost host's session, possibly for as long as a proxy keeps it) is
  // never waited on for long: the batch gives up after LOCK_WAIT_MS (55P03, set once per statement by an
  // init plan that runs before the UPDATE takes any lock) and the recovery re-runs it passing such rows over,
  // moving the rest now and reporting what it left (lockedLeft) instead of recording itself finished.
  const waitBound = opts.skipLocked
    ? ''
    : `AND (SELECT set_config('lock_timeout', ${param(String(LOCK_WAIT_MS), 'text')}, true)) IS NOT NULL`;
  const skipHeld = opts.skipLocked ? 'FOR NO KEY UPDATE SKIP LOCKED' : '';
  // Only the evidence this death rests on is written into the statement: a new session plans the
  // pg_stat_activity and pg_locks views (a few ms) only when a batch re-checks them.
  const guard = opts.guard ?? {};
  const evidence: string[] = [];
  if (guard.quietSinceMs !== undefined) evidence.push(`AND (${quietSince(db, 'w', param(guard.quietSinceMs, 'bigint'))})`);
  if (guard.noSessionsPrefix !== undefined) {
    // No session of the executor, and none that could be anyone's: an unattributed session appearing since
    // the judgement (a DBOS for Python process starting) makes the death unknown again.
    evidence.push(`AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                   WHERE a.datname = current_database()
                     AND (starts_with(a.application_name, ${param(guard.noSessionsPrefix, 'text')})
                          OR ${unattributedSql(db, 'a', param(UNATTRIBUTED_SESSION_NAMES, 'text[]'))}))`);
  }
  if (guard.livenessFree) evidence.push(`AND NOT ${livenessHeldSql(db.afterlifeSchema, '$3::text', '$1::text')}`);
  const premise = (t: string) => scopePremise(scope, t);
  const ws = `${ident(db.dbosSchema)}.workflow_status`;
  const audit = `${ident(db.afterlifeSchema)}.recovery_batches`;
  const nudge = {
    executors: `${ident(db.afterlifeSchema)}.executors`,
    targets: param(REQUEUED_NUDGE_TARGETS, 'int'),
    maxQueues: param(REQUEUED_MAX_QUEUES, 'int'),
  };
  return { text: batchSql({ ws, audit, premise, waitBound, skipHeld, evidence, nudge, returnIds: opts.returnIds === true }), values };
}

/** The statement: candidates by keyset, the re-checked UPDATE, the audit row, and the cursor's next position. */
function batchSql(t: {
  ws: string;
  audit: string;
  premise: (alias: string) => string;
  waitBound: string;
  skipHeld: string;
  evidence: string[];
  nudge: { executors: string; targets: string; maxQueues: string };
  returnIds: boolean;
}): string {
  return `WITH candidates AS (
       SELECT ctid, workflow_uuid, created_at FROM ${t.ws}
        WHERE ${t.premise('')}
          -- The plain bounds on created_at make idx_workflow_status_pending read only from the cursor to the
          -- executor's newest row (see CreatedRange); the row comparison alone would be a filter, rescanning
          -- moved rows on every batch. No parameter is ever NULL, so a generic plan keeps the index range.
          AND created_at >= $5::bigint AND created_at <= $9::bigint AND (created_at, workflow_uuid) > ($5::bigint, $6::text)
          ${t.waitBound}
        ORDER BY created_at, workflow_uuid
        LIMIT $4
        ${t.skipHeld}
     ),
     moved AS (
       UPDATE ${t.ws} w
          SET started_at_epoch_ms = NULL, status = 'ENQUEUED', owner_xid = NULL,
              updated_at = ${NOW_MS}, queue_name = COALESCE(w.queue_name, '_dbos_internal_queue')
        -- The batch is fetched by tuple ID (a join would hash every PENDING row of the executor on every
        -- batch, turning a large recovery quadratic). If a row changed since the candidate scan, READ
        -- COMMITTED follows it to its newest version and re-evaluates the premise below, so a row a live
        -- executor claimed meanwhile is skipped.
        WHERE w.ctid = ANY (ARRAY(SELECT ctid FROM candidates)) AND ${t.premise('w.')}
          ${t.evidence.join('\n          ')}
        RETURNING w.workflow_uuid, w.queue_name
     ),
     logged AS (
       INSERT INTO ${t.audit} (recovery_id, batch_no, application_version, workflow_ids)
       SELECT $7, $8, $2, array_agg(workflow_uuid) FROM moved HAVING count(*) > 0
     ),
     -- Live executors of the version whose kits can poll on request, chosen at random (the one-time filter
     -- on moved keeps a batch that moved nothing from reading the registry at all).
     targets AS (
       SELECT ARRAY(SELECT x.executor_id FROM ${t.nudge.executors} x
                     WHERE x.application_name = $3 AND x.state = 'alive' AND x.executor_id <> $1
                       AND ($2::text IS NULL OR x.application_version = $2::text)
                       AND x.kit_facts @> '{"pollsOnRequest": true}'
                     ORDER BY random() LIMIT ${t.nudge.targets}) AS ids
        WHERE EXISTS (SELECT 1 FROM moved)
     ),
     queues AS (SELECT array_agg(DISTINCT queue_name ORDER BY queue_name) AS names FROM moved
                 WHERE EXISTS (SELECT 1 FROM targets WHERE cardinality(targets.ids) > 0))
     SELECT ${t.returnIds ? '(SELECT array_agg(workflow_uuid) FROM moved)' : 'NULL::text[]'} AS ids, (SELECT count(*)::int FROM moved) AS moved,
            (SELECT count(*)::int FROM candidates) AS candidates,
            -- Whom to ask and about which queues; askToClaim asks once this statement committed.
            (SELECT NULLIF(ids, '{}') FROM targets) AS nudge_to,
            (SELECT names[1:${t.nudge.maxQueues}] FROM queues) AS nudge_queues,
            (SELECT cardinality(names) FROM queues) AS nudge_queue_count,
            -- Transaction-local, so it governs this statement's own commit only; see the note above reenqueueBatch.
            set_config('synchronous_commit', 'off', true) AS commit_mode,
            (SELECT ARRAY[created_at::text, workflow_uuid] FROM candidates ORDER BY created_at DESC, workflow_uuid DESC LIMIT 1) AS last`;
}

/** At most this many locked rows are named per version; the count past it is still exact enough to say "some". */
export const LOCKED_LEFT_MAX = 100;

/**
 * The rows of a version's range a recovery passed over because another transaction holds them (the
 * candidate scan skips locked rows): still PENDING on the executor and still locked now. Asked only when a
 * version moved fewer rows than it counted, so a recovery that moved everything runs no extra statement.
 * A row still PENDING but free (one the evidence guard refused) is not locked: it stays as it always did.
 */
export async function lockedLeft(db: Db, scope: BatchScope, range: CreatedRange): Promise<string[]> {
  const ws = `${ident(db.dbosSchema)}.workflow_status`;
  const res = await db.query<{ ids: string[] | null }>(
    `WITH left_rows AS (
       SELECT workflow_uuid FROM ${ws}
        WHERE ${scopePremise(scope, '')} AND created_at >= $4::bigint AND created_at <= $5::bigint
        ORDER BY created_at, workflow_uuid LIMIT $6
     ),
     -- Locked for the statement only (it commits at once): the rows the recovery's UPDATE could take now.
     free AS (
       SELECT w.workflow_uuid FROM ${ws} w
        WHERE w.workflow_uuid IN (SELECT workflow_uuid FROM left_rows) AND ${scopePremise(scope, 'w.')}
        FOR NO KEY UPDATE SKIP LOCKED
     )
     SELECT $2::text AS version, array_agg(workflow_uuid ORDER BY workflow_uuid) AS ids FROM left_rows WHERE workflow_uuid NOT IN (SELECT workflow_uuid FROM free)`,
    [scope.executorId, scope.applicationVersion, scope.applicationName, range.oldest, range.newest, LOCKED_LEFT_MAX],
    'recover.lockedLeft',
  );
  return res.rows[0]?.ids ?? [];
}

/**
 * Of rows a recovery left locked (`lockedLeft`), how many are still PENDING on the executor, and how many
 * of those a transaction still holds. Cheap (primary-key lookups of a few rows): the reaper asks it every
 * tick, so the rows move on the first tick after the transaction ends rather than a re-declaration later.
 */
export async function stillLocked(
  db: Db,
  applicationName: string,
  executorId: string,
  workflowIds: string[],
): Promise<{ pending: number; locked: number }> {
  const ws = `${ident(db.dbosSchema)}.workflow_status`;
  const premise = (t: string) =>
    `${t}workflow_uuid = ANY($1) AND ${t}status = 'PENDING' AND ${t}executor_id = $2 AND ${appScope(`${t}application_name`, '$3')}`;
  const res = await db.query<{ pending: number; free: number }>(
    `WITH left_rows AS (SELECT workflow_uuid FROM ${ws} WHERE ${premise('')}),
     free AS (SELECT w.workflow_uuid FROM ${ws} w WHERE ${premise('w.')} FOR NO KEY UPDATE SKIP LOCKED)
     SELECT (SELECT count(*) FROM left_rows)::int AS pending, (SELECT count(*) FROM free)::int AS free`,
    [workflowIds, executorId, applicationName],
    'recover.stillLocked',
  );
  const row = res.rows[0];
  return { pending: row?.pending ?? 0, locked: Math.max(0, (row?.pending ?? 0) - (row?.free ?? 0)) };
}
