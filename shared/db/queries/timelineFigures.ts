import { type Db, ident } from '../../../packages/executor/src/plane/index.js';
import type { SignOfLifeSource, TimelineStart } from './recoveries.js';

/**
 * A death's timeline as its row holds it, with the figures of its moved work read from DBOS's own records
 * (shared/timeline has the rules; docs/operations.md, "Recovery timelines"). The statements that close
 * timelines (closeTimelines.ts) and read one (readTimeline.ts) share the figures below.
 *
 * Figures, per timeline, over its recoveries (the executor's and incarnation's audit rows from its first
 * recovery on) and their batches:
 * - re-enqueued: every batch's rows; first/last re-enqueued at the first and last batch;
 * - tracked: the moved workflows whose start is looked up, the first TRACK_LIMIT in batch order (a death
 *   that moved 100,000 rows is not read in full every second; the first batches hold the first to start);
 * - a tracked workflow started elsewhere at its first step that started after it was moved (DBOS's
 *   `operation_outputs.started_at_epoch_ms`; only the new owner starts steps after the move, as the move
 *   cleared the old owner's `owner_xid`), or — with no step left to run — when it ended. A step that started
 *   before the move and completed after it (a `DBOS.sleep` begun on the dead executor, whose wake-up the new
 *   owner records) is the dead executor's, not a start elsewhere;
 * - first step elsewhere: the earliest of those steps; all started: the last start, once every tracked
 *   workflow has one.
 */
export const TRACK_LIMIT = 1_000;

export interface TimelineRow {
  id: number;
  executorId: string;
  incarnation: string | null;
  cause: TimelineStart['cause'];
  firstRecoveryId: number;
  lastRecoveryId: number;
  lastSignOfLifeAt: Date | null;
  /** Which sign of life the timeline starts at; null on timelines recorded before the plane said. */
  lastSignOfLifeSource: SignOfLifeSource | null;
  declaredAt: Date;
  noticeAt: Date | null;
  firstReenqueuedAt: Date | null;
  lastReenqueuedAt: Date | null;
  firstStepElsewhereAt: Date | null;
  allStartedAt: Date | null;
  reenqueued: number;
  tracked: number;
  started: number;
  recoveries: number;
  closedAt: Date | null;
  closedBecause: 'all-started' | 'nothing-moved' | 'bound' | null;
}

/**
 * The CTEs `pick` (the timelines `where` selects, at most `limit` of them, oldest first, optionally
 * locked) and `fig` (each with its figures, and whether its recoveries are done). `track` is the parameter
 * that holds TRACK_LIMIT.
 */
export function figuresCte(db: Db, o: { where: string; limit: string; track: string; lock?: boolean }): string {
  const a = ident(db.afterlifeSchema);
  const s = ident(db.dbosSchema);
  const ms = (col: string) => `(EXTRACT(EPOCH FROM ${col}) * 1000)::bigint`;
  return `pick AS (
       SELECT t.* FROM ${a}.timelines t WHERE ${o.where} ORDER BY t.id LIMIT ${o.limit}${o.lock ? ' FOR UPDATE SKIP LOCKED' : ''}),
     recs AS (
       SELECT p.id AS tid, r.id AS rid, r.finished_at, r.outcome
         FROM pick p JOIN ${a}.recoveries r
           ON r.application_name = p.application_name AND r.executor_id = p.executor_id
          AND COALESCE(r.incarnation, '') = p.incarnation AND r.id BETWEEN p.first_recovery_id AND p.last_recovery_id),
     rs AS (
       SELECT tid, count(*)::int AS recoveries, bool_and(finished_at IS NOT NULL) AS finished,
              (array_agg(outcome ORDER BY rid DESC))[1] AS last_outcome
         FROM recs GROUP BY tid),
     bs AS (
       SELECT c.tid, b.created_at, b.workflow_ids,
              sum(cardinality(b.workflow_ids)) OVER (PARTITION BY c.tid ORDER BY c.rid, b.batch_no) - cardinality(b.workflow_ids) AS before
         FROM recs c JOIN ${a}.recovery_batches b ON b.recovery_id = c.rid),
     tt AS (
       SELECT tid, min(created_at) AS first_at, max(created_at) AS last_at, sum(cardinality(workflow_ids))::int AS reenqueued
         FROM bs GROUP BY tid),
     moved AS (
       SELECT b.tid, w.wf, min(b.created_at) AS at
         FROM bs b CROSS JOIN LATERAL unnest(b.workflow_ids) AS w(wf)
        WHERE b.before < ${o.track} GROUP BY 1, 2),
     starts AS (
       SELECT m.tid,
              (SELECT min(x.started_at_epoch_ms) FROM ${s}.operation_outputs x
                WHERE x.workflow_uuid = m.wf AND x.started_at_epoch_ms >= ${ms('m.at')}) AS step_ms,
              (SELECT ws.updated_at FROM ${s}.workflow_status ws
                WHERE ws.workflow_uuid = m.wf AND ws.status NOT IN ('PENDING', 'ENQUEUED') AND ws.updated_at >= ${ms('m.at')}) AS ended_ms
         FROM moved m),
     st AS (
       SELECT tid, count(*)::int AS tracked, count(COALESCE(step_ms, ended_ms))::int AS started, min(step_ms) AS first_step_ms,
              max(COALESCE(step_ms, ended_ms)) AS all_ms
         FROM starts GROUP BY tid),
     fig AS (
       SELECT p.id, COALESCE(rs.recoveries, 0) AS recoveries,
              COALESCE(rs.finished, false) AND rs.last_outcome = 'completed' AS done,
              tt.first_at, tt.last_at, COALESCE(tt.reenqueued, 0) AS reenqueued,
              COALESCE(st.tracked, 0) AS tracked, COALESCE(st.started, 0) AS started,
              to_timestamp(st.first_step_ms / 1000.0) AS first_step_at,
              CASE WHEN st.tracked > 0 AND st.started = st.tracked THEN to_timestamp(st.all_ms / 1000.0) END AS all_at
         FROM pick p LEFT JOIN rs ON rs.tid = p.id LEFT JOIN tt ON tt.tid = p.id LEFT JOIN st ON st.tid = p.id)`;
}

