import { appScope, type Db, type Divergence, ident, parseDivergence } from '../../packages/executor/src/plane/index.js';

/** The regex prefilter for a code-26 error, as an SQL literal; parseDivergence decides. */
export const DIVERGENCE_PREFILTER = `'"dbosErrorCode":\\s*26\\M|was recorded when .* was expected'`;

/**
 * The ID the fork planner (shared/repair/situations/divergedPlan.ts) gives a child forked afresh for a parent's fork (`<root>-fork-<n>-child-<step>`). Such a
 * fork is always its parent fork's to await, never a lineage of its own; recognising it by its ID keeps it
 * out of the pass even when the ledger does not name it (the app helper forked, or the process died
 * between the child's fork and the parent's).
 */
const FRESH_CHILD_ID = `'-fork-[0-9]+-child-[0-9]+$'`;

/**
 * The reaper's diverged pass input: top-level workflows of this app that ended ERROR with
 * `DBOSUnexpectedStepError` (code 26) and have not been dealt with — not forked yet (`was_forked_from`)
 * and not dead-lettered with the message out. Children are skipped: their parent fails with the same
 * error and is forked from the step that started them. That includes forks of children, which have no
 * parent_workflow_id: the fork ledger names them (child_fork_id, awaited_by), and a fresh child also has a
 * recognisable ID. The regex is a cheap prefilter on
 * `COALESCE(workflow_output.error, workflow_status.error)`; parseDivergence decides. ERROR rows are
 * reached through DBOS's idx_workflow_status_failed (status, created_at).
 */
export interface DivergedRow {
  workflowId: string;
  divergence: Divergence;
  /** The ending (epoch ms): a workflow rewound in place that diverges again ends with another. */
  completedAt: number | null;
}

/**
 * `completedSince` (epoch ms, database clock) narrows the scan to workflows that ended since then, through
 * DBOS's idx_workflow_status_completed_at: the reaper's later ticks look only since the previous one, so the
 * pass stays a short index range however many ERROR rows the history holds.
 */
