import type { Db } from '../db/pool.js';
import { ident } from '../db/pool.js';
import { appScope, NOW_MS } from './sql.js';

/**
 * Read-only aggregates over DBOS's tables for `afterlife status`: PENDING work per executor with its
 * oldest activity, queue depth, stuck and diverged counts. One statement each, no locks taken.
 */

/**
 * SQL (epoch ms) for the activity clock of the workflow_status row aliased `w`: claim, last status change,
 * last completed step. A running step writes nothing until it completes, so this is a lower bound.
 */
export function simpleActivity(db: Pick<Db, 'dbosSchema'>, w: string): string {
  const oo = `${ident(db.dbosSchema)}.operation_outputs`;
  return `GREATEST(${w}.started_at_epoch_ms, ${w}.updated_at,
    (SELECT max(o.completed_at_epoch_ms) FROM ${oo} o WHERE o.workflow_uuid = ${w}.workflow_uuid))`;
}

export interface PendingSummary {
  executorId: string | null;
  applicationVersions: string[];
  pending: number;
  /** Epoch ms of the least recent activity among the executor's PENDING workflows. */
  oldestActivityMs: number | null;
  /** PENDING rows quiet for longer than the stuck threshold. */
  stuck: number;
}

export async function pendingSummaryByExecutor(db: Db, applicationName: string, stuckAfterMs: number): Promise<PendingSummary[]> {
  const ws = `${ident(db.dbosSchema)}.workflow_status`;
  const res = await db.query<{ executor_id: string | null; versions: string[] | null; n: string; oldest: string | null; stuck: string }>(
    `SELECT executor_id, array_agg(DISTINCT application_version) FILTER (WHERE application_version IS NOT NULL) AS versions,
            count(*)::text AS n, min(activity)::text AS oldest,
            count(*) FILTER (WHERE activity < ${NOW_MS} - $2::bigint)::text AS stuck
       FROM (SELECT w.executor_id, w.application_version, ${simpleActivity(db, 'w')} AS activity
               FROM ${ws} w WHERE w.status = 'PENDING' AND ${appScope('w.application_name', '$1')}) p
      GROUP BY executor_id ORDER BY executor_id NULLS FIRST`,
    [applicationName, stuckAfterMs],
    'status.pendingByExecutor',
  );
  return res.rows.map((r) => ({
    executorId: r.executor_id,
    applicationVersions: r.versions ?? [],
    pending: Number(r.n),
    oldestActivityMs: r.oldest === null ? null : Number(r.oldest),
    stuck: Number(r.stuck),
  }));
}

export interface WorkflowCounts {
  byStatus: Record<string, number>;
  /** ERROR rows that ended in DBOSUnexpectedStepError (code 26) and have not been forked yet. */
  diverged: number;
}

export async function workflowCounts(db: Db, applicationName: string): Promise<WorkflowCounts> {
  const ws = `${ident(db.dbosSchema)}.workflow_status`;
  const wo = `${ident(db.dbosSchema)}.workflow_output`;
  const byStatus = await db.query<{ status: string; n: string }>(
    `SELECT status, count(*)::text AS n FROM ${ws} WHERE ${appScope('application_name', '$1')} GROUP BY status ORDER BY status`,
    [applicationName],
    'status.byStatus',
  );
  // The error payload is superjson in workflow_output.error; `name` is "Error", so match the code (dbos-system-database.md §10).
  const diverged = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM ${ws} w LEFT JOIN ${wo} o ON o.workflow_uuid = w.workflow_uuid
      WHERE w.status = 'ERROR' AND NOT w.was_forked_from AND ${appScope('w.application_name', '$1')}
        AND COALESCE(o.error, w.error) ~ '"dbosErrorCode":\\s*26[,}]'`,
    [applicationName],
    'status.diverged',
  );
  return {
    byStatus: Object.fromEntries(byStatus.rows.map((r) => [r.status, Number(r.n)])),
    diverged: Number(diverged.rows[0]?.n ?? 0),
  };
}
