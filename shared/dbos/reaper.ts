import { appScope, type Db, ident, NOW_MS } from '../../packages/executor/src/plane/index.js';
import { activityClock, quietSince } from './activity.js';

/**
 * The reaper's statements on DBOS's tables. Reads are plain SELECTs; the one write (cancelling a stuck
 * workflow) re-checks status, owner, application and the activity clock in its own WHERE clause, so a step
 * that completes between the reaper's SELECT and its UPDATE leaves the row untouched.
 */

export interface PendingOwner {
  executorId: string;
  applicationVersion: string | null;
  pending: number;
}

/** Executors owning PENDING workflows of the app, per version. Served by the partial index on PENDING rows. */
export async function pendingOwners(db: Db, applicationName: string): Promise<PendingOwner[]> {
  const res = await db.query<{ executor_id: string; application_version: string | null; n: number }>(
    `SELECT executor_id, application_version, count(*)::int AS n
       FROM ${ident(db.dbosSchema)}.workflow_status
      WHERE status = 'PENDING' AND executor_id IS NOT NULL AND ${appScope('application_name', '$1')}
      GROUP BY executor_id, application_version`,
    [applicationName],
    'reaper.pendingOwners',
  );
  return res.rows.map((r) => ({ executorId: r.executor_id, applicationVersion: r.application_version, pending: r.n }));
}

/**
 * The `application_name` prefix of an executor's own sessions, as Postgres stores it: DBOS for TypeScript
 * names its pool `dbos_transact_<executorID>_<version>`; DBOS for Python names every session plain
 * `dbos_transact` (2.3–2.30; see unattributedSessions) unless the app names them itself, in which case
 * docs/reaper.md asks for the same `dbos_transact_<executorID>_<version>`. The prefix has no separator after
 * the ID, so it also matches the sessions of an executor whose ID extends this one (`exec-1` matches
 * `exec-10`'s): that reads as "a session exists", the safe side. Postgres keeps at most NAMEDATALEN-1 (63)
 * bytes, and rewrites every byte outside printable ASCII (`?` up to 15, `\xNN` from 16), so `sec-ü1` is
 * stored as `sec-??1` or `sec-\xc3\xbc1`; the prefix stops before the first such byte, with the same
 * safe-side effect.
 */
export function sessionPrefix(executorId: string): string {
  const bytes = Buffer.from(`dbos_transact_${executorId}`).subarray(0, 63);
  const cut = bytes.findIndex((b) => b < 0x20 || b > 0x7e);
  return bytes.subarray(0, cut === -1 ? bytes.length : cut).toString('latin1');
}

/**
 * Whether this role sees other roles' sessions in pg_stat_activity. Without superuser or
 * pg_read_all_stats the evidence "no session of that executor" proves nothing, so it is "unknown".
 */
export async function canSeeOtherSessions(db: Db): Promise<boolean> {
  const res = await db.query<{ ok: boolean }>(
    `SELECT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
            OR pg_has_role(current_user, 'pg_read_all_stats', 'MEMBER') AS ok`,
    [],
    'reaper.canSeeSessions',
  );
  return res.rows[0]?.ok === true;
}

/**
 * Session names that could belong to any executor of any application: DBOS for Python's own default
 * (`dbos_transact`, every release from 2.3.0 to 2.30.0), and no name at all (DBOS for Python 1.0–2.2, a
 * pooler that does not pass the client's name on). While one such session is open, "executor X has no
 * session" proves nothing about X: it may be that session's process.
 */
export const DBOS_PYTHON_SESSION_NAME = 'dbos_transact';
export const UNATTRIBUTED_SESSION_NAMES: readonly string[] = [DBOS_PYTHON_SESSION_NAME, ''];

export interface UnattributedSessions {
  /** The stored application_name ('' for none). */
  name: string;
  sessions: number;
  /** Roles and client addresses they come from, for the operator to find the process (at most 5 each). */
  users: string[];
  clients: string[];
}

/**
 * SQL condition: the `pg_stat_activity` row aliased `a` is a client session of this database (not this one)
 * whose name attributes it to no executor, and which no live kit claims as its own (the Python kit records the
 * backend of the one DBOS connection it cannot rename, `kit_facts.dbosSessionPids`). `names` is the parameter
 * holding UNATTRIBUTED_SESSION_NAMES.
 */
