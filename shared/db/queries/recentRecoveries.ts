import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/**
 * The latest recovery audit rows of an application, newest first (for `afterlife-plane status`). The ORDER BY
 * names the table's bigint column: a bare `id` would be the text `id::text` of the select list.
 */
export interface RecoveryAuditRow {
  id: number;
  executorId: string;
  reason: string;
  detectedBy: string;
  lockMode: 'locked' | 'degraded';
  outcome: 'completed' | 'partial' | 'failed' | null;
  reenqueued: number;
  startedAt: Date;
  durationMs: number | null;
}

export async function recentRecoveries(db: Db, applicationName: string, limit = 10): Promise<RecoveryAuditRow[]> {
  const res = await db.query<{
    id: string;
    executor_id: string;
    reason: string;
    detected_by: string;
    lock_mode: 'locked' | 'degraded';
    outcome: RecoveryAuditRow['outcome'];
    reenqueued: number;
    started_at: Date;
    duration_ms: string | null;
  }>(
    `SELECT id::text, executor_id, reason, detected_by, lock_mode, outcome, reenqueued, started_at,
            (EXTRACT(EPOCH FROM finished_at - started_at) * 1000)::bigint::text AS duration_ms
       FROM ${ident(db.afterlifeSchema)}.recoveries WHERE application_name = $1 ORDER BY recoveries.id DESC LIMIT $2`,
    [applicationName, limit],
    'recoveries.recent',
  );
  return res.rows.map((r) => ({
    id: Number(r.id),
    executorId: r.executor_id,
    reason: r.reason,
    detectedBy: r.detected_by,
    lockMode: r.lock_mode,
    outcome: r.outcome,
    reenqueued: r.reenqueued,
    startedAt: r.started_at,
    durationMs: r.duration_ms === null ? null : Number(r.duration_ms),
  }));
}
