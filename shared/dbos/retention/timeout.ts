import { appScope, type Db, ident, NOW_MS } from '../../../packages/executor/src/plane/index.js';
import { retentionQuery } from '../../db/retentionSql.js';

/**
 * WORKFLOW_GLOBAL_TIMEOUT_MS: workflows still not completed that long after creation are cancelled the
 * way DBOS cancels — `cancelWorkflows(ids, cancelChildren = true)` of DBOS 5.2.11 and 5.3.0
 * (system_database.js) sets exactly these columns, level by level down parent_workflow_id — so a live
 * owner parks at its next step, its caller's getResult() ends with DBOSAwaitedWorkflowCancelledError, and
 * its children follow. Conductor's own global timeout (5.2.11 workflow_management.js globalTimeout) picks
 * `created_at <= cutoff AND status IN (PENDING, ENQUEUED, DELAYED)`, app-scoped; so does this.
 *
 * One statement: the roots (oldest first, at most `limit`, rows another statement holds skipped) and
 * their whole descendant tree, cancelled together. The UPDATE re-checks each row's status on its latest
 * version (READ COMMITTED), so one that completed meanwhile keeps its outcome. Two differences from
 * DBOS's statement, both narrower: rows already terminal (CANCELLED, MAX_RECOVERY_ATTEMPTS_EXCEEDED as
 * well as SUCCESS, ERROR) are left alone, so their completed_at is not rewritten; and the roots and their
 * descendants are this app's (DBOS's client cancels whatever IDs it is given; another application's
 * minute-old child of a timed-out root was cancelled with it).
 */
export interface TimedOut {
  workflowId: string;
  /** The workflow the timeout judged (a root) or a descendant cancelled with it. */
  root: string;
  createdAt: number;
}

export async function cancelTimedOut(db: Db, applicationName: string, timeoutMs: number, limit: number): Promise<TimedOut[]> {
  const s = ident(db.dbosSchema);
  const r = await retentionQuery<{ workflow_uuid: string; root: string; created_at: string }>(
    db,
    `WITH RECURSIVE roots AS (
       SELECT ws.workflow_uuid FROM ${s}.workflow_status ws
        WHERE ws.status IN ('PENDING', 'ENQUEUED', 'DELAYED') AND ws.created_at <= ${NOW_MS} - $2::bigint
          AND ${appScope('ws.application_name', '$1')}
        ORDER BY ws.created_at
        LIMIT $3
        FOR UPDATE SKIP LOCKED
     ),
     tree(id, root, depth) AS (
       SELECT workflow_uuid, workflow_uuid, 0 FROM roots
       UNION
       SELECT c.workflow_uuid, t.root, t.depth + 1
         FROM tree t JOIN ${s}.workflow_status c ON c.parent_workflow_id = t.id
        WHERE t.depth < 50 AND ${appScope('c.application_name', '$1')}
     )
     UPDATE ${s}.workflow_status ws
        SET status = 'CANCELLED', owner_xid = NULL, queue_name = NULL, deduplication_id = NULL, started_at_epoch_ms = NULL,
            updated_at = ${NOW_MS}, completed_at = ${NOW_MS}
       FROM (SELECT DISTINCT ON (id) id, root FROM tree ORDER BY id, depth) t
      WHERE ws.workflow_uuid = t.id AND ws.status IN ('PENDING', 'ENQUEUED', 'DELAYED')
     RETURNING ws.workflow_uuid, t.root, ws.created_at::text AS created_at`,
    [applicationName, timeoutMs, limit],
    'retention.cancelTimedOut',
  );
  return r.rows.map((x) => ({ workflowId: x.workflow_uuid, root: x.root, createdAt: Number(x.created_at) }));
}

/** The dry run: which roots the timeout would cancel now (their descendants go with them). */
export async function findTimedOut(db: Db, applicationName: string, timeoutMs: number, limit: number): Promise<string[]> {
  const s = ident(db.dbosSchema);
  const r = await retentionQuery<{ workflow_uuid: string }>(
    db,
    `SELECT ws.workflow_uuid FROM ${s}.workflow_status ws
      WHERE ws.status IN ('PENDING', 'ENQUEUED', 'DELAYED') AND ws.created_at <= ${NOW_MS} - $2::bigint
        AND ${appScope('ws.application_name', '$1')}
      ORDER BY ws.created_at LIMIT $3`,
    [applicationName, timeoutMs, limit],
    'retention.findTimedOut',
  );
  return r.rows.map((x) => x.workflow_uuid);
}
