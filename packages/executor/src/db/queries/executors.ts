import type { Db } from '../pool.js';
import { ident } from '../../contract/identifier.js';
import { fenceChannel } from '../../contract/fenceChannel.js';

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
  /** The process start this row describes (migration 0010); null for kits from before it. */
  incarnation: string | null;
  /** The backend holding its liveness lock for this incarnation (migration 0011). */
  liveness_pid: number | null;
}

const table = (db: Db) => `${ident(db.afterlifeSchema)}.executors`;

/**
 * Registers a live incarnation of an executor. A new incarnation (another process start with this ID) takes
 * the row over whatever its state — alive, drained or dead all describe an earlier process — unless the row
 * names a later-started one (an old process whose first registration failed and is retried must not take
 * the ID back from its successor). The reaper's streaks about the ID (absences, a recent declaration) are
 * cleared by its first tick that sees the new process alive (recordPresent), so the kit writes only the registry.
 * Without an incarnation (kits from before migration 0010) a dead executor never comes back under its ID.
 *
 * Taking the row from an incarnation the registry still says is alive or draining records it as superseded
 * (migration 0014's columns: its incarnation and liveness holder, and when): that process was live a moment
 * ago, and whatever PENDING work it claimed after this process's DBOS launch recovery is left under the
 * shared ID when it stops (the kit's superseded sweep, executor/superseded.ts, moves it). A
 * takeover of a dead or drained incarnation clears the record: nothing of that one is live to claim more.
 * Such a takeover is announced on the fence channel (delivered at commit), a hint for the superseded process
 * to ask its fence question now rather than at its next periodic one (LIVENESS_FENCE_EVERY_MS).
 */
export interface Registration {
  /** Whether this incarnation now holds the row. */
  ours: boolean;
  /** The incarnation this one took the row from while it was live (null: none, or not ours). */
  superseded: string | null;
  /** That incarnation's liveness session as the registry last recorded it (null: none recorded). */
  supersededSession: { pid: number; backendStart: string } | null;
}

export async function registerAlive(
  db: Db,
  e: {
    applicationName: string;
    executorId: string;
    applicationVersion: string;
    startedAt: Date;
    heartbeats: boolean;
    liveness?: boolean;
    incarnation?: string;
  },
): Promise<Registration> {
  const res = await db.query<{
    ours: boolean;
    superseded: string | null;
    superseded_pid: number | null;
    superseded_backend_start: string | null;
  }>(
    `WITH up AS (
       INSERT INTO ${table(db)} AS x (application_name, executor_id, application_version, state, started_at, last_seen_at, heartbeats, liveness, incarnation)
       VALUES ($1, $2, $3, 'alive', $4, now(), $5, $6, $7)
       ON CONFLICT (application_name, executor_id) DO UPDATE
          SET application_version = EXCLUDED.application_version, last_seen_at = now(), heartbeats = EXCLUDED.heartbeats,
              liveness = EXCLUDED.liveness,
              started_at = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN EXCLUDED.started_at ELSE COALESCE(x.started_at, EXCLUDED.started_at) END,
              state = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN 'alive' ELSE x.state END,
              state_changed_at = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN now() ELSE x.state_changed_at END,
              reason = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN NULL ELSE x.reason END,
              detected_by = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN NULL ELSE x.detected_by END,
              liveness_pid = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN NULL ELSE x.liveness_pid END,
              liveness_usesysid = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN NULL ELSE x.liveness_usesysid END,
              liveness_backend_start = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN NULL ELSE x.liveness_backend_start END,
              superseded_incarnation = CASE WHEN x.incarnation IS NOT DISTINCT FROM EXCLUDED.incarnation THEN x.superseded_incarnation
                                            WHEN x.incarnation IS NOT NULL AND x.state IN ('alive', 'draining') THEN x.incarnation END,
              superseded_pid = CASE WHEN x.incarnation IS NOT DISTINCT FROM EXCLUDED.incarnation THEN x.superseded_pid
                                    WHEN x.incarnation IS NOT NULL AND x.state IN ('alive', 'draining') THEN x.liveness_pid END,
              superseded_backend_start = CASE WHEN x.incarnation IS NOT DISTINCT FROM EXCLUDED.incarnation THEN x.superseded_backend_start
                                              WHEN x.incarnation IS NOT NULL AND x.state IN ('alive', 'draining') THEN x.liveness_backend_start END,
              superseded_at = CASE WHEN x.incarnation IS NOT DISTINCT FROM EXCLUDED.incarnation THEN x.superseded_at
                                   WHEN x.incarnation IS NOT NULL AND x.state IN ('alive', 'draining') THEN now() END,
              incarnation = EXCLUDED.incarnation
        WHERE CASE WHEN EXCLUDED.incarnation IS NULL OR x.incarnation IS NOT DISTINCT FROM EXCLUDED.incarnation THEN x.state <> 'dead'
                   ELSE x.started_at IS NULL OR x.started_at <= EXCLUDED.started_at END
       RETURNING x.superseded_incarnation, x.superseded_pid, x.superseded_backend_start
     )
     SELECT EXISTS (SELECT 1 FROM up) AS ours, (SELECT superseded_incarnation FROM up) AS superseded,
            (SELECT superseded_pid FROM up) AS superseded_pid, (SELECT superseded_backend_start::text FROM up) AS superseded_backend_start,
            -- The superseded process asks its fence question at once instead of at its next periodic one.
            (SELECT count(pg_notify($8, json_build_object('applicationName', $1::text, 'executorId', $2::text, 'incarnation', $7::text)::text))
               FROM up WHERE up.superseded_incarnation IS NOT NULL) AS hinted`,
    [
      e.applicationName,
      e.executorId,
      e.applicationVersion,
      e.startedAt,
      e.heartbeats,
      e.liveness ?? false,
      e.incarnation ?? null,
      fenceChannel(db.afterlifeSchema),
    ],
    'executors.registerAlive',
  );
  const row = res.rows[0];
  const ours = row?.ours === true;
  const superseded = ours ? (row.superseded ?? null) : null;
  const session =
    superseded !== null && row?.superseded_pid != null && row.superseded_backend_start != null
      ? { pid: row.superseded_pid, backendStart: row.superseded_backend_start }
      : null;
  return { ours, superseded, supersededSession: session };
}