/** The columns a statement returns for timelineRow: the timeline `t` with its figures `f` (closed: `t`'s own). */
export const TIMELINE_COLUMNS = `t.id::text, t.executor_id, t.incarnation, t.cause, t.first_recovery_id::text, t.last_recovery_id::text,
       t.last_sign_of_life_at, t.last_sign_of_life_source, t.declared_at, t.notice_at, t.closed_at, t.closed_because, f.recoveries,
       CASE WHEN t.closed_at IS NULL THEN f.first_at ELSE t.first_reenqueued_at END AS first_reenqueued_at,
       CASE WHEN t.closed_at IS NULL THEN f.last_at ELSE t.last_reenqueued_at END AS last_reenqueued_at,
       CASE WHEN t.closed_at IS NULL THEN f.first_step_at ELSE t.first_step_elsewhere_at END AS first_step_elsewhere_at,
       CASE WHEN t.closed_at IS NULL THEN f.all_at ELSE t.all_started_at END AS all_started_at,
       COALESCE(t.reenqueued, f.reenqueued) AS reenqueued, COALESCE(t.tracked, f.tracked) AS tracked,
       COALESCE(t.started, f.started) AS started`;

export interface RawTimeline {
  id: string;
  executor_id: string;
  incarnation: string;
  cause: TimelineRow['cause'];
  first_recovery_id: string;
  last_recovery_id: string;
  last_sign_of_life_at: Date | null;
  last_sign_of_life_source: SignOfLifeSource | null;
  declared_at: Date;
  notice_at: Date | null;
  closed_at: Date | null;
  closed_because: TimelineRow['closedBecause'];
  recoveries: number;
  first_reenqueued_at: Date | null;
  last_reenqueued_at: Date | null;
  first_step_elsewhere_at: Date | null;
  all_started_at: Date | null;
  reenqueued: number;
  tracked: number;
  started: number;
}

export function timelineRow(r: RawTimeline): TimelineRow {
  return {
    id: Number(r.id),
    executorId: r.executor_id,
    incarnation: r.incarnation === '' ? null : r.incarnation,
    cause: r.cause,
    firstRecoveryId: Number(r.first_recovery_id),
    lastRecoveryId: Number(r.last_recovery_id),
    lastSignOfLifeAt: r.last_sign_of_life_at,
    lastSignOfLifeSource: r.last_sign_of_life_source,
    declaredAt: r.declared_at,
    noticeAt: r.notice_at,
    firstReenqueuedAt: r.first_reenqueued_at,
    lastReenqueuedAt: r.last_reenqueued_at,
    firstStepElsewhereAt: r.first_step_elsewhere_at,
    allStartedAt: r.all_started_at,
    reenqueued: r.reenqueued,
    tracked: r.tracked,
    started: r.started,
    recoveries: r.recoveries,
    closedAt: r.closed_at,
    closedBecause: r.closed_because,
  };
}
