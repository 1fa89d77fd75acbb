import { type Db, ident } from '../../packages/executor/src/plane/index.js';

/**
 * The activity clock of a workflow (dbos-system-database.md §13): the latest of its claim time
 * (`started_at_epoch_ms`), its last status change (`updated_at`), its steps' completions and — because a
 * parent that awaits a child writes nothing while the child works — the same signals of its descendants.
 * A `DBOS.sleep` checkpoint is written upfront with its wake-up time as `completed_at_epoch_ms`, so a
 * sleeping workflow's clock lies in the future and it is never "quiet". A running step leaves no trace
 * until it completes: the clock is a lower bound on activity, which is why it is only ever combined with
 * other evidence (a live heartbeat for "stuck", no sessions for "dead").
 */
export const MAX_CHILD_DEPTH = 8;

/** SQL expression (epoch ms) for the activity clock of the `workflow_status` row aliased `w`. */
export function activityClock(db: Pick<Db, 'dbosSchema'>, w: string): string {
  const ws = `${ident(db.dbosSchema)}.workflow_status`;
  const oo = `${ident(db.dbosSchema)}.operation_outputs`;
  const steps = (alias: string) => `(SELECT max(o.completed_at_epoch_ms) FROM ${oo} o WHERE o.workflow_uuid = ${alias}.workflow_uuid)`;
  return `GREATEST(
      ${w}.started_at_epoch_ms, ${w}.updated_at, ${steps(w)},
      (WITH RECURSIVE d(id, depth) AS (
          SELECT c.workflow_uuid, 1 FROM ${ws} c WHERE c.parent_workflow_id = ${w}.workflow_uuid
          UNION ALL
          SELECT c.workflow_uuid, d.depth + 1 FROM ${ws} c JOIN d ON c.parent_workflow_id = d.id
           WHERE d.depth < ${MAX_CHILD_DEPTH})
       SELECT max(GREATEST(x.started_at_epoch_ms, x.updated_at, x.completed_at, ${steps('x')}))
         FROM d JOIN ${ws} x ON x.workflow_uuid = d.id))`;
}

/**
 * "Quiet since `$param`": no claim, status change, checkpoint (or future sleep deadline) at or after it,
 * in the workflow or any descendant. Same signals as `activityClock`, written for speed: the row's own
 * timestamps first (no subquery), then the checkpoints newest-first (a backward scan of the primary key
 * that stops at the first recent one — a busy workflow costs one index probe, not all its steps), then
 * the descendants.
 */
export function quietSince(db: Pick<Db, 'dbosSchema'>, w: string, param: string): string {
  const ws = `${ident(db.dbosSchema)}.workflow_status`;
  const recentStep = (alias: string) =>
    `(SELECT o.completed_at_epoch_ms FROM ${ident(db.dbosSchema)}.operation_outputs o
       WHERE o.workflow_uuid = ${alias}.workflow_uuid AND o.completed_at_epoch_ms >= ${param}
       ORDER BY o.function_id DESC LIMIT 1) IS NULL`;
  return `GREATEST(${w}.started_at_epoch_ms, ${w}.updated_at) < ${param}
      AND ${recentStep(w)}
      AND NOT EXISTS (
        WITH RECURSIVE d(id, depth) AS (
            SELECT c.workflow_uuid, 1 FROM ${ws} c WHERE c.parent_workflow_id = ${w}.workflow_uuid
            UNION ALL
            SELECT c.workflow_uuid, d.depth + 1 FROM ${ws} c JOIN d ON c.parent_workflow_id = d.id
             WHERE d.depth < ${MAX_CHILD_DEPTH})
        SELECT 1 FROM d JOIN ${ws} x ON x.workflow_uuid = d.id
         WHERE NOT (COALESCE(GREATEST(x.started_at_epoch_ms, x.updated_at, x.completed_at), 0) < ${param} AND ${recentStep('x')}))`;
}
