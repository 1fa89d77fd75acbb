import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/**
 * Redis's identity as the reaper sees it each tick (INFO server: run_id, uptime), kept in Postgres
 * (migration 0014): whether Redis lost its keys is decided from what only the server can say,
 * never from a key any client with the Redis URL can write. One statement a tick:
 *
 * - first sighting: Redis has kept its keys since it started (now − uptime);
 * - another run_id: restarted or failed over, its keys kept since its start;
 * - the same run_id and the reaper's sentinel missing (`flushed`): flushed (or the sentinel deleted), kept
 *   since now. A deleter can only make every absence "not yet evidence", which the reaper's fallback bounds.
 */
export interface RedisObservation {
  runId: string;
  uptimeMs: number;
  flushed: boolean;
}

export interface RedisWitness {
  /** How long this Redis is known to have kept its keys. */
  keptKeysMs: number;
  /** What changed this tick: nothing, a first sighting, another run_id, or a flush. */
  change: 'none' | 'first' | 'restarted' | 'flushed';
}

export async function observeRedis(db: Db, applicationName: string, o: RedisObservation): Promise<RedisWitness> {
  const t = `${ident(db.afterlifeSchema)}.redis_witness`;
  const res = await db.query<{ prev: string | null; kept_ms: string; changed: boolean }>(
    `WITH prev AS (SELECT run_id, keys_since FROM ${t} WHERE application_name = $1),
          up AS (
            INSERT INTO ${t} AS w (application_name, run_id, keys_since, seen_at)
            VALUES ($1, $2, now() - make_interval(secs => $3::double precision / 1000), now())
            ON CONFLICT (application_name) DO UPDATE
               SET run_id = EXCLUDED.run_id, seen_at = now(),
                   keys_since = CASE WHEN w.run_id <> EXCLUDED.run_id THEN EXCLUDED.keys_since
                                     WHEN $4::boolean THEN now() ELSE w.keys_since END
            RETURNING keys_since)
     SELECT (SELECT run_id FROM prev) AS prev,
            (EXTRACT(EPOCH FROM now() - (SELECT keys_since FROM up)) * 1000)::bigint::text AS kept_ms`,
    [applicationName, o.runId, o.uptimeMs, o.flushed],
    'redisWitness.observe',
  );
  const row = res.rows[0];
  const prev = row?.prev ?? null;
  const change = prev === null ? 'first' : prev !== o.runId ? 'restarted' : o.flushed ? 'flushed' : 'none';
  return { keptKeysMs: Math.max(0, Number(row?.kept_ms ?? 0)), change };
}
