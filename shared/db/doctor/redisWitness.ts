import type { Db } from '../../../packages/executor/src/db/pool.js';
import { ident } from '../../../packages/executor/src/contract/identifier.js';

/** Redis's identity as the plane last saw it (migration 0014, issue 30): its run_id and since when it kept its keys. */
export async function readRedisWitness(db: Db, applicationName: string): Promise<{ runId: string; seenAt: Date } | undefined> {
  const res = await db.query<{ run_id: string; seen_at: Date }>(
    `SELECT run_id, seen_at FROM ${ident(db.afterlifeSchema)}.redis_witness WHERE application_name = $1`,
    [applicationName],
    'doctor.redisWitness',
  );
  const r = res.rows[0];
  return r ? { runId: r.run_id, seenAt: r.seen_at } : undefined;
}