export async function findDiverged(
  db: Db,
  applicationName: string,
  limit: number,
  opts: { completedSince?: number } = {},
): Promise<DivergedRow[]> {
  const s = ident(db.dbosSchema);
  const a = ident(db.afterlifeSchema);
  const res = await db.query<{ workflow_uuid: string; error: string | null; completed_at: string | null }>(
    `SELECT ws.workflow_uuid, COALESCE(wo.error, ws.error) AS error, ws.completed_at::text AS completed_at
       FROM ${s}.workflow_status ws
       LEFT JOIN ${s}.workflow_output wo ON wo.workflow_uuid = ws.workflow_uuid
      WHERE ws.status = 'ERROR' AND ${appScope('ws.application_name', '$1')}
        AND ($3::bigint IS NULL OR ws.completed_at >= $3::bigint)
        AND ws.parent_workflow_id IS NULL AND NOT ws.was_forked_from
        AND COALESCE(wo.error, ws.error) ~ ${DIVERGENCE_PREFILTER}
        AND NOT EXISTS (SELECT 1 FROM ${a}.dead_letters d WHERE d.workflow_id = ws.workflow_uuid AND d.published_at IS NOT NULL)
        AND NOT (ws.forked_from IS NOT NULL AND ws.workflow_uuid ~ ${FRESH_CHILD_ID})
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
    if (divergence)
      out.push({ workflowId: r.workflow_uuid, divergence, completedAt: r.completed_at === null ? null : Number(r.completed_at) });
  }
  return out;
}

export interface UnledgeredFork {
  workflowId: string;
  /** What it was forked from (its `forked_from`). */
  source: string;
  root: string;
  n: number;
  /** First checkpoint not copied from the source (copies keep the source's name and timestamps). */
  fromStep: number;
  applicationVersion: string | undefined;
  /** A fresh child the fork awaits (`<fork>-child-<step>`, itself a fork), when it started one. */
  childForkId: string | undefined;
  /** The source's error (code 26 by the prefilter; parseDivergence decides). */
  sourceError: string | null;
}

/**
 * Forks with afterlife's deterministic IDs that the ledger lacks: made by the app's getResultWithAutoFork
 * (which has only a DBOSClient), or by an afterlife process that died between fork and ledger before the
 * ledger row went first. Found from the `forked_from` chains of `workflowIds` and of forks created since
 * `createdSince` (epoch ms, database clock; at most `limit` of those): root and n come from the chain,
 * exactly as lineageOf (packages/executor/src/repair/primitives/lineage.ts) derives them, and a fork is ours only if its ID is `<root>-fork-<n>` and
 * its source diverged. Chains are a handful of primary-key hops; forks are rare next to workflows, so
 * DBOS's partial index on forked_from keeps the recent scan short.
 */
export async function findUnledgeredForks(
  db: Db,
  applicationName: string,
  o: { workflowIds: string[]; createdSince?: number | undefined; limit: number },
): Promise<UnledgeredFork[]> {
  const s = ident(db.dbosSchema);
  const a = ident(db.afterlifeSchema);
  // Params: $1 application name, $2 workflow IDs, $3 created since (epoch ms) or NULL, $4 limit of recent forks.
  const res = await db.query<{
    workflow_id: string;
    source: string;
    root: string;
    n: number;
    from_step: number;
    application_version: string | null;
    child_fork_id: string | null;
    source_error: string | null;
  }>(
    `${chainsSql(s, a)}${forkRowsSql(s, a)}`,
    [applicationName, o.workflowIds, o.createdSince ?? null, o.limit],
    'dbos.findUnledgeredForks',
  );
  return res.rows.map((r) => ({
    workflowId: r.workflow_id,
    source: r.source,
    root: r.root,
    n: r.n,
    fromStep: r.from_step,
    applicationVersion: r.application_version ?? undefined,
    childForkId: r.child_fork_id ?? undefined,
    sourceError: r.source_error,
  }));
}

/**
 * The chain walk of findUnledgeredForks: its seeds (the given workflows, plus forks created since that the
 * ledger lacks), each seed's `forked_from` chain upwards, the root it reaches and every fork on the way with
 * its number in the lineage. Params: $1 application name, $2 workflow IDs, $3 created since or NULL, $4 limit.
 */
function chainsSql(s: string, a: string): string {
  return `WITH RECURSIVE
     seeds(id) AS (
       SELECT x FROM unnest($2::text[]) AS x
       UNION
       (SELECT ws.workflow_uuid FROM ${s}.workflow_status ws
         WHERE $3::bigint IS NOT NULL AND ws.forked_from IS NOT NULL AND ws.created_at >= $3::bigint
           AND ${appScope('ws.application_name', '$1')}
           AND NOT EXISTS (SELECT 1 FROM ${a}.forks f WHERE f.new_workflow_id = ws.workflow_uuid)
         ORDER BY ws.created_at LIMIT $4)
     ),
     -- Each seed's chain upwards; hops are bounded in case a chain ever loops.
     chain(seed, id, forked_from, hops) AS (
       SELECT seeds.id, ws.workflow_uuid, ws.forked_from, 0
         FROM seeds JOIN ${s}.workflow_status ws ON ws.workflow_uuid = seeds.id
       UNION ALL
       SELECT c.seed, ws.workflow_uuid, ws.forked_from, c.hops + 1
         FROM chain c JOIN ${s}.workflow_status ws ON ws.workflow_uuid = c.forked_from
        WHERE c.hops < 100
     ),
     -- The root is the top of the chain, or what its top was forked from if that row is gone (as lineageOf).
     top AS (
       SELECT DISTINCT ON (seed) seed,
              CASE WHEN forked_from IS NULL THEN id ELSE forked_from END AS root,
              hops + (forked_from IS NOT NULL)::int AS len
         FROM chain ORDER BY seed, hops DESC
     ),
     member AS (
       SELECT DISTINCT c.id, c.forked_from AS source, t.root, t.len - c.hops AS n
         FROM chain c JOIN top t USING (seed)
        WHERE c.forked_from IS NOT NULL
     )
`;
}

/**
 * The rows of findUnledgeredForks from the chain walk's members: the forks with afterlife's deterministic ID
 * whose source diverged and that the ledger lacks, each with the step it was forked from (the first step
 * whose copied checkpoint differs from the source's) and the fresh child fork it started, if any.
 */
function forkRowsSql(s: string, a: string): string {
  return `     SELECT m.id AS workflow_id, m.source, m.root, m.n, ws.application_version,
            COALESCE(so.error, src.error) AS source_error,
            COALESCE(
              (SELECT min(fo.function_id) FROM ${s}.operation_outputs fo
                 LEFT JOIN ${s}.operation_outputs o ON o.workflow_uuid = m.source AND o.function_id = fo.function_id
                WHERE fo.workflow_uuid = m.id
                  AND (o.workflow_uuid IS NULL OR o.function_name <> fo.function_name
                       OR o.started_at_epoch_ms IS DISTINCT FROM fo.started_at_epoch_ms
                       OR o.completed_at_epoch_ms IS DISTINCT FROM fo.completed_at_epoch_ms)),
              (SELECT max(fo.function_id) + 1 FROM ${s}.operation_outputs fo WHERE fo.workflow_uuid = m.id),
              0) AS from_step,
            (SELECT fo.child_workflow_id FROM ${s}.operation_outputs fo
               JOIN ${s}.workflow_status c ON c.workflow_uuid = fo.child_workflow_id AND c.forked_from IS NOT NULL
              WHERE fo.workflow_uuid = m.id AND starts_with(fo.child_workflow_id, m.id || '-child-')
              ORDER BY fo.function_id LIMIT 1) AS child_fork_id
       FROM member m
       JOIN ${s}.workflow_status ws ON ws.workflow_uuid = m.id
       JOIN ${s}.workflow_status src ON src.workflow_uuid = m.source
       LEFT JOIN ${s}.workflow_output so ON so.workflow_uuid = m.source
      WHERE m.id = m.root || '-fork-' || m.n
        AND ${appScope('ws.application_name', '$1')}
        AND src.status = 'ERROR' AND COALESCE(so.error, src.error) ~ ${DIVERGENCE_PREFILTER}
        AND NOT EXISTS (SELECT 1 FROM ${a}.forks f WHERE f.new_workflow_id = m.id)
      ORDER BY m.root, m.n`;
}