/**
 * Whether a server session (pid and backend start) is still there: false once it ended (or its pid went to
 * another backend), undefined when this role may not see it (another role's backend start is hidden).
 */
export async function sessionPresent(db: Db, session: { pid: number; backendStart: string }): Promise<boolean | undefined> {
  const r = await db.query<{ started: string | null }>(
    `SELECT a.backend_start::text AS started FROM pg_stat_get_activity($1::int) a`,
    [session.pid],
    'executors.sessionPresent',
  );
  const row = r.rows[0];
  if (!row) return false;
  if (row.started === null) return undefined;
  return row.started === session.backendStart;
}

/**
 * Moves an executor to a new state; `dead` is final for its incarnation, and a state change keeps its first
 * reason. With `incarnation`, only that incarnation's row moves: a declaration about a process that is gone
 * never lands on the newer process that reused its ID. A move to `dead` is announced on the fence channel in
 * the same statement (delivered at commit): a hint to the executor, if still running, to ask its fence
 * question at once. A row this inserts was registered by no kit: it says the executor writes no heartbeats, so
 * a declaration never makes an executor without the kit one judged by a key it never writes.
 */
export async function setState(
  db: Db,
  e: {
    applicationName: string;
    executorId: string;
    state: ExecutorState;
    reason?: string;
    detectedBy?: string;
    applicationVersion?: string;
    incarnation?: string;
  },
): Promise<void> {
  await db.query(
    `WITH up AS (
       INSERT INTO ${table(db)} AS x (application_name, executor_id, application_version, state, reason, detected_by, incarnation, heartbeats)
       VALUES ($1, $2, $3, $4, $5, $6, $8, false)
       ON CONFLICT (application_name, executor_id) DO UPDATE
          SET state = EXCLUDED.state,
              state_changed_at = CASE WHEN x.state = EXCLUDED.state THEN x.state_changed_at ELSE now() END,
              reason = CASE WHEN x.state = EXCLUDED.state THEN COALESCE(x.reason, EXCLUDED.reason) ELSE EXCLUDED.reason END,
              detected_by = CASE WHEN x.state = EXCLUDED.state THEN COALESCE(x.detected_by, EXCLUDED.detected_by) ELSE EXCLUDED.detected_by END,
              application_version = COALESCE(x.application_version, EXCLUDED.application_version),
              last_seen_at = CASE WHEN EXCLUDED.state = 'dead' THEN x.last_seen_at ELSE now() END
        WHERE (x.state <> 'dead' OR EXCLUDED.state = 'dead')
          AND ($8::text IS NULL OR x.incarnation IS NULL OR x.incarnation = $8)
       RETURNING x.state, x.incarnation
     )
     SELECT pg_notify($7, json_build_object('applicationName', $1::text, 'executorId', $2::text, 'incarnation', up.incarnation)::text)
       FROM up WHERE up.state = 'dead'`,
    [
      e.applicationName,
      e.executorId,
      e.applicationVersion ?? null,
      e.state,
      e.reason ?? null,
      e.detectedBy ?? null,
      fenceChannel(db.afterlifeSchema),
      e.incarnation ?? null,
    ],
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