export function unattributedSql(db: Pick<Db, 'afterlifeSchema'>, a: string, names: string): string {
  return `(${a}.datname = current_database() AND ${a}.backend_type = 'client backend' AND ${a}.pid <> pg_backend_pid()
           AND ${a}.application_name = ANY(${names})
           AND NOT EXISTS (SELECT 1 FROM ${ident(db.afterlifeSchema)}.executors k
                            WHERE k.state IN ('alive', 'draining') AND k.kit_facts->>'incarnation' = k.incarnation
                              AND k.kit_facts->'dbosSessionPids' @> to_jsonb(${a}.pid)))`;
}

/** Client sessions in this database (other than this one) whose name attributes them to no executor. */
export async function unattributedSessions(db: Db): Promise<UnattributedSessions[]> {
  const res = await db.query<{ name: string; n: number; users: string[]; clients: string[] }>(
    `SELECT a.application_name AS name, count(*)::int AS n,
            (array_agg(DISTINCT a.usename::text))[1:5] AS users,
            (array_agg(DISTINCT COALESCE(host(a.client_addr), 'local')))[1:5] AS clients
       FROM pg_stat_activity a
      WHERE ${unattributedSql(db, 'a', '$1::text[]')}
      GROUP BY a.application_name
      ORDER BY a.application_name DESC`,
    [UNATTRIBUTED_SESSION_NAMES],
    'reaper.unattributedSessions',
  );
  return res.rows.map((r) => ({ name: r.name, sessions: r.n, users: r.users, clients: r.clients }));
}

/** Of the given executors, those with at least one session in this database. */
export async function executorsWithSessions(db: Db, executorIds: string[]): Promise<Set<string>> {
  if (executorIds.length === 0) return new Set();
  const res = await db.query<{ id: string }>(
    `SELECT e.id FROM unnest($1::text[], $2::text[]) AS e(id, prefix)
      WHERE EXISTS (SELECT 1 FROM pg_stat_activity a
                     WHERE a.datname = current_database() AND starts_with(a.application_name, e.prefix))`,
    [executorIds, executorIds.map(sessionPrefix)],
    'reaper.sessions',
  );
  return new Set(res.rows.map((r) => r.id));
}

/** The latest activity (epoch ms) over each executor's PENDING workflows; absent when it has none. */
export async function lastActivityByExecutor(db: Db, applicationName: string, executorIds: string[]): Promise<Map<string, number>> {
  if (executorIds.length === 0) return new Map();
  const res = await db.query<{ executor_id: string; last: string | null }>(
    `SELECT w.executor_id, max(${activityClock(db, 'w')})::text AS last
       FROM ${ident(db.dbosSchema)}.workflow_status w
      WHERE w.status = 'PENDING' AND w.executor_id = ANY($1) AND ${appScope('w.application_name', '$2')}
      GROUP BY w.executor_id`,
    [executorIds, applicationName],
    'reaper.lastActivity',
  );
  return new Map(res.rows.map((r) => [r.executor_id, Number(r.last ?? 0)]));
}

export interface StuckCandidate {
  workflowId: string;
  executorId: string;
  applicationVersion: string | null;
  name: string | null;
  lastActivityMs: number;
}

/** PENDING workflows of the given (live) executors quiet since `cutoffMs`, oldest first. */
export async function findQuietPending(
  db: Db,
  applicationName: string,
  executorIds: string[],
  cutoffMs: number,
  limit: number,
): Promise<StuckCandidate[]> {
  if (executorIds.length === 0) return [];
  const res = await db.query<{
    workflow_uuid: string;
    executor_id: string;
    application_version: string | null;
    name: string | null;
    last: string;
  }>(
    `SELECT w.workflow_uuid, w.executor_id, w.application_version, w.name, (${activityClock(db, 'w')})::text AS last
       FROM ${ident(db.dbosSchema)}.workflow_status w
      WHERE w.status = 'PENDING' AND w.executor_id = ANY($1) AND ${appScope('w.application_name', '$2')}
        AND ${quietSince(db, 'w', '$3::bigint')}
      ORDER BY w.created_at
      LIMIT $4`,
    [executorIds, applicationName, cutoffMs, limit],
    'reaper.findQuiet',
  );
  return res.rows.map((r) => ({
    workflowId: r.workflow_uuid,
    executorId: r.executor_id,
    applicationVersion: r.application_version,
    name: r.name,
    lastActivityMs: Number(r.last),
  }));
}

