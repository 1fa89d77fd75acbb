import { type Db, ident } from '../db/pool.js';
import { LEGACY_LIVENESS_KEY_SQL, LIVENESS_KEY_SQL } from './key.js';

/**
 * The reaper's one statement a tick about liveness locks: which of the candidates hold theirs (the kit's own
 * registered session, shared/liveness/key.ts), whose lock is held by something else instead, and how long
 * the server has been up. pg_locks shows every session's locks to any role (unlike pg_stat_activity, it needs
 * no pg_read_all_stats). A server that restarted a moment ago has dropped every session at once, so right
 * after a start a free lock says nothing yet: `upMs` lets the caller wait for the kits to take theirs again.
 */
export interface LivenessReading {
  held: Set<string>;
  /** Locks held by a backend that is not the kit's registered session: reported, and read as free. */
  squatted: Set<string>;
  /** Milliseconds since the postmaster started (database clock). */
  upMs: number;
}

export async function readLiveness(db: Db, applicationName: string, executorIds: string[]): Promise<LivenessReading> {
  // pg_locks is read once and joined, not scanned per executor: per-executor EXISTS with the holder check
  // took ~70 ms for 200 executors, the joins ~9 ms against ~4.5 ms for "any holder" without the check
  // (test/integration/executor/liveness.test.ts prints it).
  const k = LIVENESS_KEY_SQL.key('$1::text', 'id');
  const res = await db.query<{ held: string[] | null; squatted: string[] | null; up_ms: string }>(
    `WITH l AS MATERIALIZED (
       SELECT objsubid, classid, objid, pid FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
     ),
     e AS MATERIALIZED (
       SELECT e0.id, ((${k} >> 32) & 4294967295)::oid AS hi, (${k} & 4294967295)::oid AS lo,
              (${LEGACY_LIVENESS_KEY_SQL.app('$1::text')})::oid AS legacy_app, (${LEGACY_LIVENESS_KEY_SQL.executor('e0.id')})::oid AS legacy_exec,
              x.liveness_pid, x.executor_id IS NOT NULL AND x.incarnation IS NULL AS legacy
         FROM unnest($2::text[]) AS e0(id)
         LEFT JOIN ${ident(db.afterlifeSchema)}.executors x ON x.application_name = $1 AND x.executor_id = e0.id
     )
     SELECT ARRAY(SELECT e.id FROM e JOIN l ON l.objsubid = 1 AND l.classid = e.hi AND l.objid = e.lo AND l.pid = e.liveness_pid
                  UNION
                  SELECT e.id FROM e JOIN l ON l.objsubid = 2 AND l.classid = e.legacy_app AND l.objid = e.legacy_exec WHERE e.legacy) AS held,
            ARRAY(SELECT DISTINCT e.id FROM e JOIN l ON l.objsubid = 1 AND l.classid = e.hi AND l.objid = e.lo
                   WHERE l.pid IS DISTINCT FROM e.liveness_pid) AS squatted,
            (EXTRACT(EPOCH FROM now() - pg_postmaster_start_time()) * 1000)::bigint::text AS up_ms`,
    [applicationName, executorIds],
    'liveness.read',
  );
  const row = res.rows[0];
  return { held: new Set(row?.held ?? []), squatted: new Set(row?.squatted ?? []), upMs: Number(row?.up_ms ?? 0) };
}
