import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/** An application with live kits in this database and no plane ticking for it. */
export interface UnguardedApplication {
  applicationName: string;
  /** Live kits registered under it. */
  kits: number;
  /** Up to five of their executor IDs, for the line that names them. */
  executorIds: string[];
}

/**
 * Applications whose kits are registered live here (state alive or draining, and either holding their
 * liveness lock now or registered within `seenWithinMs`) while no reaper's lease for that application
 * recorded a tick within `tickWithinMs`: nothing would recover their deaths. `except`: the caller's own
 * application (a plane does not report what it guards). `leasePrefix` + name is the reaper's lease name.
 * `registeredForMs`: only applications whose first live kit registered at least this long ago (a plane that
 * is starting for it has had time to tick).
 */
export async function unguardedApplications(
  db: Db,
  o: { except: string | undefined; tickWithinMs: number; seenWithinMs: number; leasePrefix: string; registeredForMs?: number },
): Promise<UnguardedApplication[]> {
  const s = ident(db.afterlifeSchema);
  const res = await db.query<{ application_name: string; kits: number; ids: string[] }>(
    `SELECT x.application_name, count(*)::int AS kits, (array_agg(x.executor_id ORDER BY x.executor_id))[1:5] AS ids
       FROM ${s}.executors x
      WHERE x.state IN ('alive', 'draining')
        AND ($1::text IS NULL OR x.application_name <> $1)
        AND (x.last_seen_at > now() - make_interval(secs => $3::double precision / 1000)
             OR EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.pid = x.liveness_pid))
        AND NOT EXISTS (SELECT 1 FROM ${s}.leases g
                         WHERE g.name = $4 || x.application_name
                           AND g.last_tick_at > now() - make_interval(secs => $2::double precision / 1000))
      GROUP BY x.application_name
     HAVING min(x.state_changed_at) <= now() - make_interval(secs => $5::double precision / 1000)
      ORDER BY x.application_name
      LIMIT 20`,
    [o.except ?? null, o.tickWithinMs, o.seenWithinMs, o.leasePrefix, o.registeredForMs ?? 0],
    'executors.unguarded',
  );
  return res.rows.map((r) => ({ applicationName: r.application_name, kits: r.kits, executorIds: r.ids }));
}
