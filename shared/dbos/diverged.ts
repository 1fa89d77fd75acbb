import type { Db } from '../db/pool.js';
import { ident } from '../db/pool.js';
import { type Divergence, parseDivergence } from '../fork/detect.js';
import { appScope } from './sql.js';

/**
 * The reaper's diverged pass input: top-level workflows of this app that ended ERROR with
 * `DBOSUnexpectedStepError` (code 26) and have not been dealt with — not forked yet (`was_forked_from`)
 * and not dead-lettered with the message out. Children are skipped: their parent fails with the same
 * error and is forked from the step that started them. That includes forks of children, which have no
 * parent_workflow_id: the fork ledger names them (child_fork_id, awaited_by). The LIKE is a cheap prefilter on
 * `COALESCE(workflow_output.error, workflow_status.error)`; parseDivergence decides. ERROR rows are
 * reached through DBOS's idx_workflow_status_failed (status, created_at).
 */
export interface DivergedRow {
  workflowId: string;
  divergence: Divergence;
}

/**
 * `completedSince` (epoch ms, database clock) narrows the scan to workflows that ended since then, through
 * DBOS's idx_workflow_status_completed_at: the reaper's later ticks look only since the previous one, so the
 * pass stays a short index range however many ERROR rows the history holds.
 */
export async function findDiverged(db: Db, applicationName: string, limit: number, opts: { completedSince?: number } = {}): Promise<DivergedRow[]> {
  const s = ident(db.dbosSchema);
  const a = ident(db.afterlifeSchema);
  const res = await db.query<{ workflow_uuid: string; error: string | null }>(
    `SELECT ws.workflow_uuid, COALESCE(wo.error, ws.error) AS error
       FROM ${s}.workflow_status ws
       LEFT JOIN ${s}.workflow_output wo ON wo.workflow_uuid = ws.workflow_uuid
      WHERE ws.status = 'ERROR' AND ${appScope('ws.application_name', '$1')}
        AND ($3::bigint IS NULL OR ws.completed_at >= $3::bigint)
        AND ws.parent_workflow_id IS NULL AND NOT ws.was_forked_from
        AND COALESCE(wo.error, ws.error) ~ '"dbosErrorCode":\\s*26\\M|was recorded when .* was expected'
        AND NOT EXISTS (SELECT 1 FROM ${a}.dead_letters d WHERE d.workflow_id = ws.workflow_uuid AND d.published_at IS NOT NULL)
        AND NOT EXISTS (SELECT 1 FROM ${a}.forks f WHERE f.child_fork_id = ws.workflow_uuid)
        AND NOT EXISTS (SELECT 1 FROM ${a}.forks f WHERE f.new_workflow_id = ws.workflow_uuid AND f.awaited_by IS NOT NULL)
      ORDER BY ws.created_at
      LIMIT $2`,
    [applicationName, limit, opts.completedSince ?? null],
    'dbos.findDiverged',
  );
  const out: DivergedRow[] = [];
  for (const r of res.rows) {
    const divergence = parseDivergence(r.error);
    if (divergence) out.push({ workflowId: r.workflow_uuid, divergence });
  }
  return out;
}
