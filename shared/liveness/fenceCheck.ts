import { ident } from '../db/pool.js';

/**
 * Whether this executor has been given up on: the registry says `dead`, or a recovery has moved any of its
 * workflows since the kit started (a recovery whose heartbeat re-check stopped it midway leaves the
 * executor registered alive, yet those rows now run elsewhere). Either way this process must stop before it
 * runs another step body beside the replacement. Returned as a query for the kit's own connection.
 */
export function fenceCheckQuery(
  afterlifeSchema: string,
  e: { applicationName: string; executorId: string; since: Date },
): { text: string; values: unknown[] } {
  const s = ident(afterlifeSchema);
  return {
    text: `SELECT CASE
              WHEN EXISTS (SELECT 1 FROM ${s}.executors WHERE application_name = $1 AND executor_id = $2 AND state = 'dead') THEN 'dead'
              WHEN EXISTS (SELECT 1 FROM ${s}.recoveries r JOIN ${s}.recovery_batches b ON b.recovery_id = r.id
                            WHERE r.application_name = $1 AND r.executor_id = $2 AND r.started_at >= $3
                              AND cardinality(b.workflow_ids) > 0) THEN 'moved'
            END AS verdict`,
    values: [e.applicationName, e.executorId, e.since],
  };
}

export type FenceVerdict = 'dead' | 'moved';
