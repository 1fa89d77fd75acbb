import type { Db } from '../db/pool.js';
import { livenessHeldSql } from './key.js';

/**
 * The reaper's one statement a tick about liveness locks: which of the candidates hold theirs, and how long
 * the server has been up. pg_locks shows every session's locks to any role (unlike pg_stat_activity, it needs
 * no pg_read_all_stats). A server that restarted a moment ago has dropped every session at once, so right
 * after a start a free lock says nothing yet: `upMs` lets the caller wait for the kits to take theirs again.
 */
export interface LivenessReading {
  held: Set<string>;
  /** Milliseconds since the postmaster started (database clock). */
  upMs: number;
}

export async function readLiveness(db: Db, applicationName: string, executorIds: string[]): Promise<LivenessReading> {
  const res = await db.query<{ held: string[] | null; up_ms: string }>(
    `SELECT (SELECT array_agg(e.id) FROM unnest($2::text[]) AS e(id) WHERE ${livenessHeldSql('$1::text', 'e.id')}) AS held,
            (EXTRACT(EPOCH FROM now() - pg_postmaster_start_time()) * 1000)::bigint::text AS up_ms`,
    [applicationName, executorIds],
    'liveness.read',
  );
  const row = res.rows[0];
  return { held: new Set(row?.held ?? []), upMs: Number(row?.up_ms ?? 0) };
}
