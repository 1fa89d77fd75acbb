import type pg from 'pg';
import type { Fault } from './chaosFleet.js';
import { quantile } from './fleetStats.js';

/**
 * What bench/chaos reads from the database at the end of a run: the example app's own record of every step's
 * start and end (public.step_runs, the database's clock), DBOS's checkpoints and workflow status, and the
 * plane's declarations (afterlife.recoveries, the executors registry). Nothing here asks an executor.
 */

/** A step that started again after a run of it had ended. */
export interface ReRun {
  workflowId: string;
  step: number;
  endedBy: string;
  endedAt: string;
  againBy: string;
  againAt: string;
  /** Its checkpoint was written before it started again: never allowed. */
  checkpointed: boolean;
}

/**
 * A row an executor wrote of a workflow after another executor had started on it (its first row there). A
 * `start` row is an overlap: a second step body begun beside the replacement. An `end` row alone is the
 * tail of the step that was in flight when the process stopped: its body finishes on wake, before the fence
 * exits the process (docs/liveness.md, "What a freeze means").
 */
export interface LateRow {
  workflowId: string;
  executorId: string;
  step: number;
  phase: 'start' | 'end';
  at: string;
  /** The executor that had started on the workflow, and when. */
  after: { executorId: string; at: string };
  /** Every row of the workflow, `executor step phase time`, in order: what ran where, and when. */
  rows: string[];
}

export interface Declaration {
  executorId: string;
  at: string;
  how: string;
}

/** Every (workflow, step) whose `end` row precedes a `start` row of it, and whether its output was checkpointed first. */
export async function reRuns(sql: pg.Pool, died: Set<string>): Promise<ReRun[]> {
  const r = await sql.query<{ w: string; s: number; eby: string; eat: Date; aby: string; aat: Date; ck: string | null }>(
    `SELECT DISTINCT ON (e.workflow_id, e.step) e.workflow_id AS w, e.step AS s, e.executor_id AS eby, e.at AS eat,
            a.executor_id AS aby, a.at AS aat, o.completed_at_epoch_ms::text AS ck
       FROM public.step_runs e
       JOIN public.step_runs a ON a.workflow_id = e.workflow_id AND a.step = e.step AND a.phase = 'start' AND a.at > e.at
       LEFT JOIN dbos.operation_outputs o ON o.workflow_uuid = e.workflow_id AND o.function_name = 'step-' || e.step
      WHERE e.phase = 'end'
      ORDER BY e.workflow_id, e.step, a.at`,
  );
  return r.rows.map((x) => ({
    workflowId: x.w,
    step: x.s,
    endedBy: x.eby,
    endedAt: x.eat.toISOString(),
    againBy: x.aby,
    againAt: x.aat.toISOString(),
    // DBOS checkpoints a step's output after its body returns: a process that died between its `end` row and
    // that checkpoint ran a step DBOS never saw finish (at-least-once, by design). Anything else is a bug.
    checkpointed: (x.ck !== null && Number(x.ck) <= x.aat.getTime()) || !died.has(x.eby),
  }));
}

export async function lateRows(sql: pg.Pool): Promise<LateRow[]> {
  const r = await sql.query<{ w: string; e: string; step: number; phase: 'start' | 'end'; at: Date; l: string; lf: Date }>(
    `WITH first AS (SELECT workflow_id, executor_id, min(at) AS f FROM public.step_runs GROUP BY 1, 2)
     SELECT r.workflow_id AS w, r.executor_id AS e, r.step, r.phase, r.at, l.executor_id AS l, l.f AS lf
       FROM first e
       JOIN first l ON l.workflow_id = e.workflow_id AND l.executor_id <> e.executor_id AND e.f < l.f
       JOIN public.step_runs r ON r.workflow_id = e.workflow_id AND r.executor_id = e.executor_id AND r.at > l.f
      ORDER BY r.at`,
  );
  const out: LateRow[] = [];
  for (const x of r.rows) {
    const rows = await sql.query<{ line: string }>(
      `SELECT executor_id || ' ' || step || ' ' || phase || ' ' || to_char(at AT TIME ZONE 'UTC', 'HH24:MI:SS.MS') AS line
         FROM public.step_runs WHERE workflow_id = $1 ORDER BY at`,
      [x.w],
    );
    out.push({
      workflowId: x.w,
      executorId: x.e,
      step: x.step,
      phase: x.phase,
      at: x.at.toISOString(),
      after: { executorId: x.l, at: x.lf.toISOString() },
      rows: rows.rows.map((l) => l.line),
    });
  }
  return out;
}

/** Every executor the plane declared, in the recoveries or the registry, with the earliest moment. */
export async function declarations(sql: pg.Pool, app: string): Promise<Declaration[]> {
  const r = await sql.query<{ id: string; at: Date; how: string }>(
    `SELECT executor_id AS id, min(at) AS at, string_agg(DISTINCT how, ', ') AS how FROM (
       SELECT executor_id, started_at AS at, 'recovery: ' || reason AS how FROM afterlife.recoveries WHERE application_name = $1
       UNION ALL
       SELECT executor_id, state_changed_at, 'registry: dead' FROM afterlife.executors WHERE application_name = $1 AND state = 'dead') d
      GROUP BY 1 ORDER BY 2`,
    [app],
  );
  return r.rows.map((x) => ({ executorId: x.id, at: x.at.toISOString(), how: x.how }));
}

/** Statuses of the workflows the bench sent (accepted, or written by DBOS though the answer never came). */
export async function statuses(sql: pg.Pool, ids: string[]): Promise<Map<string, string>> {
  const r = await sql.query<{ id: string; status: string }>(
    `SELECT workflow_uuid AS id, status FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`,
    [ids],
  );
  return new Map(r.rows.map((x) => [x.id, x.status]));
}

export interface Latency {
  kind: string;
  executorId: string;
  /** Fault → the plane's first declaration of it; null when never declared. */
  declaredMs: number | null;
  /** Fault → the first step another executor started of a workflow the victim had run; null when none moved. */
  firstStepMs: number | null;
}

/** For each fault that ends a process: when it was declared, and when its work first ran elsewhere. */
export async function latencies(sql: pg.Pool, faults: Fault[], declared: Declaration[]): Promise<Latency[]> {
  const out: Latency[] = [];
  for (const f of faults.filter((x) => x.kind !== 'freeze')) {
    const r = await sql.query<{ t: Date | null }>(
      `SELECT min(o.at) AS t FROM public.step_runs o
        WHERE o.phase = 'start' AND o.executor_id <> $1 AND o.at > to_timestamp($2 / 1000.0)
          AND o.workflow_id IN (SELECT workflow_id FROM public.step_runs WHERE executor_id = $1)`,
      [f.executorId, f.at],
    );
    const d = declared.find((x) => x.executorId === f.executorId);
    out.push({
      kind: f.kind,
      executorId: f.executorId,
      declaredMs: d ? new Date(d.at).getTime() - f.at : null,
      firstStepMs: r.rows[0]?.t ? r.rows[0].t.getTime() - f.at : null,
    });
  }
  return out;
}

export interface Spread {
  n: number;
  p50: number | null;
  p95: number | null;
  max: number | null;
}

export function spread(xs: Array<number | null>): Spread {
  const v = xs.filter((x): x is number => x !== null);
  if (!v.length) return { n: 0, p50: null, p95: null, max: null };
  return { n: v.length, p50: quantile(v, 0.5), p95: quantile(v, 0.95), max: Math.max(...v) };
}
