import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/** The stuck-workflow report (migration 0003): one row per workflow, refreshed on every detection. */
const table = (db: Db) => `${ident(db.afterlifeSchema)}.stuck_workflows`;

export interface StuckReport {
  workflowId: string;
  executorId: string;
  applicationVersion: string | null;
  name: string | null;
  lastActivityMs: number;
}

export async function reportStuck(db: Db, applicationName: string, rows: StuckReport[]): Promise<void> {
  if (rows.length === 0) return;
  await db.query(
    `INSERT INTO ${table(db)} AS s (application_name, workflow_uuid, executor_id, application_version, workflow_name, last_activity_ms, action)
     SELECT $1, r.id, r.executor, r.version, r.name, r.last, 'reported'
       FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[]) AS r(id, executor, version, name, last)
     ON CONFLICT (application_name, workflow_uuid) DO UPDATE
        SET executor_id = EXCLUDED.executor_id, application_version = EXCLUDED.application_version,
            last_activity_ms = EXCLUDED.last_activity_ms, last_detected_at = now()`,
    [
      applicationName,
      rows.map((r) => r.workflowId),
      rows.map((r) => r.executorId),
      rows.map((r) => r.applicationVersion),
      rows.map((r) => r.name),
      rows.map((r) => r.lastActivityMs),
    ],
    'stuck.report',
  );
}

export async function markStuckAction(
  db: Db,
  applicationName: string,
  workflowId: string,
  action: 'cancelled' | 'forked' | 'rewound',
  forkedTo?: string,
): Promise<void> {
  await db.query(
    `UPDATE ${table(db)} SET action = $3, action_at = now(), forked_to = COALESCE($4, forked_to)
      WHERE application_name = $1 AND workflow_uuid = $2`,
    [applicationName, workflowId, action, forkedTo ?? null],
    'stuck.action',
  );
}

/**
 * Workflows the reaper cancelled as stuck but never forked: the process died (or the fork failed) between
 * the cancel and the fork. Only the reaper's cancel writes 'cancelled', in the same statement, with the
 * `completed_at` it set; a workflow whose CANCELLED carries another `completed_at` was resumed and
 * cancelled again by someone else, and is not ours to fork. A row is retried once per `minAgeMs` (its
 * `action_at` is the last attempt) for `maxAgeMs` after the cancel; a dead-lettered workflow is done.
 */
export async function cancelledNotForked(
  db: Db,
  applicationName: string,
  o: { minAgeMs: number; maxAgeMs: number; limit: number },
): Promise<string[]> {
  const res = await db.query<{ workflow_uuid: string }>(
    `SELECT s.workflow_uuid FROM ${table(db)} s
       JOIN ${ident(db.dbosSchema)}.workflow_status w
         ON w.workflow_uuid = s.workflow_uuid AND w.status = 'CANCELLED' AND w.completed_at = s.cancelled_at_ms
      WHERE s.application_name = $1 AND s.action = 'cancelled'
        AND s.action_at < now() - make_interval(secs => $2::double precision / 1000)
        AND s.cancelled_at_ms > (EXTRACT(EPOCH FROM now()) * 1000)::bigint - $3::bigint
        AND NOT EXISTS (SELECT 1 FROM ${ident(db.afterlifeSchema)}.dead_letters d WHERE d.workflow_id = s.workflow_uuid)
      ORDER BY s.action_at LIMIT $4`,
    [applicationName, o.minAgeMs, o.maxAgeMs, o.limit],
    'stuck.cancelledNotForked',
  );
  return res.rows.map((r) => r.workflow_uuid);
}

/** A retry of a leftover that made no fork: it waits its turn again (oldest attempts go first). */
export async function touchStuckAttempt(db: Db, applicationName: string, workflowId: string): Promise<void> {
  await db.query(
    `UPDATE ${table(db)} SET action_at = now() WHERE application_name = $1 AND workflow_uuid = $2 AND action = 'cancelled'`,
    [applicationName, workflowId],
    'stuck.touchAttempt',
  );
}
