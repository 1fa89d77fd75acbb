import type { Db } from '../pool.js';
import { drainChannel } from '../../contract/fenceChannel.js';
import { ident } from '../../contract/identifier.js';

/** Planned-drain requests: written by the drain function, polled by the executor kit on each beat. */
export type DrainTarget = { executorIds: string[] } | { applicationVersion: string };

export interface DrainRequest {
  id: number;
  budgetMs: number;
  requestedAt: Date;
}

const table = (db: Db) => `${ident(db.afterlifeSchema)}.drain_requests`;

/**
 * One row per executor, or one row for the version; returns the new request IDs. The same statement
 * announces them on the drain channel (delivered at commit; the payload names only the application, so it
 * stays far below NOTIFY's 8,000 bytes whatever the request), so live kits ask at once.
 */
export async function insertDrainRequests(
  db: Db,
  r: { applicationName: string; target: DrainTarget; budgetMs: number; requestedBy: string },
): Promise<number[]> {
  const executorIds = 'executorIds' in r.target ? r.target.executorIds : [null];
  const version = 'applicationVersion' in r.target ? r.target.applicationVersion : null;
  const res = await db.query<{ id: string }>(
    `WITH ins AS (
       INSERT INTO ${table(db)} (application_name, executor_id, application_version, budget_ms, requested_by)
       SELECT $1, e, $3, $4, $5 FROM unnest($2::text[]) AS e
       RETURNING id
     ), hint AS (
       SELECT pg_notify($6, json_build_object('applicationName', $1::text)::text) WHERE EXISTS (SELECT 1 FROM ins)
     )
     SELECT ins.id::text AS id FROM ins LEFT JOIN hint ON true`,
    [r.applicationName, executorIds, version, r.budgetMs, r.requestedBy, drainChannel(db.afterlifeSchema)],
    'drainRequests.insert',
  );
  return res.rows.map((x) => Number(x.id));
}

/**
 * A version request also drains instances of that version that start later (scaled up mid-deploy), but only
 * for its budget plus this long: after that, a rollback to the same version must not drain on start.
 */
export const VERSION_REQUEST_SLACK_MS = 15 * 60_000;

/** The earliest drain request addressed to this executor, or to its version and still in force, if any. */
export async function findDrainRequest(
  db: Db,
  e: { applicationName: string; executorId: string; applicationVersion: string },
): Promise<DrainRequest | undefined> {
  const res = await db.query<{ id: string; budget_ms: number; requested_at: Date }>(
    `SELECT id::text, budget_ms, requested_at FROM ${table(db)}
      WHERE application_name = $1
        AND (executor_id = $2
             OR (application_version = $3 AND requested_at > now() - make_interval(secs => (budget_ms + $4) / 1000.0)))
      ORDER BY requested_at, id LIMIT 1`,
    [e.applicationName, e.executorId, e.applicationVersion, VERSION_REQUEST_SLACK_MS],
    'drainRequests.find',
  );
  const row = res.rows[0];
  return row ? { id: Number(row.id), budgetMs: row.budget_ms, requestedAt: row.requested_at } : undefined;
}
