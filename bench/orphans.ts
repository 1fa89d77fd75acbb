import pg from 'pg';
import { applyOptInIndexes } from '../shared/db/optIn.js';
import { afterlifeDb } from './lib.js';

/**
 * The recovery benches' data: N orphans of a dead executor ('dead-1', v1; half on a queue, half direct
 * starts, shaped like DBOS's rows) plus 4×N rows of other executors, statuses and apps.
 */
export const APP = 'bench-app';

/** Seeds a database made by createDbosDatabase; `withIndex` also builds afterlife's opt-in PENDING-owner index. */
export async function seedOrphans(url: string, n: number, withIndex = false): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  // Orphans of 'dead-1' (v1), then noise: live executors' PENDING rows, finished rows, another app's orphans.
  await c.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
        application_name, queue_name, recovery_attempts, owner_xid, created_at, updated_at, started_at_epoch_ms, serialization)
     SELECT 'orphan-' || g, 'PENDING', 'agentWorkflow', '', '', 'dead-1', 'v1', $2,
            CASE WHEN g % 2 = 0 THEN 'agents' END, 1, md5(g::text), 1700000000000 + g, 1700000000000 + g,
            CASE WHEN g % 2 = 0 THEN 1700000000000 + g END, 'js_superjson'
       FROM generate_series(1, $1) g`,
    [n, APP],
  );
  await c.query(
    `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
        application_name, queue_name, recovery_attempts, owner_xid, created_at, updated_at, serialization)
     SELECT 'noise-' || g,
            (ARRAY['PENDING', 'SUCCESS', 'SUCCESS', 'ERROR'])[1 + g % 4],
            'agentWorkflow', '', '', 'live-' || (g % 20), 'v1',
            CASE WHEN g % 10 = 0 THEN 'other-app' ELSE $2 END,
            NULL, 1, md5(g::text), 1700000000000 + g, 1700000000000 + g, 'js_superjson'
       FROM generate_series(1, $1 * 4) g`,
    [n, APP],
  );
  if (withIndex) {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    await applyOptInIndexes(afterlifeDb(pool, 1));
    await pool.end();
  }
  await c.query('VACUUM ANALYZE dbos.workflow_status');
  await c.end();
}
