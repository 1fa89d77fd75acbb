import type { Db } from '../pool.js';
import { ident } from '../pool.js';

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
  action: 'cancelled' | 'forked',
  forkedTo?: string,
): Promise<void> {
  await db.query(
    `UPDATE ${table(db)} SET action = $3, action_at = now(), forked_to = COALESCE($4, forked_to)
      WHERE application_name = $1 AND workflow_uuid = $2`,
    [applicationName, workflowId, action, forkedTo ?? null],
    'stuck.action',
  );
}
