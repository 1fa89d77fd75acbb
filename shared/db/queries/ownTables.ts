import { type Db, ident } from '../../../packages/executor/src/plane/index.js';
import { retentionQuery } from '../retentionSql.js';

/**
 * The statements of retention on afterlife's own tables, one conditional DELETE per table (what each keeps
 * and why: shared/retention/ownTables.ts, which decides the keep time and the order, and docs/retention.md).
 */

/** The statement context of a prune in `db`: DBOS's schema `s`, afterlife's `a`, $1 the application, $2 keepMs, $3 the limit. */
export function pruneContext(db: Db, applicationName: string, keepMs: number, limit: number): Prune {
  return { db, s: ident(db.dbosSchema), a: ident(db.afterlifeSchema), params: [applicationName, keepMs, limit] };
}

/** One prune's statement context: $1 the application, $2 keepMs, $3 the limit per table. */
export interface Prune {
  db: Db;
  s: string;
  a: string;
  params: [string, number, number];
}

const older = (col: string) => `${col} < now() - make_interval(secs => $2::bigint / 1000.0)`;
const noPending = (s: string, col: string) =>
  `NOT EXISTS (SELECT 1 FROM ${s}.workflow_status ws WHERE ws.status = 'PENDING' AND ws.executor_id = ${col})`;
const count = async (q: Prune, sql: string, tag: string) =>
  Number((await retentionQuery<{ n: number }>(q.db, sql, q.params, tag)).rows[0]?.n ?? 0);

export function pruneExecutors(q: Prune): Promise<number> {
  const { s, a } = q;
  return count(
    q,
    `WITH gone AS (
       DELETE FROM ${a}.executors e WHERE (e.application_name, e.executor_id) IN (
         SELECT x.application_name, x.executor_id FROM ${a}.executors x
          WHERE x.application_name = $1 AND x.state IN ('dead', 'drained') AND ${older('x.state_changed_at')}
            AND ${noPending(s, 'x.executor_id')}
          LIMIT $3 FOR UPDATE SKIP LOCKED)
         AND e.state IN ('dead', 'drained') AND ${older('e.state_changed_at')}
       RETURNING e.application_name, e.executor_id),
     obs AS (DELETE FROM ${a}.executor_observations o USING gone g
              WHERE o.application_name = g.application_name AND o.executor_id = g.executor_id RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    'retention.pruneExecutors',
  );
}

export function pruneObservations(q: Prune): Promise<number> {
  const { s, a } = q;
  return count(
    q,
    `WITH gone AS (
       DELETE FROM ${a}.executor_observations o WHERE (o.application_name, o.executor_id) IN (
         SELECT x.application_name, x.executor_id FROM ${a}.executor_observations x
          WHERE x.application_name = $1 AND ${older('GREATEST(x.last_beat_seen_at, x.last_absent_at, x.declared_dead_at, x.first_absent_at)')}
            AND NOT EXISTS (SELECT 1 FROM ${a}.executors e WHERE e.application_name = x.application_name AND e.executor_id = x.executor_id)
            AND ${noPending(s, 'x.executor_id')}
          LIMIT $3 FOR UPDATE SKIP LOCKED)
       RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    'retention.pruneObservations',
  );
}

export function pruneRecoveries(q: Prune): Promise<number> {
  const { a } = q;
  return count(
    q,
    `WITH gone AS (
       DELETE FROM ${a}.recoveries r WHERE r.id IN (
         SELECT x.id FROM ${a}.recoveries x
          WHERE x.application_name = $1 AND ${older('COALESCE(x.finished_at, x.started_at)')} LIMIT $3)
       RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    'retention.pruneRecoveries',
  );
}

export function pruneDrainRequests(q: Prune): Promise<number> {
  const { a } = q;
  return count(
    q,
    `WITH gone AS (
       DELETE FROM ${a}.drain_requests r WHERE r.id IN (
         SELECT x.id FROM ${a}.drain_requests x WHERE x.application_name = $1 AND ${older('x.requested_at')} LIMIT $3)
       RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    'retention.pruneDrainRequests',
  );
}

export function pruneTimelines(q: Prune): Promise<number> {
  const { a } = q;
  return count(
    q,
    `WITH gone AS (
       DELETE FROM ${a}.timelines t WHERE t.id IN (
         SELECT x.id FROM ${a}.timelines x
          WHERE x.application_name = $1 AND x.closed_at IS NOT NULL AND ${older('x.declared_at')} LIMIT $3)
       RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    'retention.pruneTimelines',
  );
}

export function pruneStuck(q: Prune): Promise<number> {
  const { s, a } = q;
  return count(
    q,
    `WITH gone AS (
       DELETE FROM ${a}.stuck_workflows w WHERE (w.application_name, w.workflow_uuid) IN (
         SELECT x.application_name, x.workflow_uuid FROM ${a}.stuck_workflows x
          WHERE x.application_name = $1 AND ${older('x.last_detected_at')}
            AND NOT EXISTS (SELECT 1 FROM ${s}.workflow_status ws WHERE ws.workflow_uuid = x.workflow_uuid)
          LIMIT $3)
       RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    'retention.pruneStuck',
  );
}

/** A lineage is over once none of its members is left in DBOS's tables; its ledger rows then go together. */
export function pruneLineages(q: Prune): Promise<number> {
  const { s, a } = q;
  return count(
    q,
    `WITH roots AS (
       SELECT DISTINCT root_workflow_id AS root FROM (
         SELECT f.root_workflow_id FROM ${a}.forks f WHERE f.application_name = $1 AND ${older('f.created_at')}
         UNION ALL
         SELECT w.root_workflow_id FROM ${a}.rewinds w WHERE w.application_name = $1 AND ${older('w.created_at')}
         UNION ALL
         SELECT d.root_workflow_id FROM ${a}.dead_letters d WHERE d.application_name = $1 AND ${older('d.created_at')} AND d.published_at IS NOT NULL
       ) x LIMIT $3
     ),
     over AS (
       SELECT r.root FROM roots r
        WHERE NOT EXISTS (SELECT 1 FROM ${s}.workflow_status ws WHERE ws.workflow_uuid = r.root)
          AND NOT EXISTS (SELECT 1 FROM ${a}.forks f JOIN ${s}.workflow_status ws ON ws.workflow_uuid IN (f.new_workflow_id, f.source_workflow_id) WHERE f.root_workflow_id = r.root)
          AND NOT EXISTS (SELECT 1 FROM ${a}.rewinds w JOIN ${s}.workflow_status ws ON ws.workflow_uuid = w.workflow_id WHERE w.root_workflow_id = r.root)
          AND NOT EXISTS (SELECT 1 FROM ${a}.dead_letters d WHERE d.root_workflow_id = r.root AND d.published_at IS NULL)
     ),
     f AS (DELETE FROM ${a}.forks f USING over o WHERE f.root_workflow_id = o.root RETURNING 1),
     w AS (DELETE FROM ${a}.rewinds w USING over o WHERE w.root_workflow_id = o.root RETURNING 1),
     d AS (DELETE FROM ${a}.dead_letters d USING over o WHERE d.root_workflow_id = o.root AND d.published_at IS NOT NULL RETURNING 1)
     SELECT count(*)::int AS n FROM over`,
    'retention.pruneLineages',
  );
}
