import { ident } from '../contract/identifier.js';
import { livenessHeldSql } from '../contract/livenessKey.js';
import { appScope, NOW_MS } from './sql.js';
import type { Db } from '../db/pool.js';

// The statements of the kit's superseded sweep (packages/executor/src/runtime/superseded.ts): which PENDING rows under this
// executor ID are not this process's, and their re-enqueue, which re-checks everything that was decided on.

/** A PENDING row under the executor's ID as one observation saw it. */
export interface PendingUnderId {
  workflowId: string;
  /** DBOS's ownership token (5.2+): which execution claimed or started it. */
  ownerXid: string | null;
  applicationVersion: string | null;
}

export interface PendingReading {
  rows: PendingUnderId[];
  /** The database clock when they were read (epoch ms). */
  nowMs: number;
}

/** At most this many rows a reading: a superseded process leaves what it ran, not a backlog. */
export const SWEEP_READ_LIMIT = 1_000;

/**
 * The PENDING rows under (app, executor) that may be the superseded process's: direct starts (no claim
 * time) and claims made no later than `claimedBy` (the database clock once this process held the ID's lock:
 * after that, only this process can claim under the ID). Oldest first, bounded.
 */
export async function readPendingUnderId(
  db: Db,
  e: { applicationName: string; executorId: string; claimedByMs: number | undefined },
): Promise<PendingReading> {
  const res = await db.query<{ workflow_uuid: string; owner_xid: string | null; application_version: string | null; now_ms: string }>(
    `SELECT w.workflow_uuid, w.owner_xid, w.application_version, ${NOW_MS}::text AS now_ms
       FROM (SELECT 1) AS one
       LEFT JOIN LATERAL (
         SELECT workflow_uuid, owner_xid, application_version FROM ${ident(db.dbosSchema)}.workflow_status
          WHERE status = 'PENDING' AND executor_id = $2 AND ${appScope('application_name', '$1')}
            AND ($3::bigint IS NULL OR started_at_epoch_ms IS NULL OR started_at_epoch_ms <= $3::bigint)
          ORDER BY created_at LIMIT ${SWEEP_READ_LIMIT}
       ) w ON true`,
    [e.applicationName, e.executorId, e.claimedByMs ?? null],
    'superseded.read',
  );
  return {
    rows: res.rows
      .filter((r) => r.workflow_uuid !== null)
      .map((r) => ({ workflowId: r.workflow_uuid, ownerXid: r.owner_xid, applicationVersion: r.application_version })),
    nowMs: Number(res.rows[0]?.now_ms ?? Date.now()),
  };
}

/**
 * DBOS's own recovery statement (system_database.ts, reenqueueWorkflowsForRecovery) for the given rows,
 * re-checking in its WHERE clause the whole premise the sweep decided on:
 *   - each row is still PENDING under this executor ID, in this application's scope, with the version and
 *     the ownership token the sweep saw twice (so no claim, by anyone, landed since: DBOS's owner check is
 *     what a claim changes, and a row this process claimed meanwhile is left alone);
 *   - it was claimed no later than `claimedBy`, or started directly;
 *   - the registry still names this incarnation, alive, with a superseded one recorded, and this
 *     incarnation's registered session holds the ID's liveness lock — so the superseded process's lease is
 *     gone (the lock is one; its session no longer has it).
 * Running it twice, or after a claim, moves nothing. Returns the IDs it moved.
 */
export async function reenqueueSuperseded(
  db: Db,
  e: { applicationName: string; executorId: string; incarnation: string; claimedByMs: number; rows: PendingUnderId[] },
): Promise<string[]> {
  if (e.rows.length === 0) return [];
  const res = await db.query<{ workflow_uuid: string }>(
    `WITH seen AS (SELECT * FROM unnest($4::text[], $5::text[], $6::text[]) AS s(id, owner, version))
     UPDATE ${ident(db.dbosSchema)}.workflow_status w
        SET started_at_epoch_ms = NULL, status = 'ENQUEUED', owner_xid = NULL,
            updated_at = ${NOW_MS}, queue_name = COALESCE(w.queue_name, '_dbos_internal_queue')
       FROM seen s
      WHERE w.workflow_uuid = s.id AND w.status = 'PENDING' AND w.executor_id = $2 AND ${appScope('w.application_name', '$1')}
        AND w.owner_xid IS NOT DISTINCT FROM s.owner AND w.application_version IS NOT DISTINCT FROM s.version
        AND (w.started_at_epoch_ms IS NULL OR w.started_at_epoch_ms <= $7::bigint)
        AND EXISTS (SELECT 1 FROM ${ident(db.afterlifeSchema)}.executors x
                     WHERE x.application_name = $1 AND x.executor_id = $2 AND x.incarnation = $3
                       AND x.state = 'alive' AND x.superseded_incarnation IS NOT NULL)
        AND ${livenessHeldSql(db.afterlifeSchema, '$1::text', '$2::text')}
      RETURNING w.workflow_uuid`,
    [
      e.applicationName,
      e.executorId,
      e.incarnation,
      e.rows.map((r) => r.workflowId),
      e.rows.map((r) => r.ownerXid),
      e.rows.map((r) => r.applicationVersion),
      e.claimedByMs,
    ],
    'superseded.reenqueue',
  );
  return res.rows.map((r) => r.workflow_uuid);
}

/** The sweep found nothing left of the superseded process: the registry's record of it is cleared. */
export async function clearSuperseded(db: Db, e: { applicationName: string; executorId: string; incarnation: string }): Promise<void> {
  await db.query(
    `UPDATE ${ident(db.afterlifeSchema)}.executors
        SET superseded_incarnation = NULL, superseded_pid = NULL, superseded_backend_start = NULL, superseded_at = NULL
      WHERE application_name = $1 AND executor_id = $2 AND incarnation = $3`,
    [e.applicationName, e.executorId, e.incarnation],
    'superseded.clear',
  );
}
