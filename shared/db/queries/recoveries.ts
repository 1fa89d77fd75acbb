import type pg from 'pg';
import type { Db } from '../../../packages/executor/src/db/pool.js';
import { ident } from '../../../packages/executor/src/contract/identifier.js';
import { appScope } from '../../../packages/executor/src/dbos/sql.js';
import { literal } from '../retentionSql.js';

/**
 * The recovery audit: one row per death, finished with its outcome and counts. A notice that repeats a
 * death already recorded — the registry says this incarnation is dead, a row about it was written since
 * the incarnation started, and nothing of the executor is PENDING — writes no row and gets that row's ID
 * (`duplicate`): 1,000 notices about one known dead executor wrote 1,000 rows (issue 30). Rows to move
 * make it a new attempt, audited on its own. One statement under a per-executor transaction lock, so
 * concurrent duplicates (degraded mode has no Redis lock) still write one row.
 */
export async function startRecovery(
  db: Db,
  r: {
    applicationName: string;
    executorId: string;
    reason: string;
    detectedBy: string;
    messageId: string | undefined;
    recoveredBy: string;
    lockMode: 'locked' | 'degraded';
    incarnation?: string | undefined;
  },
): Promise<{ id: number; duplicate: boolean }> {
  const a = ident(db.afterlifeSchema);
  const [app, executor, incarnation] = [literal(r.applicationName), literal(r.executorId), `${literal(r.incarnation)}::text`];
  // One message, one round trip (a burst of notices waits on the pool): the lock, then the statement in the
  // same implicit transaction, whose snapshot is taken after the lock, so it sees a concurrent duplicate's row.
  const out = (await db.query(
    `SELECT pg_advisory_xact_lock(hashtext('afterlife.recoveries'), hashtext(${app} || ':' || ${executor}));
     WITH recorded AS (
       SELECT x.id FROM ${a}.recoveries x
         JOIN ${a}.executors e ON e.application_name = x.application_name AND e.executor_id = x.executor_id
        WHERE x.application_name = ${app} AND x.executor_id = ${executor} AND e.state = 'dead'
          AND (${incarnation} IS NULL OR e.incarnation = ${incarnation}) AND (x.incarnation IS NULL OR x.incarnation = e.incarnation)
          AND (e.started_at IS NULL OR x.started_at >= e.started_at)
          AND NOT EXISTS (SELECT 1 FROM ${ident(db.dbosSchema)}.workflow_status w
                           WHERE w.executor_id = ${executor} AND w.status = 'PENDING' AND ${appScope('w.application_name', app)})
        ORDER BY x.started_at DESC LIMIT 1
     ),
     fresh AS (
       INSERT INTO ${a}.recoveries (application_name, executor_id, reason, detected_by, message_id, recovered_by, lock_mode, incarnation)
       SELECT ${app}, ${executor}, ${literal(r.reason)}, ${literal(r.detectedBy)}, ${literal(r.messageId)}, ${literal(r.recoveredBy)},
              ${literal(r.lockMode)}, ${incarnation}
        WHERE NOT EXISTS (SELECT 1 FROM recorded)
       RETURNING id
     )
     SELECT id::text, false AS duplicate FROM fresh UNION ALL SELECT id::text, true FROM recorded`,
    undefined,
    'recoveries.start',
  )) as unknown;
  // A multi-statement message resolves to one result per statement; the INSERT's is the last.
  const results = (Array.isArray(out) ? out : [out]) as Array<pg.QueryResult<{ id: string; duplicate: boolean }>>;
  const row = results.at(-1)?.rows[0];
  return { id: Number(row?.id), duplicate: row?.duplicate === true };
}

export async function finishRecovery(
  db: Db,
  id: number,
  r: {
    outcome: 'completed' | 'partial' | 'failed';
    reenqueued: number;
    batches: number;
    versions: Record<string, number>;
    versionsWithoutExecutor: string[];
    error?: string;
  },
): Promise<void> {
  await db.query(
    `UPDATE ${ident(db.afterlifeSchema)}.recoveries
        SET finished_at = now(), outcome = $2, reenqueued = $3, batches = $4, versions = $5,
            versions_without_executor = $6, error = $7
      WHERE id = $1`,
    [id, r.outcome, r.reenqueued, r.batches, JSON.stringify(r.versions), r.versionsWithoutExecutor, r.error ?? null],
    'recoveries.finish',
  );
}
