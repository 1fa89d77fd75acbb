import { appScope, type Db, ident } from '../../packages/executor/src/plane/index.js';

// What a death notice's check (shared/recovery/verifyNotice.ts) reads of an executor: afterlife's registry row
// and, without one, DBOS's PENDING rows of the app.

/**
 * One statement: the registry row (if any) and, only without one, whether the executor owns a PENDING
 * workflow of the app (a scan of the PENDING rows through DBOS's partial index, or the opt-in owner index).
 */
export async function lookupNoticed(
  db: Db,
  app: string,
  id: string,
): Promise<{ registered: boolean; state: string | undefined; liveness: boolean | undefined; pending: boolean }> {
  const res = await db.query<{ state: string | null; liveness: boolean | null; pending: boolean }>(
    `SELECT x.state, x.liveness,
            CASE WHEN x.state IS NULL THEN EXISTS (SELECT 1 FROM ${ident(db.dbosSchema)}.workflow_status
                     WHERE status = 'PENDING' AND executor_id = $2 AND ${appScope('application_name', '$1')}) ELSE false END AS pending
       FROM (SELECT 1) AS one
       LEFT JOIN ${ident(db.afterlifeSchema)}.executors AS x ON x.application_name = $1 AND x.executor_id = $2`,
    [app, id],
    'notice.lookup',
  );
  const row = res.rows[0];
  return {
    registered: row?.state != null,
    state: row?.state ?? undefined,
    liveness: row?.liveness ?? undefined,
    pending: row?.pending === true,
  };
}
