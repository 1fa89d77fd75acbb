import { ident } from './identifier.js';

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
 * lock), and only while that pid is still that session: a pid is reused once its backend ends, so the
 * backend's role and start time must match what the kit recorded too (sameHolderSql). Held by any other backend — a squatter, a stale session of an earlier incarnation — it is reported
 * (`squatted`) and read as free: a stranger cannot make a dead executor look alive. Kits that record no
 * incarnation (registry `incarnation` NULL) hold the two-int4 `hashtext` lock, and are read by it.
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

/**
 * Every backend's pid, role and start (pg_stat_activity's pid, usesysid, backend_start, with the same
 * visibility: the start is NULL for another role's session unless the reader has pg_read_all_stats) through
 * the per-backend accessors, which build three values a backend instead of pg_stat_activity's whole row:
 * 0.26 ms against 1.8 ms over 1,000 backends (PostgreSQL 15, this project's micro-measurement).
 */
export const BACKENDS_SQL = `SELECT pg_stat_get_backend_pid(b) AS pid, pg_stat_get_backend_userid(b) AS usesysid,
        pg_stat_get_backend_start(b) AS backend_start FROM pg_stat_get_backend_idset() b`;

const THIS_DB = `(SELECT oid FROM pg_database WHERE datname = current_database())`;

/** pg_locks rows (alias `l`) of the lock of (app, executor): every holder, the kit or not. */
function lockOf(app: string, executor: string): string {
  const k = LIVENESS_KEY_SQL.key(app, executor);
  return `l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.database = ${THIS_DB}
          AND l.classid = ((${k} >> 32) & 4294967295)::oid AND l.objid = (${k} & 4294967295)::oid`;
}

/** Every backend holding the liveness lock of (app, executor), as an int[] expression (doctor: who holds it). */
export function livenessHoldersSql(app: string, executor: string): string {
  return `ARRAY(SELECT l.pid FROM pg_locks l WHERE ${lockOf(app, executor)} ORDER BY l.pid)`;
}

/**
 * Whether the backend `pid` (an SQL expression) is still the session the registry row `x` recorded: its
 * role (pg_stat_activity's usesysid, which every role may read) and, where the reader may see it, its start
 * time. A login with no grants whose backend got the dead kit's pid has another role; the kit's own role
 * reusing the pid has another start time (visible to the reaper, which holds pg_read_all_stats). NULLs are
 * kits from before migration 0014, read by pid alone. pg_stat_get_activity(pid) reads that one backend.
 */
export function sameHolderSql(
  pid: string,
  x: string,
  o: { recorded?: { usesysid: string; backendStart: string }; joined?: string } = {},
): string {
  const r = o.recorded ?? { usesysid: 'liveness_usesysid', backendStart: 'liveness_backend_start' };
  const u = `${x}.${r.usesysid}`;
  const b = `${x}.${r.backendStart}`;
  // `joined`: the alias of a (pid, usesysid, backend_start) row the caller already joined on the pid, so the
  // test is a filter on that row (statements over many holders: a hash join instead of a scan per lock).
  if (o.joined) {
    const a = o.joined;
    // COALESCE: an unknown comparison is "not the same", as the EXISTS below finds no row for it.
    return `COALESCE((${u} IS NULL OR ${a}.usesysid = ${u}) AND (${b} IS NULL OR ${a}.backend_start IS NULL OR ${a}.backend_start = ${b}), false)`;
  }
  return `EXISTS (SELECT 1 FROM pg_stat_get_activity(${pid}) a WHERE (${u} IS NULL OR a.usesysid = ${u})
                     AND (${b} IS NULL OR a.backend_start IS NULL OR a.backend_start = ${b}))`;
}

/**
 * Whether the liveness lock of (app, executor) is held by the kit's own registered session: the subquery
 * the reaper's read and the recovery's re-check share. `app` and `executor` are SQL expressions.
 */
export function livenessHeldSql(afterlifeSchema: string, app: string, executor: string): string {
  const x = `${ident(afterlifeSchema)}.executors`;
  return `(EXISTS (SELECT 1 FROM ${x} x JOIN pg_locks l ON l.pid = x.liveness_pid
                    WHERE x.application_name = ${app} AND x.executor_id = ${executor} AND ${lockOf(app, executor)}
                      AND ${sameHolderSql('l.pid', 'x')})
           OR EXISTS (SELECT 1 FROM ${x} x JOIN pg_locks l ON true
                       WHERE x.application_name = ${app} AND x.executor_id = ${executor} AND x.incarnation IS NULL
                         AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.database = ${THIS_DB}
                         AND l.classid = (${LEGACY_LIVENESS_KEY_SQL.app(app)})::oid AND l.objid = (${LEGACY_LIVENESS_KEY_SQL.executor(executor)})::oid))`;
}

/**
 * The kit's statement: try the lock and, if it is ours now, record this session as its holder for this
 * incarnation, with its role and start time (one round trip, so the registry never names a session that does not hold it). $1 app, $2
 * executor, $3 incarnation (NULL: an unregistered caller, recorded nowhere).
 */
export function takeLivenessSql(afterlifeSchema: string): string {
  return `WITH l AS (SELECT pg_try_advisory_lock(${LIVENESS_KEY_SQL.key('$1::text', '$2::text')}) AS ok),
               me AS (SELECT usesysid, backend_start FROM pg_stat_get_activity(pg_backend_pid())),
               r AS (UPDATE ${ident(afterlifeSchema)}.executors
                        SET liveness_pid = pg_backend_pid(), liveness_usesysid = (SELECT usesysid FROM me),
                            liveness_backend_start = (SELECT backend_start FROM me)
                      WHERE application_name = $1 AND executor_id = $2 AND incarnation = $3::text AND (SELECT ok FROM l)
                      RETURNING 1)
          SELECT (SELECT ok FROM l) AS ok, EXISTS (SELECT 1 FROM r) AS recorded`;
}
