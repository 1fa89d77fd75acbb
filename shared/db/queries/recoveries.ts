import type { Db } from '../../../packages/executor/src/db/pool.js';
import { ident } from '../../../packages/executor/src/contract/identifier.js';

/** The recovery audit: one row per attempt, finished with its outcome and counts. */
export async function startRecovery(
  db: Db,
  r: {
    applicationName: string;
    executorId: string;
    reason: string;
    detectedBy: string;
    messageId: string | undefined;
    recoveredBy: string;
    lockMode: 'locked' | 'degraded';
    incarnation?: string | undefined;
  },
): Promise<number> {
  const res = await db.query<{ id: string }>(
    `INSERT INTO ${ident(db.afterlifeSchema)}.recoveries
       (application_name, executor_id, reason, detected_by, message_id, recovered_by, lock_mode, incarnation)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id::text`,
    [r.applicationName, r.executorId, r.reason, r.detectedBy, r.messageId ?? null, r.recoveredBy, r.lockMode, r.incarnation ?? null],
    'recoveries.start',
  );
  return Number(res.rows[0]?.id);
}

export async function finishRecovery(
  db: Db,
  id: number,
  r: {
    outcome: 'completed' | 'partial' | 'failed';
    reenqueued: number;
    batches: number;
    versions: Record<string, number>;
    versionsWithoutExecutor: string[];
    error?: string;
  },
): Promise<void> {
  await db.query(
    `UPDATE ${ident(db.afterlifeSchema)}.recoveries
        SET finished_at = now(), outcome = $2, reenqueued = $3, batches = $4, versions = $5,
            versions_without_executor = $6, error = $7
      WHERE id = $1`,
    [id, r.outcome, r.reenqueued, r.batches, JSON.stringify(r.versions), r.versionsWithoutExecutor, r.error ?? null],
    'recoveries.finish',
  );
}
