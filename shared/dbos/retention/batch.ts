import { appScope, type Db, ident, NOW_MS } from '../../../packages/executor/src/plane/index.js';
import { literal, lockBoundedStatement, QUERY_CANCELED, retentionQuery } from '../../db/retentionSql.js';
import { COMPLETED, held } from './predicates.js';

/**
 * One retention batch, in two statements: a lock-free read picks the next candidates in (completed_at,
 * workflow_uuid) order after the round's watermark, and one conditional statement deletes those that
 * still qualify — every DBOS table's rows of them, atomically.
 *
 * What DBOS's own deleteWorkflows (5.2.11 and 5.3.0, system_database.js) removes, and how: it deletes
 * from workflow_input, workflow_output and operation_outputs by workflow_uuid explicitly ("the payload
 * tables carry no foreign key"), then from workflow_status, whose ON DELETE CASCADE foreign keys take
 * notifications (by destination_uuid), workflow_events, workflow_events_history and streams. This
 * statement does the same, in one statement instead of one transaction of four.
 */

/** The threshold a pass applies: workflows that completed before `cutoff` (epoch ms) may go. */
export interface Thresholds {
  /** The completed_at of the RETENTION_MAX_COMPLETED-th newest completed workflow (read once per pass). */
  rowsCutoffMs: number | undefined;
  /** RETENTION_MAX_AGE_MS: applied against the database clock inside each statement. */
  maxAgeMs: number | undefined;
}

export interface Candidate {
  workflowId: string;
  completedAt: number;
}

/**
 * The completed_at of the `keep`-th newest completed workflow of this app, or undefined when it has no
 * more than `keep`: everything that completed before it is beyond the rows threshold. Read once per
 * pass, never inside a batch: it walks `keep` entries of DBOS's idx_workflow_status_completed_at (about
 * 100 ms per million), which a batch holding row locks must not. Stale by one pass it only errs towards
 * keeping: completions since make the true cutoff later, never earlier (a resumed workflow aside, whose
 * completed_at DBOS clears).
 */
export async function rowsCutoff(db: Db, applicationName: string, keep: number): Promise<number | undefined> {
  const s = ident(db.dbosSchema);
  const r = await retentionQuery<{ completed_at: string }>(
    db,
    `SELECT ws.completed_at::text AS completed_at FROM ${s}.workflow_status ws
      WHERE ws.completed_at IS NOT NULL AND ws.status IN ${COMPLETED} AND ${appScope('ws.application_name', '$1')}
      ORDER BY ws.completed_at DESC
      OFFSET $2 LIMIT 1`,
    [applicationName, keep - 1],
    'retention.rowsCutoff',
  );
  const v = r.rows[0]?.completed_at;
  return v === undefined ? undefined : Number(v);
}

/** `completed_at` is before the pass's cutoff: the later of the rows cutoff and now − max age (GREATEST skips NULLs). */
const beforeCutoff = (rowsParam: string, ageParam: string) =>
  `ws.completed_at < GREATEST(${rowsParam}::bigint, ${NOW_MS} - ${ageParam}::bigint)`;

/**
 * The next `limit` workflows past the watermark that qualify now (lock-free; the dry run lists these).
 * The `>=` bound is the index range's start: without it the keyset OR is only a filter, and every read
 * walks the index from the oldest entry through the ones this round already deleted (dead until vacuum).
 * Held rows are skipped here as well, so the watermark moves past them and a batch is never full of rows
 * that stay.
 */
export async function readCandidates(
  db: Db,
  applicationName: string,
  t: Thresholds,
  after: { completedAt: number; workflowId: string } | undefined,
  limit: number,
): Promise<Candidate[]> {
  const s = ident(db.dbosSchema);
  const a = ident(db.afterlifeSchema);
  const r = await retentionQuery<{ workflow_uuid: string; completed_at: string }>(
    db,
    `SELECT ws.workflow_uuid, ws.completed_at::text AS completed_at FROM ${s}.workflow_status ws
      WHERE ws.completed_at IS NOT NULL AND ${beforeCutoff('$2', '$3')}
        AND ws.completed_at >= COALESCE($4::bigint, -9223372036854775808)
        AND ($4::bigint IS NULL OR ws.completed_at > $4::bigint OR (ws.completed_at = $4::bigint AND ws.workflow_uuid > $5::text))
        AND ws.status IN ${COMPLETED} AND ${appScope('ws.application_name', '$1')}
        AND NOT ${held(s, a)}
      ORDER BY ws.completed_at, ws.workflow_uuid
      LIMIT $6`,
    [applicationName, t.rowsCutoffMs ?? null, t.maxAgeMs ?? null, after?.completedAt ?? null, after?.workflowId ?? null, limit],
    'retention.readCandidates',
  );
  return r.rows.map((x) => ({ workflowId: x.workflow_uuid, completedAt: Number(x.completed_at) }));
}

