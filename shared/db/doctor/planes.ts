import { type Db, ident, REAPER_LEASE_PREFIX } from '../../../packages/executor/src/plane/index.js';

/**
 * The applications the planes in this database guard: each reaper leaves its lease row `reaper:<app>` with
 * the last tick it completed (database clock). A row whose plane stopped stays; its age says so.
 */
export interface GuardedApplication {
  applicationName: string;
  /** Milliseconds since the last completed tick; null when the lease was taken but no tick completed. */
  sinceTickMs: number | null;
  lastTickAt: Date | null;
}

export async function guardedApplications(db: Db): Promise<GuardedApplication[]> {
  const res = await db.query<{ app: string; since_ms: string | null; last_tick_at: Date | null }>(
    `SELECT substr(name, length($1) + 1) AS app, last_tick_at,
            (EXTRACT(EPOCH FROM now() - last_tick_at) * 1000)::bigint::text AS since_ms
       FROM ${ident(db.afterlifeSchema)}.leases WHERE starts_with(name, $1) ORDER BY 1`,
    [REAPER_LEASE_PREFIX],
    'doctor.guardedApplications',
  );
  return res.rows.map((r) => ({
    applicationName: r.app,
    sinceTickMs: r.since_ms === null ? null : Number(r.since_ms),
    lastTickAt: r.last_tick_at,
  }));
}
