import type pg from 'pg';
import { ident } from '../../contract/identifier.js';
import type { Db } from '../pool.js';
import { BACKENDS_SQL, LEGACY_LIVENESS_KEY_SQL, LIVENESS_KEY_SQL, sameHolderSql, takeLivenessSql } from '../../contract/livenessKey.js';

// The statements about liveness locks: the reaper's reading of who holds theirs, and the kit's own on its
// dedicated connection (the fence question, taking the lock, the inherited lease).

/**
 * The reaper's one statement a tick about liveness locks: which of the candidates hold theirs (the kit's own
 * registered session, packages/executor/src/contract/livenessKey.ts), whose lock is held by something else instead, and how long
 * the server has been up. pg_locks shows every session's locks to any role (unlike pg_stat_activity, it needs
 * no pg_read_all_stats). A server that restarted a moment ago has dropped every session at once, so right
 * after a start a free lock says nothing yet: `upMs` lets the caller wait for the kits to take theirs again.
 */
export interface LivenessReading {
  held: Set<string>;
  /** Locks held by a backend that is not the kit's registered session: reported, and read as free. */
  squatted: Set<string>;
  /** Milliseconds since the postmaster started (database clock). */
  upMs: number;
}

export async function readLiveness(db: Db, applicationName: string, executorIds: string[]): Promise<LivenessReading> {
  // pg_locks is read once and joined, not scanned per executor: per-executor EXISTS with the holder check
  // took ~70 ms for 200 executors, the joins ~9 ms against ~4.5 ms for "any holder" without the check
  // (test/integration/executor/liveness.test.ts prints it). The backends are joined too, by pid (a hash
  // join), not asked per lock: an EXISTS over the materialized list scanned every backend for every lock,
  // O(locks × backends), which at 1,000 executors was most of an invocation's first tick.
  const k = LIVENESS_KEY_SQL.key('$1::text', 'id');
  const res = await db.query<{ held: string[] | null; squatted: string[] | null; up_ms: string }>(
    `WITH l AS MATERIALIZED (
       SELECT objsubid, classid, objid, pid FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
     ),
     act AS MATERIALIZED (SELECT pid, usesysid, backend_start FROM (${BACKENDS_SQL}) b WHERE pid IN (SELECT pid FROM l)),
     e AS MATERIALIZED (
       SELECT e0.id, ((${k} >> 32) & 4294967295)::oid AS hi, (${k} & 4294967295)::oid AS lo,
              (${LEGACY_LIVENESS_KEY_SQL.app('$1::text')})::oid AS legacy_app, (${LEGACY_LIVENESS_KEY_SQL.executor('e0.id')})::oid AS legacy_exec,
              x.liveness_pid, x.liveness_usesysid, x.liveness_backend_start, x.executor_id IS NOT NULL AND x.incarnation IS NULL AS legacy
         FROM unnest($2::text[]) AS e0(id)
         LEFT JOIN ${ident(db.afterlifeSchema)}.executors x ON x.application_name = $1 AND x.executor_id = e0.id
     )
     SELECT ARRAY(SELECT e.id FROM e JOIN l ON l.objsubid = 1 AND l.classid = e.hi AND l.objid = e.lo AND l.pid = e.liveness_pid
                    JOIN act a ON a.pid = l.pid
                   WHERE ${sameHolderSql('l.pid', 'e', { joined: 'a' })}
                  UNION
                  SELECT e.id FROM e JOIN l ON l.objsubid = 2 AND l.classid = e.legacy_app AND l.objid = e.legacy_exec WHERE e.legacy) AS held,
            ARRAY(SELECT DISTINCT e.id FROM e JOIN l ON l.objsubid = 1 AND l.classid = e.hi AND l.objid = e.lo
                    LEFT JOIN act a ON a.pid = l.pid
                   WHERE l.pid IS DISTINCT FROM e.liveness_pid OR a.pid IS NULL OR NOT ${sameHolderSql('l.pid', 'e', { joined: 'a' })}) AS squatted,
            (EXTRACT(EPOCH FROM now() - pg_postmaster_start_time()) * 1000)::bigint::text AS up_ms`,
    [applicationName, executorIds],
    'liveness.read',
  );
  const row = res.rows[0];
  return { held: new Set(row?.held ?? []), squatted: new Set(row?.squatted ?? []), upMs: Number(row?.up_ms ?? 0) };
}

/**
 * The fence question (packages/executor/src/contract/fenceCheck.ts says what each verdict means), as a query for the kit's
 * own connection; `incarnation` undefined (a caller that never registered) skips `superseded`, and counts
 * every recovery of the ID as `moved` (with an incarnation, only recoveries about it or about none).
 */
