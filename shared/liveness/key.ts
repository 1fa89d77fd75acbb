/**
 * The liveness lock's identity, computed by Postgres on both sides (the kit taking it, the reaper looking
 * for it in pg_locks), so the two can never disagree on a hash. It is the two-int4 form of the advisory
 * lock: pg_locks lists it with objsubid = 2, a key space apart from the single-bigint locks DBOS and
 * afterlife's migrations use. The first half names the application, the second the executor.
 *
 * Two executors of one app whose IDs hash alike share a lock: the dead one then reads as alive (held) for
 * as long as its twin lives, and is judged by the heartbeat rule only once the twin is gone too. That is a
 * slower detection, never a false death; at 1,000 executors the odds are about 1 in 10,000.
 */
export const LIVENESS_KEY_SQL = {
  /** int4 expressions over an application name and an executor ID parameter. */
  app: (param: string) => `hashtext('afterlife-liveness:' || ${param})`,
  executor: (param: string) => `hashtext(${param})`,
};

/**
 * Whether the liveness lock of (app, executor) is held by any session of this database: the subquery the
 * reaper's read and the recovery's re-check share. `app` and `executor` are SQL expressions.
 */
export function livenessHeldSql(app: string, executor: string): string {
  return `EXISTS (SELECT 1 FROM pg_locks l
                   WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                     AND l.classid = (${LIVENESS_KEY_SQL.app(app)})::oid AND l.objid = (${LIVENESS_KEY_SQL.executor(executor)})::oid)`;
}

/** The channel on which a declaration of death is announced, so the executor (if alive after all) fences itself. */
export function fenceChannel(afterlifeSchema: string): string {
  return `${afterlifeSchema}_fence`.slice(0, 63);
}
