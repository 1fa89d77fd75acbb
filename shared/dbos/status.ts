import { appScope, type Db, ident, NOW_MS } from '../../packages/executor/src/plane/index.js';
import { activityClock } from './activity.js';

/**
 * Read-only aggregates over DBOS's tables for `afterlife-plane status`: PENDING work per executor with its
 * oldest activity and stuck count, and workflows by status. One statement each, no locks taken.
 */

export interface PendingSummary {
  executorId: string | null;
  applicationVersions: string[];
  pending: number;
  /** Epoch ms of the least recent activity among the executor's PENDING workflows. */
  oldestActivityMs: number | null;
  /** PENDING rows whose activity clock (the reaper's, shared/dbos/activity.ts) is older than the stuck threshold. */
  stuck: number;
}

export async function pendingSummaryByExecutor(db: Db, applicationName: string, stuckAfterMs: number): Promise<PendingSummary[]> {
  const ws = `${ident(db.dbosSchema)}.workflow_status`;
  const res = await db.query<{ executor_id: string | null; versions: string[] | null; n: string; oldest: string | null; stuck: string }>(
    `SELECT executor_id, array_agg(DISTINCT application_version) FILTER (WHERE application_version IS NOT NULL) AS versions,
            count(*)::text AS n, min(activity)::text AS oldest,
            count(*) FILTER (WHERE activity < ${NOW_MS} - $2::bigint)::text AS stuck
       FROM (SELECT w.executor_id, w.application_version, ${activityClock(db, 'w')} AS activity
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

export async function countByStatus(db: Db, applicationName: string): Promise<Record<string, number>> {
  const ws = `${ident(db.dbosSchema)}.workflow_status`;
  const byStatus = await db.query<{ status: string; n: string }>(
    `SELECT status, count(*)::text AS n FROM ${ws} WHERE ${appScope('application_name', '$1')} GROUP BY status ORDER BY status`,
    [applicationName],
    'status.byStatus',
  );
  return Object.fromEntries(byStatus.rows.map((r) => [r.status, Number(r.n)]));
}
