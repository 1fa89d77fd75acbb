import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/**
 * The local stack's reads about which applications to keep guarding (scripts/stack/guardAll.ts). Deployed
 * planes never call these: a deployed plane guards one application, named by its configuration.
 */

/**
 * Of `names`, those with no alive or draining kit and no registry change within `idleMs`, and those with no
 * registry row at all any more: nothing left there for their plane to declare dead.
 */
export async function idleApplications(db: Db, names: string[], idleMs: number): Promise<string[]> {
  const s = ident(db.afterlifeSchema);
  const res = await db.query<{ name: string }>(
    `SELECT n.name
       FROM unnest($1::text[]) AS n(name)
      WHERE NOT EXISTS (SELECT 1 FROM ${s}.executors x
                         WHERE x.application_name = n.name
                           AND (x.state IN ('alive', 'draining')
                                OR x.state_changed_at > now() - make_interval(secs => $2::double precision / 1000)))`,
    [names, idleMs],
    'executors.local_idle',
  );
  return res.rows.map((r) => r.name);
}

/**
 * DBOS sessions in this database (`dbos_transact_<executorID>…`, as shared/dbos/reaper.ts sessionPrefix
 * reads them) connected at least `olderThanMs` with no kit of that executor in the registry, at most 20. A
 * kit that drained counts (its process exits, or stays on idle, by design), and so does one declared dead in
 * the last minute (its sessions end with it). Only the sessions this role can see in pg_stat_activity.
 */
export async function kitlessDbosSessions(db: Db, olderThanMs: number): Promise<string[]> {
  const s = ident(db.afterlifeSchema);
  const res = await db.query<{ session: string }>(
    `SELECT DISTINCT a.application_name AS session
       FROM pg_stat_activity a
      WHERE a.datname = current_database()
        AND a.application_name LIKE 'dbos\\_transact\\_%'
        AND a.backend_start < now() - make_interval(secs => $1::double precision / 1000)
        AND NOT EXISTS (SELECT 1 FROM ${s}.executors x
                         WHERE (x.state <> 'dead' OR x.state_changed_at > now() - interval '60 seconds')
                           AND starts_with(a.application_name, left('dbos_transact_' || x.executor_id, 63)))
      ORDER BY 1
      LIMIT 20`,
    [olderThanMs],
    'executors.local_kitless',
  );
  return res.rows.map((r) => r.session);
}
