import { ident } from './pool.js';

/**
 * The liveness lock's identity, computed by Postgres on both sides (the kit taking it, the reaper and the
 * recovery looking for it in pg_locks), so the two can never disagree on a hash.
 *
 * Key: one bigint, a 64-bit hash (hashtextextended) of the application name and the executor ID, the
 * application name length-prefixed so no two (app, executor) pairs spell the same text. Two executors
 * colliding is a 1-in-2^64 event per pair (the 32-bit `hashtext` pair of kits before migration 0011 gave 5
 * colliding pairs in 300k random IDs, e.g. `exec-9863923cd615` / `exec-39cac52d2c3c`, and a twin's lock hid
 * a death for the twin's whole life). pg_locks lists a bigint key as objsubid = 1, high half in classid, low
 * half in objid.
 *
 * Holder: anyone who can connect can take any advisory lock, so the lock counts as held only by the session
 * the kit registered in `executors.liveness_pid` (written by that session in the statement that takes the
 * lock). Held by any other backend — a squatter, a stale session of an earlier incarnation — it is reported
 * (`squatted`) and read as free: a stranger can no longer make a dead executor look alive. Kits from before
 * incarnations (registry `incarnation` NULL) still hold the two-int4 `hashtext` lock and are read as before.
 */
export const LIVENESS_KEY_SQL = {
  /** bigint expression over an application name and an executor ID (SQL expressions). */
  key: (app: string, executor: string) =>
    `hashtextextended('afterlife-liveness:' || length(${app}) || ':' || ${app} || ':' || ${executor}, 0)`,
};

/** The two-int4 key of kits from before migration 0011 (registry `incarnation` NULL). */
export const LEGACY_LIVENESS_KEY_SQL = {
  app: (param: string) => `hashtext('afterlife-liveness:' || ${param})`,
  executor: (param: string) => `hashtext(${param})`,
};

const THIS_DB = `(SELECT oid FROM pg_database WHERE datname = current_database())`;

/** pg_locks rows (alias `l`) of the lock of (app, executor): every holder, the kit or not. */
function lockOf(app: string, executor: string): string {
  const k = LIVENESS_KEY_SQL.key(app, executor);
  return `l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.database = ${THIS_DB}
          AND l.classid = ((${k} >> 32) & 4294967295)::oid AND l.objid = (${k} & 4294967295)::oid`;
}

/**
 * Whether the liveness lock of (app, executor) is held by the kit's own registered session: the subquery
 * the reaper's read and the recovery's re-check share. `app` and `executor` are SQL expressions.
 */
export function livenessHeldSql(afterlifeSchema: string, app: string, executor: string): string {
  const x = `${ident(afterlifeSchema)}.executors`;
  return `(EXISTS (SELECT 1 FROM ${x} x JOIN pg_locks l ON l.pid = x.liveness_pid
                    WHERE x.application_name = ${app} AND x.executor_id = ${executor} AND ${lockOf(app, executor)})
           OR EXISTS (SELECT 1 FROM ${x} x JOIN pg_locks l ON true
                       WHERE x.application_name = ${app} AND x.executor_id = ${executor} AND x.incarnation IS NULL
                         AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.database = ${THIS_DB}
                         AND l.classid = (${LEGACY_LIVENESS_KEY_SQL.app(app)})::oid AND l.objid = (${LEGACY_LIVENESS_KEY_SQL.executor(executor)})::oid))`;
}

/**
 * The kit's statement: try the lock and, if it is ours now, record this session as its holder for this
 * incarnation (one round trip, so the registry never names a session that does not hold it). $1 app, $2
 * executor, $3 incarnation (NULL: an unregistered caller, recorded nowhere).
 */
export function takeLivenessSql(afterlifeSchema: string): string {
  return `WITH l AS (SELECT pg_try_advisory_lock(${LIVENESS_KEY_SQL.key('$1::text', '$2::text')}) AS ok),
               r AS (UPDATE ${ident(afterlifeSchema)}.executors SET liveness_pid = pg_backend_pid()
                      WHERE application_name = $1 AND executor_id = $2 AND incarnation = $3::text AND (SELECT ok FROM l)
                      RETURNING 1)
          SELECT (SELECT ok FROM l) AS ok, EXISTS (SELECT 1 FROM r) AS recorded`;
}
