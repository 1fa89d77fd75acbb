import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/** A kit of the application that refused to attach (migration 0016), not since replaced by a live one. */
export interface KitRefusal {
  executorId: string;
  reason: string;
  detail: string;
  refusedAt: string;
}

/**
 * Refusals of the last day whose executor ID has not registered a live process since (one that attached
 * after its configuration was fixed clears it). At most 20, newest first.
 */
export async function recentKitRefusals(db: Db, applicationName: string): Promise<KitRefusal[]> {
  const s = ident(db.afterlifeSchema);
  const res = await db.query<{ executor_id: string; reason: string; detail: string; refused_at: Date }>(
    `SELECT r.executor_id, r.reason, r.detail, r.refused_at
       FROM ${s}.kit_refusals r
      WHERE r.application_name = $1 AND r.refused_at > now() - interval '24 hours'
        AND NOT EXISTS (SELECT 1 FROM ${s}.executors x
                         WHERE x.application_name = r.application_name AND x.executor_id = r.executor_id
                           AND x.state IN ('alive', 'draining') AND x.state_changed_at > r.refused_at)
      ORDER BY r.refused_at DESC
      LIMIT 20`,
    [applicationName],
    'doctor.kitRefusals',
  );
  return res.rows.map((r) => ({ executorId: r.executor_id, reason: r.reason, detail: r.detail, refusedAt: r.refused_at.toISOString() }));
}
