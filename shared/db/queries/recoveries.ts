import type pg from 'pg';
import { appScope, type Db, ident } from '../../../packages/executor/src/plane/index.js';
import { literal } from '../retentionSql.js';

/**
 * What a recovery knows of the death it is about, for its timeline (shared/timeline): the same statement
 * that starts the audit row opens the death's timeline, or joins the open one of the same executor and
 * incarnation (a redelivered notice, a reaper's recovery finished by executorDeath), so recording it adds
 * no round trip to the recovery. A known incarnation dies once: a recovery of one whose timeline is closed
 * (a late redelivery) opens none.
 */
export interface TimelineStart {
  cause: 'crash' | 'lost-host' | 'sigterm' | 'drain' | 'manual' | 'vanished';
  /** The last sign of life the death's evidence gave; absent: the reaper's last sighting of the key, else the declaration. */
  lastSignOfLife: SignOfLife | undefined;
  declaredAt: string;
}

/** Where a timeline's start comes from: which sign of life the plane actually had. */
export type SignOfLifeSource = 'notice' | 'heartbeat' | 'session' | 'checkpoint' | 'declaration';
export interface SignOfLife {
  at: string;
  source: SignOfLifeSource;
}

/**
 * A cause the executor (or an operator) stated replaces one the reaper inferred: a SIGTERMed kit's notice
 * and the reaper's reading of its freed lock race, and whichever recovery starts first opens the timeline.
 */
const SAID = `EXCLUDED.cause IN ('sigterm', 'drain', 'manual') AND t.cause IN ('crash', 'lost-host', 'vanished')`;

/**
 * The recovery audit: one row per death, finished with its outcome and counts. A notice that repeats a
 * death already recorded — the registry says this incarnation is dead, a row about it was written since
 * the incarnation started, and nothing of the executor is PENDING — writes no row and gets that row's ID
 * (`duplicate`): 1,000 notices about one known dead executor wrote 1,000 rows. Rows to move
 * make it a new attempt, audited on its own. A notice naming an incarnation that is not the registry's
 * (one it never knew, or one a newer process replaced), with nothing of the executor PENDING, is no new death
 * either: it writes no row and says so (`unknownIncarnation`), or anyone who can publish a notice could grow
 * the audit by a row per invented incarnation. One statement under a per-executor transaction lock, so
 * concurrent duplicates (degraded mode has no Redis lock) still write one row.
 */
export async function startRecovery(
  db: Db,
  r: {
    applicationName: string;
    executorId: string;
    reason: string;
    detectedBy: string;
    messageId: string | undefined;
    recoveredBy: string;
    lockMode: 'locked' | 'degraded';
    incarnation?: string | undefined;
  },
  timeline?: TimelineStart,
): Promise<{ id: number; duplicate: boolean; unknownIncarnation: boolean }> {
  const a = ident(db.afterlifeSchema);
  const [app, executor, incarnation] = [literal(r.applicationName), literal(r.executorId), `${literal(r.incarnation)}::text`];
  // One message, one round trip (a burst of notices waits on the pool): the lock, then the statement in the
  // same implicit transaction, whose snapshot is taken after the lock, so it sees a concurrent duplicate's row.
  const out = (await db.query(
    `SELECT pg_advisory_xact_lock(hashtext('afterlife.recoveries'), hashtext(${app} || ':' || ${executor}));
     WITH pending AS (
       SELECT EXISTS (SELECT 1 FROM ${ident(db.dbosSchema)}.workflow_status w
                       WHERE w.executor_id = ${executor} AND w.status = 'PENDING' AND ${appScope('w.application_name', app)}) AS some_pending
     ),
     recorded AS (
       SELECT x.id FROM ${a}.recoveries x
         JOIN ${a}.executors e ON e.application_name = x.application_name AND e.executor_id = x.executor_id
        WHERE x.application_name = ${app} AND x.executor_id = ${executor} AND e.state = 'dead'
          AND (${incarnation} IS NULL OR e.incarnation = ${incarnation}) AND (x.incarnation IS NULL OR x.incarnation = e.incarnation)
          AND (e.started_at IS NULL OR x.started_at >= e.started_at)
          AND NOT (SELECT some_pending FROM pending)
        ORDER BY x.started_at DESC LIMIT 1
     ),
     -- Not the registry's incarnation (or no registry row at all), and nothing to move: no death to audit.
     unknown AS (
       SELECT COALESCE((SELECT max(x.id) FROM ${a}.recoveries x WHERE x.application_name = ${app} AND x.executor_id = ${executor}), 0) AS id
        WHERE ${incarnation} IS NOT NULL AND NOT (SELECT some_pending FROM pending)
          AND ${incarnation} IS DISTINCT FROM (SELECT e.incarnation FROM ${a}.executors e
                                                WHERE e.application_name = ${app} AND e.executor_id = ${executor})
     ),
     fresh AS (
       INSERT INTO ${a}.recoveries (application_name, executor_id, reason, detected_by, message_id, recovered_by, lock_mode, incarnation)
       SELECT ${app}, ${executor}, ${literal(r.reason)}, ${literal(r.detectedBy)}, ${literal(r.messageId)}, ${literal(r.recoveredBy)},
              ${literal(r.lockMode)}, ${incarnation}
        WHERE NOT EXISTS (SELECT 1 FROM recorded) AND NOT EXISTS (SELECT 1 FROM unknown)
       RETURNING id, started_at
     )${
       timeline
         ? `,
     ${timelineCte(a, r, timeline)}`
         : ''
     }
     SELECT id::text, false AS duplicate, false AS unknown_incarnation FROM fresh
     UNION ALL SELECT id::text, true, false FROM recorded
     UNION ALL SELECT id::text, true, true FROM unknown`,
    undefined,
    'recoveries.start',
  )) as unknown;
  // A multi-statement message resolves to one result per statement; the INSERT's is the last.
  const results = (Array.isArray(out) ? out : [out]) as Array<
    pg.QueryResult<{ id: string; duplicate: boolean; unknown_incarnation: boolean }>
  >;
  const row = results.at(-1)?.rows[0];
  return { id: Number(row?.id), duplicate: row?.duplicate === true, unknownIncarnation: row?.unknown_incarnation === true };
}

