import { type Db, ident } from '../../../packages/executor/src/plane/index.js';

/**
 * Deaths declared since `since` and how long their work waited (for `afterlife-plane status`): death (the last
 * sign of life, else the declaration) → first step elsewhere, over the closed timelines that have one, as
 * p50 / p95 / max, and the slowest death.
 */
export interface TimelineStats {
  deaths: number;
  /** Still open: their work has not all started yet (or the bound has not passed). */
  open: number;
  /** Deaths with a first step elsewhere, the ones the percentiles are over. */
  measured: number;
  p50Ms: number | null;
  p95Ms: number | null;
  maxMs: number | null;
  slowest: { timelineId: number; executorId: string; cause: string; declaredAt: Date; firstRecoveryId: number } | null;
}

export async function timelineStats(db: Db, applicationName: string, since: Date): Promise<TimelineStats> {
  const res = await db.query<{
    deaths: number;
    open: number;
    measured: number;
    p50: number | null;
    p95: number | null;
    max: number | null;
    slow_id: string | null;
    slow_executor: string | null;
    slow_cause: string | null;
    slow_declared: Date | null;
    slow_recovery: string | null;
  }>(
    `WITH w AS (
       SELECT t.*, GREATEST(0, (EXTRACT(EPOCH FROM t.first_step_elsewhere_at - LEAST(COALESCE(t.last_sign_of_life_at, t.declared_at), t.declared_at)) * 1000)::float8) AS ms
         FROM ${ident(db.afterlifeSchema)}.timelines t WHERE t.application_name = $1 AND t.declared_at >= $2),
     slow AS (SELECT * FROM w WHERE ms IS NOT NULL ORDER BY ms DESC, id LIMIT 1)
     SELECT (SELECT count(*)::int FROM w) AS deaths, (SELECT count(*)::int FROM w WHERE closed_at IS NULL) AS open,
            (SELECT count(ms)::int FROM w) AS measured,
            (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY ms) FROM w WHERE ms IS NOT NULL) AS p50,
            (SELECT percentile_disc(0.95) WITHIN GROUP (ORDER BY ms) FROM w WHERE ms IS NOT NULL) AS p95,
            (SELECT max(ms) FROM w) AS max,
            slow.id::text AS slow_id, slow.executor_id AS slow_executor, slow.cause AS slow_cause,
            slow.declared_at AS slow_declared, slow.first_recovery_id::text AS slow_recovery
       FROM (SELECT 1) one LEFT JOIN slow ON true`,
    [applicationName, since],
    'timelines.stats',
  );
  const r = res.rows[0];
  const round = (v: number | null | undefined) => (v === null || v === undefined ? null : Math.round(v));
  return {
    deaths: r?.deaths ?? 0,
    open: r?.open ?? 0,
    measured: r?.measured ?? 0,
    p50Ms: round(r?.p50),
    p95Ms: round(r?.p95),
    maxMs: round(r?.max),
    slowest:
      r?.slow_id && r.slow_executor && r.slow_cause && r.slow_declared && r.slow_recovery
        ? {
            timelineId: Number(r.slow_id),
            executorId: r.slow_executor,
            cause: r.slow_cause,
            declaredAt: r.slow_declared,
            firstRecoveryId: Number(r.slow_recovery),
          }
        : null,
  };
}
