import { type Db, ident, livenessHoldersSql } from '../../../packages/executor/src/plane/index.js';

/**
 * What the server says about each live kit's liveness session: the backend the kit registered as its lock
 * holder (`executors.liveness_pid`), who really holds the lock, that backend's application_name, user and
 * silence (pg_stat_activity; the silence needs pg_read_all_stats or the same role), and how many kits'
 * liveness locks that one backend holds. Behind a transaction-mode pooler the backend is a pooled server
 * session: another client's application_name, several kits' locks, a lease the kit never set.
 */
export interface LivenessSession {
  executorId: string;
  incarnation: string;
  pid: number | null;
  holders: number[];
  sessionExists: boolean;
  sessionName: string | null;
  user: string | null;
  /** null when pg_stat_activity hides it from this role. */
  silentMs: number | null;
  /** Liveness locks of registered kits (any application) held by this backend. */
  kitLocksOnBackend: number;
}

export async function livenessSessions(db: Db, applicationName: string): Promise<LivenessSession[]> {
  const x = `${ident(db.afterlifeSchema)}.executors`;
  const res = await db.query<{
    executor_id: string;
    incarnation: string;
    pid: number | null;
    holders: number[];
    session_exists: boolean;
    session_name: string | null;
    usename: string | null;
    silent_ms: string | null;
    kit_locks: number;
  }>(
    `SELECT e.executor_id, e.incarnation, e.liveness_pid AS pid, ${livenessHoldersSql('e.application_name', 'e.executor_id')} AS holders,
            a.pid IS NOT NULL AS session_exists, a.application_name AS session_name, a.usename::text AS usename,
            CASE WHEN a.state = 'idle' THEN (EXTRACT(EPOCH FROM now() - a.state_change) * 1000)::bigint::text END AS silent_ms,
            (SELECT count(*) FROM ${x} o WHERE o.liveness_pid = e.liveness_pid
                AND e.liveness_pid = ANY(${livenessHoldersSql('o.application_name', 'o.executor_id')}))::int AS kit_locks
       FROM ${x} e LEFT JOIN pg_stat_activity a ON a.pid = e.liveness_pid
      WHERE e.application_name = $1 AND e.state IN ('alive', 'draining') AND e.liveness AND e.incarnation IS NOT NULL
      ORDER BY e.executor_id`,
    [applicationName],
    'doctor.livenessSessions',
  );
  return res.rows.map((r) => ({
    executorId: r.executor_id,
    incarnation: r.incarnation,
    pid: r.pid,
    holders: r.holders,
    sessionExists: r.session_exists,
    sessionName: r.session_name,
    user: r.usename,
    silentMs: r.silent_ms === null ? null : Number(r.silent_ms),
    kitLocksOnBackend: r.kit_locks,
  }));
}
