import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/**
 * Redis's identity as the plane last read it (migration 0014): its run_id, when that reading was and
 * how long ago on the server's clock (doctor's own clock may be skewed from it).
 */
export async function readRedisWitness(
  db: Db,
  applicationName: string,
): Promise<{ runId: string; seenAt: Date; sinceMs: number } | undefined> {
  const res = await db.query<{ run_id: string; seen_at: Date; since_ms: string }>(
    `SELECT run_id, seen_at, GREATEST(0, EXTRACT(EPOCH FROM now() - seen_at) * 1000)::bigint::text AS since_ms
       FROM ${ident(db.afterlifeSchema)}.redis_witness WHERE application_name = $1`,
    [applicationName],
    'doctor.redisWitness',
  );
  const r = res.rows[0];
  return r ? { runId: r.run_id, seenAt: r.seen_at, sinceMs: Number(r.since_ms) } : undefined;
}
