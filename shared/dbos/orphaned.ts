import { appScope, type Db, ident, NOW_MS } from '../../packages/executor/src/plane/index.js';
import { sessionServesSql } from './reaper.js';

/**
 * The reaper's orphaned-versions input: ENQUEUED rows of the app (NULL app name included) pinned to a
 * version no live executor runs, untouched for a grace. DBOS claims an ENQUEUED row only on its exact
 * version (NULL only on the latest), so such a row waits forever unless the policy acts on it.
 *
 * `liveVersions` comes from the heartbeats; a version with a DBOS session in pg_stat_activity
 * (`dbos_transact_<executorId>_<version>`) counts as live too, so an executor without the kit is never
 * mistaken for a dead one when this role can see other sessions (without that grant the check sees only
 * afterlife's own sessions and changes nothing). The grace runs on the database clock, like updated_at.
 *
 * ENQUEUED rows are reached through DBOS's partial idx_workflow_status_in_flight_v2 (ENQUEUED/PENDING
 * only), so the statement reads the in-flight rows, never the history.
 */
export interface OrphanedRow {
  workflowId: string;
  executorId: string | null;
  applicationVersion: string;
}

export async function findOrphanedEnqueued(
  db: Db,
  applicationName: string,
  o: { liveVersions: string[]; graceMs: number; limit: number },
): Promise<OrphanedRow[]> {
  const res = await db.query<{ workflow_uuid: string; executor_id: string | null; application_version: string }>(
    `WITH sessions AS MATERIALIZED (
       SELECT a.application_name FROM pg_stat_activity a
        WHERE a.datname = current_database() AND starts_with(a.application_name, 'dbos_transact_'))
     SELECT w.workflow_uuid, w.executor_id, w.application_version
       FROM ${ident(db.dbosSchema)}.workflow_status w
      WHERE w.status = 'ENQUEUED' AND w.application_version IS NOT NULL
        AND ${appScope('w.application_name', '$1')}
        AND w.updated_at < ${NOW_MS} - $2::bigint
        AND w.application_version <> ALL ($3::text[])
        AND NOT EXISTS (SELECT 1 FROM sessions s
                         WHERE ${sessionServesSql('s.application_name', 'w.application_version')})
      ORDER BY w.updated_at, w.workflow_uuid
      LIMIT $4`,
    [applicationName, o.graceMs, o.liveVersions, o.limit],
    'dbos.findOrphanedEnqueued',
  );
  return res.rows.map((r) => ({ workflowId: r.workflow_uuid, executorId: r.executor_id, applicationVersion: r.application_version }));
}

/**
 * `afterlife-plane status`'s view of the same rows, without the grace: ENQUEUED work pinned to a version no live
 * executor runs, per version, with the oldest row's age on the database clock (from which the orphaned-version
 * pass's grace is counted). Stranded now, orphaned once the grace has passed.
 */
export interface StrandedVersion {
  applicationVersion: string;
  count: number;
  /** Milliseconds since the oldest of these rows was last touched (database clock). */
  oldestAgeMs: number;
}

export async function countStrandedEnqueued(db: Db, applicationName: string, liveVersions: string[]): Promise<StrandedVersion[]> {
  const res = await db.query<{ application_version: string; n: number; oldest_age_ms: string }>(
    `WITH sessions AS MATERIALIZED (
       SELECT a.application_name FROM pg_stat_activity a
        WHERE a.datname = current_database() AND starts_with(a.application_name, 'dbos_transact_'))
     SELECT w.application_version, count(*)::int AS n, (${NOW_MS} - min(w.updated_at))::bigint AS oldest_age_ms
       FROM ${ident(db.dbosSchema)}.workflow_status w
      WHERE w.status = 'ENQUEUED' AND w.application_version IS NOT NULL
        AND ${appScope('w.application_name', '$1')}
        AND w.application_version <> ALL ($2::text[])
        AND NOT EXISTS (SELECT 1 FROM sessions s
                         WHERE ${sessionServesSql('s.application_name', 'w.application_version')})
      GROUP BY w.application_version
      ORDER BY w.application_version`,
    [applicationName, liveVersions],
    'dbos.countStrandedEnqueued',
  );
  return res.rows.map((r) => ({
    applicationVersion: r.application_version,
    count: r.n,
    oldestAgeMs: Math.max(0, Number(r.oldest_age_ms)),
  }));
}
