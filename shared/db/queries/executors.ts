import type { Db } from '../pool.js';
import { ident } from '../pool.js';
import { fenceChannel } from '../../liveness/key.js';

/** afterlife's executor registry. DBOS has no executor table; this is ours. */
export type ExecutorState = 'alive' | 'draining' | 'drained' | 'dead';

export interface ExecutorRow {
  application_name: string;
  executor_id: string;
  application_version: string | null;
  state: ExecutorState;
  started_at: Date | null;
  last_seen_at: Date;
  state_changed_at: Date;
  reason: string | null;
  detected_by: string | null;
  heartbeats: boolean;
  /** Whether its kit holds a liveness lock (migration 0008): only then is a free lock evidence. */
  liveness: boolean;
}

const table = (db: Db) => `${ident(db.afterlifeSchema)}.executors`;

/** Registers or refreshes a live executor. A dead executor never comes back to life under the same ID. */
export async function registerAlive(
  db: Db,
  e: { applicationName: string; executorId: string; applicationVersion: string; startedAt: Date; heartbeats: boolean; liveness?: boolean },
): Promise<void> {
  await db.query(
    `INSERT INTO ${table(db)} AS x (application_name, executor_id, application_version, state, started_at, last_seen_at, heartbeats, liveness)
     VALUES ($1, $2, $3, 'alive', $4, now(), $5, $6)
     ON CONFLICT (application_name, executor_id) DO UPDATE
        SET application_version = EXCLUDED.application_version, last_seen_at = now(),
            started_at = COALESCE(x.started_at, EXCLUDED.started_at), heartbeats = EXCLUDED.heartbeats,
            liveness = EXCLUDED.liveness
      WHERE x.state <> 'dead'`,
    [e.applicationName, e.executorId, e.applicationVersion, e.startedAt, e.heartbeats, e.liveness ?? false],
    'executors.registerAlive',
  );
}

/**
 * Moves an executor to a new state; `dead` is final, and a state change keeps its first reason. A move to
 * `dead` is announced on the fence channel in the same statement (delivered at commit), so an executor that
 * is in fact still running hears it on its liveness connection and exits before it runs another step.
 */
export async function setState(
  db: Db,
  e: { applicationName: string; executorId: string; state: ExecutorState; reason?: string; detectedBy?: string; applicationVersion?: string },
): Promise<void> {
  await db.query(
    `WITH up AS (
       INSERT INTO ${table(db)} AS x (application_name, executor_id, application_version, state, reason, detected_by)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (application_name, executor_id) DO UPDATE
          SET state = EXCLUDED.state,
              state_changed_at = CASE WHEN x.state = EXCLUDED.state THEN x.state_changed_at ELSE now() END,
              reason = CASE WHEN x.state = EXCLUDED.state THEN COALESCE(x.reason, EXCLUDED.reason) ELSE EXCLUDED.reason END,
              detected_by = CASE WHEN x.state = EXCLUDED.state THEN COALESCE(x.detected_by, EXCLUDED.detected_by) ELSE EXCLUDED.detected_by END,
              application_version = COALESCE(x.application_version, EXCLUDED.application_version),
              last_seen_at = CASE WHEN EXCLUDED.state = 'dead' THEN x.last_seen_at ELSE now() END
        WHERE x.state <> 'dead' OR EXCLUDED.state = 'dead'
       RETURNING x.state
     )
     SELECT pg_notify($7, json_build_object('applicationName', $1::text, 'executorId', $2::text)::text)
       FROM up WHERE up.state = 'dead'`,
    [e.applicationName, e.executorId, e.applicationVersion ?? null, e.state, e.reason ?? null, e.detectedBy ?? null, fenceChannel(db.afterlifeSchema)],
    'executors.setState',
  );
}

export async function listExecutors(db: Db, applicationName: string, states?: ExecutorState[]): Promise<ExecutorRow[]> {
  const res = await db.query<ExecutorRow>(
    `SELECT * FROM ${table(db)} WHERE application_name = $1 AND ($2::text[] IS NULL OR state = ANY($2))
      ORDER BY executor_id`,
    [applicationName, states ?? null],
    'executors.list',
  );
  return res.rows;
}

/** Registry rows of the given executors, or of every executor of a version. */
export async function findExecutors(
  db: Db,
  applicationName: string,
  target: { executorIds: string[] } | { applicationVersion: string },
): Promise<ExecutorRow[]> {
  const byIds = 'executorIds' in target;
  const res = await db.query<ExecutorRow>(
    `SELECT * FROM ${table(db)} WHERE application_name = $1
        AND ${byIds ? 'executor_id = ANY($2::text[])' : 'application_version = $2'}
      ORDER BY executor_id`,
    [applicationName, byIds ? target.executorIds : target.applicationVersion],
    'executors.find',
  );
  return res.rows;
}
