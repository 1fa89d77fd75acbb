import { DIVERGENCE_PREFILTER } from '../diverged.js';

/**
 * The SQL that decides whether a completed workflow may go. Shared by the read that picks a batch (and
 * the dry run) and by the delete that re-checks it, so the two can never disagree on the rule.
 *
 * `s` is DBOS's schema and `a` afterlife's (both quoted by ident()).
 */

/**
 * How far up the parent chain `held` walks to find a workflow's top-level ancestor. A chain longer than this
 * (or one that loops) leaves the root unknown, and the workflow is kept: retention errs on keeping.
 */
export const ANCESTOR_WALK = 50;

/** Conductor's "completed": the only statuses retention ever deletes. */
export const COMPLETED = `('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')`;

/**
 * `x` is unsettled: not completed (PENDING, ENQUEUED, DELAYED, or anything a newer DBOS adds), or a
 * diverged ERROR a repair has yet to deal with — not forked (was_forked_from), not rewound (a rewind
 * moves it out of ERROR), not dead-lettered with its message out. The same tests as findDiverged
 * (shared/dbos/diverged.ts), whatever the workflow's depth, so nothing the reaper or the app's
 * getResultWithRepair may still act on is ever deleted.
 */
export function unsettled(s: string, a: string, x: string): string {
  // COALESCEs: a NULL here must mean "settled" or "unsettled", never NULL (NOT NULL would drop the row).
  return `(COALESCE(${x}.status, '') NOT IN ${COMPLETED}
        OR (${x}.status = 'ERROR' AND NOT ${x}.was_forked_from
            AND COALESCE((SELECT xo.error FROM ${s}.workflow_output xo WHERE xo.workflow_uuid = ${x}.workflow_uuid), ${x}.error, '') ~ ${DIVERGENCE_PREFILTER}
            AND NOT EXISTS (SELECT 1 FROM ${a}.dead_letters d WHERE d.workflow_id = ${x}.workflow_uuid AND d.published_at IS NOT NULL)))`;
}

/**
 * Why a completed workflow `ws` must stay (true = keep it):
 * - it is itself a diverged ERROR awaiting its repair, or it belongs to the tree of one: its top-level
 *   ancestor is unsettled (a repair of the parent reads the children it started, and a rewind rewinds
 *   them in place);
 * - its parent or one of its children is unsettled (Conductor's rule: never a workflow whose parent or
 *   child is still running);
 * - it was forked from, and a fork along its lineage is unsettled: repairs number a lineage by walking
 *   DBOS's forked_from chain (lineageOf, packages/executor/src/repair/primitives/lineage.ts), so the chain must stay whole while any member lives.
 *
 * Recursions are bounded (a parent chain or a fork chain that loops cannot hang the statement) and run
 * only for the rows that need them (parents, was_forked_from), which are few next to plain workflows.
 */
export function held(s: string, a: string): string {
  return `(${unsettled(s, a, 'ws')}
    OR EXISTS (SELECT 1 FROM ${s}.workflow_status p WHERE p.workflow_uuid = ws.parent_workflow_id AND ${unsettled(s, a, 'p')})
    OR EXISTS (SELECT 1 FROM ${s}.workflow_status c WHERE c.parent_workflow_id = ws.workflow_uuid AND ${unsettled(s, a, 'c')})
    OR (ws.parent_workflow_id IS NOT NULL AND EXISTS (
          WITH RECURSIVE up(id, parent, depth) AS (
            SELECT ws.workflow_uuid, ws.parent_workflow_id, 0
            UNION ALL
            SELECT u.workflow_uuid, u.parent_workflow_id, up.depth + 1
              FROM up JOIN ${s}.workflow_status u ON u.workflow_uuid = up.parent
             WHERE up.depth < ${ANCESTOR_WALK})
          SELECT 1 FROM up JOIN ${s}.workflow_status r ON r.workflow_uuid = up.id
           WHERE (up.parent IS NULL AND ${unsettled(s, a, 'r')})
              -- The walk stopped at its bound with an ancestor still above: the root is unknown, so kept
              -- (completed descendants more than 50 levels below a running root were deleted).
              OR (up.depth >= ${ANCESTOR_WALK} AND up.parent IS NOT NULL)))
    OR (ws.was_forked_from AND EXISTS (
          WITH RECURSIVE down(id, depth) AS (
            SELECT f.workflow_uuid, 1 FROM ${s}.workflow_status f WHERE f.forked_from = ws.workflow_uuid
            UNION
            SELECT f.workflow_uuid, down.depth + 1
              FROM down JOIN ${s}.workflow_status f ON f.forked_from = down.id
             WHERE down.depth < 100)
          SELECT 1 FROM down JOIN ${s}.workflow_status m ON m.workflow_uuid = down.id
           WHERE ${unsettled(s, a, 'm')})))`;
}