/**
 * DBOS's cancel statement (cancelWorkflows) for one stuck workflow, re-checking in the same statement
 * everything the decision rested on: still PENDING, still claimed by the same executor, still this app's,
 * and still quiet since the cutoff. A checkpoint written after the SELECT makes it update nothing.
 */
export async function cancelIfStillQuiet(
  db: Db,
  s: { applicationName: string; workflowId: string; executorId: string; cutoffMs: number },
): Promise<boolean> {
  // The stuck report says 'cancelled' in the same statement, so a crash before the fork leaves a row the
  // next stuck pass finds and forks (an unmarked CANCELLED workflow would be lost to its lineage).
  const res = await db.query<{ n: number }>(
    `WITH cancelled AS (
       UPDATE ${ident(db.dbosSchema)}.workflow_status w
          SET status = 'CANCELLED', owner_xid = NULL, queue_name = NULL, deduplication_id = NULL,
              started_at_epoch_ms = NULL, updated_at = ${NOW_MS}, completed_at = ${NOW_MS}
        WHERE w.workflow_uuid = $1 AND w.status = 'PENDING' AND w.executor_id = $2
          AND ${appScope('w.application_name', '$3')}
          AND ${quietSince(db, 'w', '$4::bigint')}
          -- A row another transaction holds is being written (or held by a lost host's session): not quiet
          -- enough to cancel, and never worth stalling the tick on. Left for the next pass.
          AND w.workflow_uuid IN (SELECT workflow_uuid FROM ${ident(db.dbosSchema)}.workflow_status WHERE workflow_uuid = $1 FOR NO KEY UPDATE SKIP LOCKED)
        RETURNING w.workflow_uuid, w.completed_at
     ), marked AS (
       UPDATE ${ident(db.afterlifeSchema)}.stuck_workflows s SET action = 'cancelled', action_at = now(), cancelled_at_ms = c.completed_at
         FROM cancelled c WHERE s.application_name = $5 AND s.workflow_uuid = c.workflow_uuid
     )
     SELECT count(*)::int AS n FROM cancelled`,
    [s.workflowId, s.executorId, s.applicationName, s.cutoffMs, s.applicationName],
    'reaper.cancelStuck',
  );
  return (res.rows[0]?.n ?? 0) > 0;
}

/**
 * SQL condition: the session name `name` is a DBOS executor's (`dbos_transact_…`) that ends in `_<version>`,
 * the version being the SQL expression `version` (DBOS for TypeScript names its pool so; docs/reaper.md asks
 * apps without the kit to name theirs the same way). The one reading of "a session serves this version".
 */
export function sessionServesSql(name: string, version: string): string {
  return `(starts_with(${name}, 'dbos_transact_') AND right(${name}, length(${version}) + 1) = '_' || ${version})`;
}

/**
 * What the sessions say about which versions run: of `versions`, those with a session named
 * `dbos_transact_<executorID>_<version>` (not the executor `except`'s own: a lost host's sessions outlive
 * it), and whether a session that names nobody is open, which makes any answer incomplete.
 */
export async function sessionVersions(
  db: Db,
  versions: string[],
  except: string,
): Promise<{ versions: Set<string>; unattributed: boolean }> {
  const res = await db.query<{ v: string | null; unattributed: boolean }>(
    `SELECT v.v, EXISTS (SELECT 1 FROM pg_stat_activity a WHERE ${unattributedSql(db, 'a', '$3::text[]')}) AS unattributed
       FROM (SELECT NULL::text AS v UNION ALL SELECT x FROM unnest($1::text[]) AS x) v
      WHERE v.v IS NULL OR EXISTS (
        SELECT 1 FROM pg_stat_activity a
         WHERE a.datname = current_database() AND NOT starts_with(a.application_name, $2)
           AND ${sessionServesSql('a.application_name', 'v.v')})`,
    [versions, sessionPrefix(except), UNATTRIBUTED_SESSION_NAMES],
    'reaper.sessionVersions',
  );
  return {
    versions: new Set(res.rows.flatMap((r) => (r.v === null ? [] : [r.v]))),
    unattributed: res.rows[0]?.unattributed === true,
  };
}
