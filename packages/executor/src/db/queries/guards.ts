import { ident } from '../../contract/identifier.js';
import { REAPER_LEASE_PREFIX } from '../../contract/guard.js';
import type { Db } from '../pool.js';

/** A plane's reaper lease in this database: the application it guards and how long ago it last ticked. */
export interface PlaneTick {
  applicationName: string;
  /** Milliseconds since its last completed tick, on the database clock. */
  sinceTickMs: number;
}

/**
 * Every reaper lease that ever recorded a tick, the most recent first (contract/guard.ts says what they
 * mean): one small read of a table with a row per application, for the kit's `watched` and the plane's
 * reports alike. Capped: a database shared by more applications than this is named in part.
 */
export async function planeTicks(db: Db, limit = 20): Promise<PlaneTick[]> {
  const res = await db.query<{ app: string; since_ms: string }>(
    `SELECT substr(name, length($1::text) + 1) AS app,
            greatest(0, (EXTRACT(EPOCH FROM now() - last_tick_at) * 1000)::bigint)::text AS since_ms
       FROM ${ident(db.afterlifeSchema)}.leases
      WHERE starts_with(name, $1::text) AND last_tick_at IS NOT NULL
      ORDER BY last_tick_at DESC
      LIMIT $2`,
    [REAPER_LEASE_PREFIX, limit],
    'guards.planeTicks',
  );
  return res.rows.map((r) => ({ applicationName: r.app, sinceTickMs: Number(r.since_ms) }));
}
