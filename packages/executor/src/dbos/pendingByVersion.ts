import { ident } from '../contract/identifier.js';
import type { Db } from '../db/pool.js';
import { appScope } from './sql.js';

/**
 * The executor's oldest and newest PENDING `created_at` (bigints as text), read once per recovery by
 * `pendingByVersion`. DBOS's PENDING index holds only `created_at`, so without an upper bound the batch that
 * reaches the executor's newest row keeps reading every later PENDING row of other executors looking for
 * one more match (750k rows, 0.5–0.65 s holding 1,000 row locks, at 1M orphans; bench/HISTORY.md). A dead
 * executor claims nothing new, so its PENDING rows cannot leave this range; a row outside it (the
 * executor was alive after all) waits for the next recovery — it is a bound on the scan, not on the premise.
 */
export interface CreatedRange {
  oldest: string;
  newest: string;
}

export interface PendingByVersion {
  applicationVersion: string | null;
  count: number;
  /** The version's oldest and newest PENDING rows: the recovery's scan range. */
  created: CreatedRange;
}

/** PENDING rows a given executor still owns, per application version. */
export async function pendingByVersion(db: Db, applicationName: string, executorId: string): Promise<PendingByVersion[]> {
  const res = await db.query<{ application_version: string | null; n: string; oldest: string; newest: string }>(
    `SELECT application_version, count(*)::text AS n, min(created_at)::text AS oldest, max(created_at)::text AS newest
       FROM ${ident(db.dbosSchema)}.workflow_status
      WHERE status = 'PENDING' AND executor_id = $1 AND ${appScope('application_name', '$2')}
      GROUP BY application_version ORDER BY application_version NULLS FIRST`,
    [executorId, applicationName],
    'dbos.pendingByVersion',
  );
  return res.rows.map((r) => ({
    applicationVersion: r.application_version,
    count: Number(r.n),
    created: { oldest: r.oldest, newest: r.newest },
  }));
}