export interface Deleted {
  workflows: number;
  steps: number;
  inputs: number;
  outputs: number;
  /** The IDs deleted (the tests' and the dry run's evidence; a batch is at most a few thousand). */
  workflowIds: string[];
  /** How long the statement held its row locks at most (sent → committed, as seen from here), ms. */
  heldMs: number;
  /** The statement ran into its lock bound and was cancelled: nothing was deleted, its locks are gone. */
  overBound: boolean;
}

/**
 * Deletes those of `ids` that still qualify, judged by this statement alone: status still completed,
 * still before the cutoff (the age threshold on the database clock now), no relative unsettled, not a
 * repair's. A workflow resumed or rewound since the read is no longer completed; one whose row another
 * statement holds locked (an executor's transition, a concurrent pass's delete) is skipped (SKIP LOCKED)
 * and looked at again by a later round — so two passes at once delete each workflow once, and a batch
 * never waits on live work. Row locks are held for this statement only, at most `boundMs` of server time
 * (lockBoundedStatement); past that it is cancelled and reports `overBound` (undefined: no bound).
 */
export async function deleteBatch(
  db: Db,
  applicationName: string,
  t: Thresholds,
  ids: string[],
  boundMs: number | undefined,
): Promise<Deleted> {
  const s = ident(db.dbosSchema);
  const a = ident(db.afterlifeSchema);
  const app = literal(applicationName);
  const text = `WITH victims AS (
       SELECT ws.workflow_uuid FROM ${s}.workflow_status ws
        WHERE ws.workflow_uuid = ANY(${literal(ids)})
          AND ws.status IN ${COMPLETED} AND ${appScope('ws.application_name', app)}
          AND ws.completed_at IS NOT NULL AND ${beforeCutoff(literal(t.rowsCutoffMs), literal(t.maxAgeMs))}
          AND NOT ${held(s, a)}
        FOR UPDATE OF ws SKIP LOCKED
     ),
     gone AS (
       DELETE FROM ${s}.workflow_status ws USING victims v WHERE ws.workflow_uuid = v.workflow_uuid RETURNING ws.workflow_uuid
     ),
     steps AS (DELETE FROM ${s}.operation_outputs t USING gone g WHERE t.workflow_uuid = g.workflow_uuid RETURNING 1),
     inputs AS (DELETE FROM ${s}.workflow_input t USING gone g WHERE t.workflow_uuid = g.workflow_uuid RETURNING 1),
     outputs AS (DELETE FROM ${s}.workflow_output t USING gone g WHERE t.workflow_uuid = g.workflow_uuid RETURNING 1)
     SELECT (SELECT array_agg(workflow_uuid) FROM gone) AS ids,
            (SELECT count(*) FROM steps)::int AS steps,
            (SELECT count(*) FROM inputs)::int AS inputs,
            (SELECT count(*) FROM outputs)::int AS outputs`;
  const t0 = performance.now();
  try {
    const r = await lockBoundedStatement<{ ids: string[] | null; steps: number; inputs: number; outputs: number }>(
      db,
      text,
      'retention.deleteBatch',
      boundMs,
    );
    const row = r.rows[0];
    const workflowIds = row?.ids ?? [];
    return {
      workflows: workflowIds.length,
      steps: row?.steps ?? 0,
      inputs: row?.inputs ?? 0,
      outputs: row?.outputs ?? 0,
      workflowIds,
      heldMs: r.heldMs,
      overBound: false,
    };
  } catch (err) {
    if ((err as { code?: unknown }).code !== QUERY_CANCELED) throw err;
    const heldMs = Math.round((performance.now() - t0) * 100) / 100;
    return { workflows: 0, steps: 0, inputs: 0, outputs: 0, workflowIds: [], heldMs, overBound: true };
  }
}
