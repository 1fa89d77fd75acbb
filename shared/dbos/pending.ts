import { appScope, type Db, ident } from '../../packages/executor/src/plane/index.js';

/**
 * PENDING counts per executor, read from DBOS's table. There is no index on `executor_id`; the partial
 * `idx_workflow_status_pending` keeps the scan to PENDING rows, which are few.
 */
export async function pendingByExecutor(db: Db, applicationName: string, executorIds: string[]): Promise<Map<string, number>> {
  const res = await db.query<{ executor_id: string; n: string }>(
    `SELECT executor_id, count(*)::text AS n FROM ${ident(db.dbosSchema)}.workflow_status
      WHERE status = 'PENDING' AND executor_id = ANY($1::text[]) AND ${appScope('application_name', '$2')}
      GROUP BY executor_id`,
    [executorIds, applicationName],
    'dbos.pendingByExecutor',
  );
  return new Map(res.rows.map((r) => [r.executor_id, Number(r.n)]));
}

/** PENDING rows pinned to a version, whoever holds them (a drain is done only when this is 0). */
export async function pendingForVersion(db: Db, applicationName: string, applicationVersion: string): Promise<number> {
  const res = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM ${ident(db.dbosSchema)}.workflow_status
      WHERE status = 'PENDING' AND application_version = $1 AND ${appScope('application_name', '$2')}`,
    [applicationVersion, applicationName],
    'dbos.pendingForVersion',
  );
  return Number(res.rows[0]?.n ?? 0);
}

/**
 * ENQUEUED rows pinned to any of these versions. DBOS lets only an executor of exactly that version claim
 * them, so once the version is drained they wait — for an executor of it, or the reaper's orphaned pass.
 * The partial idx_workflow_status_in_flight_v2 (ENQUEUED/PENDING) keeps the scan to queued rows.
 */
export async function enqueuedForVersions(db: Db, applicationName: string, applicationVersions: string[]): Promise<number> {
  if (applicationVersions.length === 0) return 0;
  const res = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM ${ident(db.dbosSchema)}.workflow_status
      WHERE status = 'ENQUEUED' AND application_version = ANY($1::text[]) AND ${appScope('application_name', '$2')}`,
    [applicationVersions, applicationName],
    'dbos.enqueuedForVersions',
  );
  return Number(res.rows[0]?.n ?? 0);
}
