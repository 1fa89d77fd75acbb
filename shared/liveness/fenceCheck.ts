import { z } from 'zod';
import { ident } from '../db/pool.js';

/**
 * Whether this process has been given up on, asked of the plane's own records (never of a NOTIFY, which
 * anyone who can connect may send):
 *   superseded  the registry names a newer incarnation of this executor ID: another process started with
 *               the ID, and DBOS's launch-time recovery hands it this process's work;
 *   dead        the registry says this incarnation is dead (the reaper, a notice or an operator said so);
 *   moved       a recovery has moved any of its workflows since the kit started (a recovery whose heartbeat
 *               re-check stopped it midway leaves the executor registered alive, yet those rows run elsewhere).
 * Any of them: this process must stop before it runs another step body beside the replacement. Returned as a
 * query for the kit's own connection; `incarnation` undefined (a caller that never registered) skips
 * `superseded`.
 */
export function fenceCheckQuery(
  afterlifeSchema: string,
  e: { applicationName: string; executorId: string; since: Date; incarnation?: string | undefined },
): { text: string; values: unknown[] } {
  const s = ident(afterlifeSchema);
  return {
    text: `SELECT CASE
              WHEN $4::text IS NOT NULL AND x.incarnation IS NOT NULL AND x.incarnation <> $4
                THEN json_build_object('verdict', 'superseded', 'incarnation', x.incarnation, 'at', x.state_changed_at)
              WHEN x.state = 'dead'
                THEN json_build_object('verdict', 'dead', 'reason', x.reason, 'detectedBy', x.detected_by, 'at', x.state_changed_at)
              WHEN m.recovered_by IS NOT NULL
                THEN json_build_object('verdict', 'moved', 'reason', m.reason, 'detectedBy', m.recovered_by, 'at', m.started_at, 'moved', m.moved)
            END AS fence
       FROM (SELECT 1) AS one
       LEFT JOIN ${s}.executors x ON x.application_name = $1 AND x.executor_id = $2
       LEFT JOIN LATERAL (
         SELECT r.reason, r.recovered_by, r.started_at, sum(cardinality(b.workflow_ids))::int AS moved
           FROM ${s}.recoveries r JOIN ${s}.recovery_batches b ON b.recovery_id = r.id
          WHERE r.application_name = $1 AND r.executor_id = $2 AND r.started_at >= $3 AND cardinality(b.workflow_ids) > 0
          GROUP BY r.id ORDER BY r.started_at LIMIT 1
       ) m ON true`,
    values: [e.applicationName, e.executorId, e.since, e.incarnation ?? null],
  };
}

export type FenceVerdict = 'dead' | 'moved' | 'superseded';

export const Fence = z.object({
  verdict: z.enum(['dead', 'moved', 'superseded']),
  reason: z.string().nullish(),
  detectedBy: z.string().nullish(),
  incarnation: z.string().nullish(),
  at: z.string().nullish(),
  moved: z.number().int().nullish(),
});
export type Fence = z.infer<typeof Fence>;