export function fenceCheckQuery(
  afterlifeSchema: string,
  e: { applicationName: string; executorId: string; since: Date; incarnation?: string | undefined },
): { text: string; values: unknown[] } {
  const s = ident(afterlifeSchema);
  return {
    text: `SELECT CASE
              WHEN $4::text IS NOT NULL AND x.incarnation IS NOT NULL AND x.incarnation <> $4
                THEN json_build_object('verdict', 'superseded', 'incarnation', x.incarnation, 'at', x.state_changed_at)
              WHEN x.state = 'dead'
                THEN json_build_object('verdict', 'dead', 'reason', x.reason, 'detectedBy', x.detected_by, 'at', x.state_changed_at)
              WHEN m.recovered_by IS NOT NULL
                THEN json_build_object('verdict', 'moved', 'reason', m.reason, 'detectedBy', m.recovered_by, 'at', m.started_at, 'moved', m.moved)
            END AS fence
       FROM (SELECT 1) AS one
       LEFT JOIN ${s}.executors x ON x.application_name = $1 AND x.executor_id = $2
       LEFT JOIN LATERAL (
         SELECT r.reason, r.recovered_by, r.started_at, sum(cardinality(b.workflow_ids))::int AS moved
           FROM ${s}.recoveries r JOIN ${s}.recovery_batches b ON b.recovery_id = r.id
          WHERE r.application_name = $1 AND r.executor_id = $2 AND r.started_at >= $3 AND cardinality(b.workflow_ids) > 0
            -- A recovery about another incarnation of the ID (an earlier process, superseded or dead) moved
            -- that one's work, not this process's: it fences nobody here.
            AND ($4::text IS NULL OR r.incarnation IS NULL OR r.incarnation = $4)
          GROUP BY r.id ORDER BY r.started_at LIMIT 1
       ) m ON true`,
    values: [e.applicationName, e.executorId, e.since, e.incarnation ?? null],
  };
}

/**
 * Asks the fence question on the kit's liveness connection: the raw `fence` JSON, null when not fenced. A named
 * statement: parsed and planned once per session, then only bound and executed, since the liveness session
 * asks it for the life of the process (one name per schema, as a connection keeps one text per name).
 */
export async function askFence(
  client: pg.ClientBase,
  afterlifeSchema: string,
  e: { applicationName: string; executorId: string; since: Date; incarnation?: string | undefined },
): Promise<unknown> {
  const q = fenceCheckQuery(afterlifeSchema, e);
  const res = await client.query<{ fence: unknown }>({
    name: `afterlife_fence_${afterlifeSchema}`.slice(0, 63),
    text: q.text,
    values: q.values,
  });
  return res.rows[0]?.fence;
}

/** Takes the liveness lock on the kit's connection and records it for this incarnation (takeLivenessSql): whether it is ours. */
export async function takeLiveness(
  client: pg.ClientBase,
  afterlifeSchema: string,
  e: { applicationName: string; executorId: string; incarnation?: string | undefined },
): Promise<boolean> {
  const res = await client.query<{ ok: boolean }>(takeLivenessSql(afterlifeSchema), [
    e.applicationName,
    e.executorId,
    e.incarnation ?? null,
  ]);
  return res.rows[0]?.ok === true;
}

/** The idle_session_timeout this session inherited (URL options, role, database), ms; 0 when none. */
export async function inheritedIdleSessionTimeoutMs(client: pg.ClientBase): Promise<number> {
  const r = await client.query<{ ms: string }>(`SELECT setting AS ms FROM pg_settings WHERE name = 'idle_session_timeout'`);
  return Number(r.rows[0]?.ms ?? 0);
}

/** The server session a statement ran on: its backend's pid and start time (a pid alone can be reused). */
export interface BackendIdentity {
  pid: number;
  startedAt: string;
  /** When the statement that asked started on that backend (pg_stat_activity's query_start). */
  queryStart: string;
}

/** Which server session answers this statement (the kit compares answers to tell a session from a pool). */
export async function backendIdentity(client: pg.ClientBase): Promise<BackendIdentity> {
  const r = await client.query<{ pid: number; started: string | null; query_start: string | null }>(
    `SELECT pg_backend_pid() AS pid, a.backend_start::text AS started, a.query_start::text AS query_start
       FROM pg_stat_get_activity(pg_backend_pid()) a`,
  );
  const row = r.rows[0];
  return { pid: row?.pid ?? 0, startedAt: row?.started ?? '', queryStart: row?.query_start ?? '' };
}

/**
 * What another backend last did, as this session sees it: its start, its state and when its last statement
 * started. Null fields when the backend is gone or belongs to a role this one may not watch.
 */
export async function lastStatementOf(
  client: pg.ClientBase,
  pid: number,
): Promise<{ startedAt: string | null; state: string | null; queryStart: string | null }> {
  const r = await client.query<{ started: string | null; state: string | null; query_start: string | null }>(
    `SELECT a.backend_start::text AS started, a.state, a.query_start::text AS query_start FROM pg_stat_get_activity($1::int) a`,
    [pid],
  );
  const row = r.rows[0];
  return { startedAt: row?.started ?? null, state: row?.state ?? null, queryStart: row?.query_start ?? null };
}

/** Begins a transaction on a probe connection: a transaction-mode pooler must then pin one server to it. */
export async function beginProbe(client: pg.ClientBase): Promise<void> {
  await client.query('BEGIN');
}