/**
 * The timeline's part of the statement: opened from the fresh audit row, or joined (see TimelineStart).
 * A duplicate notice writes no audit row, so it touches no timeline either.
 */
function timelineCte(
  a: string,
  r: { applicationName: string; executorId: string; messageId: string | undefined; incarnation?: string | undefined },
  t: TimelineStart,
): string {
  const [app, executor, incarnation] = [literal(r.applicationName), literal(r.executorId), `${literal(r.incarnation)}::text`];
  const declared = `${literal(t.declaredAt)}::timestamptz`;
  const given = `${literal(t.lastSignOfLife?.at)}::timestamptz`;
  // The start is never after the declaration (an executor's clock may run ahead of the reaper's).
  return `tl AS (
       INSERT INTO ${a}.timelines AS t (application_name, executor_id, incarnation, cause, last_sign_of_life_at, last_sign_of_life_source,
                                        declared_at, notice_at, first_recovery_id, last_recovery_id)
       SELECT ${app}, ${executor}, COALESCE(${incarnation}, ''), ${literal(t.cause)},
              LEAST(COALESCE(${given}, seen.at, ${declared}), ${declared}),
              CASE WHEN ${given} IS NOT NULL THEN ${literal(t.lastSignOfLife?.source)} WHEN seen.at IS NOT NULL THEN 'heartbeat' ELSE 'declaration' END,
              ${declared}, CASE WHEN ${literal(r.messageId)}::text IS NOT NULL THEN f.started_at END, f.id, f.id
         FROM fresh f
         LEFT JOIN LATERAL (SELECT o.last_beat_seen_at AS at FROM ${a}.executor_observations o
                             WHERE o.application_name = ${app} AND o.executor_id = ${executor}) seen ON true
        WHERE ${incarnation} IS NULL OR NOT EXISTS (
          SELECT 1 FROM ${a}.timelines c WHERE c.application_name = ${app} AND c.executor_id = ${executor} AND c.incarnation = ${incarnation} AND c.closed_at IS NOT NULL)
       ON CONFLICT (application_name, executor_id, incarnation) WHERE closed_at IS NULL
       DO UPDATE SET last_recovery_id = EXCLUDED.last_recovery_id, notice_at = COALESCE(t.notice_at, EXCLUDED.notice_at),
                     declared_at = LEAST(t.declared_at, EXCLUDED.declared_at),
                     cause = CASE WHEN ${SAID} THEN EXCLUDED.cause ELSE t.cause END,
                     last_sign_of_life_at = CASE WHEN ${SAID} THEN EXCLUDED.last_sign_of_life_at ELSE t.last_sign_of_life_at END,
                     last_sign_of_life_source = CASE WHEN ${SAID} THEN EXCLUDED.last_sign_of_life_source ELSE t.last_sign_of_life_source END
       RETURNING 1)`;
}

export async function finishRecovery(
  db: Db,
  id: number,
  r: {
    outcome: 'completed' | 'partial' | 'failed';
    reenqueued: number;
    batches: number;
    versions: Record<string, number>;
    versionsWithoutExecutor: string[];
    error?: string;
  },
): Promise<void> {
  await db.query(
    `UPDATE ${ident(db.afterlifeSchema)}.recoveries
        SET finished_at = now(), outcome = $2, reenqueued = $3, batches = $4, versions = $5,
            versions_without_executor = $6, error = $7
      WHERE id = $1`,
    [id, r.outcome, r.reenqueued, r.batches, JSON.stringify(r.versions), r.versionsWithoutExecutor, r.error ?? null],
    'recoveries.finish',
  );
}
