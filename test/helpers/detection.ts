import type pg from 'pg';
import { expect } from 'vitest';
import { LIVENESS_KEY_SQL, livenessHeldSql } from '../../packages/executor/src/contract/livenessKey.js';
import { runReaper, type ReaperSummary } from '../../shared/reaper/index.js';
import type { ReaperDeps, TickResult } from '../../shared/reaper/types.js';
import { waitFor } from './db.js';

/**
 * Shared pieces of the false-death suites (test/integration/detection): a reaper ticking in the
 * background with every tick kept, and the three checks of "nobody was declared dead by mistake".
 */
export interface TickSeen {
  at: number;
  r: TickResult;
}

export interface RunningReaper {
  ticks: TickSeen[];
  /** Ticks whose dead pass ran after `since` with both witnesses usable (Redis kept its keys, locks are evidence). */
  fullEvidenceTicksSince(since: number): TickSeen[];
  stop(): Promise<Extract<ReaperSummary, { outcome: 'completed' }>>;
}

export function startReaper(deps: ReaperDeps): RunningReaper {
  const ticks: TickSeen[] = [];
  const stop = new AbortController();
  const done = runReaper(deps, { signal: stop.signal, onTick: (r) => ticks.push({ at: Date.now(), r }) });
  return {
    ticks,
    fullEvidenceTicksSince: (since) =>
      ticks.filter(({ at, r }) => at >= since && r.dead.kind === 'ran' && r.dead.heartbeat === 'checked' && r.dead.liveness === 'checked'),
    stop: async () => {
      stop.abort();
      const s = await done;
      if (s.outcome !== 'completed') throw new Error(`reaper skipped: ${s.reason}`);
      return s;
    },
  };
}

/** Whether every one of `ids` was judged alive on this tick (a tick whose dead pass failed judged nobody). */
export function judgedAlive({ r }: TickSeen, ids: string[]): boolean {
  const dead = r.dead;
  return dead.kind === 'ran' && ids.every((id) => dead.liveOwners.includes(id));
}

/** Whether the executor's liveness lock is held, and by which backend (pg_locks, as the reaper reads it). */
export async function livenessHolder(
  sql: pg.Pool,
  app: string,
  executorId: string,
): Promise<{ pid: number; applicationName: string } | undefined> {
  const held = await sql.query<{ held: boolean }>(`SELECT ${livenessHeldSql('afterlife', '$1::text', '$2::text')} AS held`, [
    app,
    executorId,
  ]);
  if (!held.rows[0]?.held) return undefined;
  const r = await sql.query<{ pid: number; application_name: string }>(
    `SELECT l.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid = ((${LIVENESS_KEY_SQL.key('$1::text', '$2::text')} >> 32) & 4294967295)::oid
        AND l.objid = (${LIVENESS_KEY_SQL.key('$1::text', '$2::text')} & 4294967295)::oid`,
    [app, executorId],
  );
  const row = r.rows[0];
  return row ? { pid: row.pid, applicationName: row.application_name } : undefined;
}

export function waitForLock(sql: pg.Pool, app: string, executorId: string, o: { notPid?: number; timeoutMs?: number } = {}) {
  return waitFor(
    `the liveness lock of ${executorId}${o.notPid ? ` on a new session (not ${o.notPid})` : ''}`,
    async () => {
      const h = await livenessHolder(sql, app, executorId);
      return h && h.pid !== o.notPid ? h : undefined;
    },
    { timeoutMs: o.timeoutMs ?? 15_000, intervalMs: 50 },
  );
}

/** (workflow, step) pairs whose body started more than once, with the executors that started them. */
export async function stepsStartedTwice(
  sql: pg.Pool,
  ids: string[],
): Promise<Array<{ workflow_id: string; step: number; starts: string[] }>> {
  const r = await sql.query<{ workflow_id: string; step: number; starts: string[] }>(
    `SELECT workflow_id, step, array_agg(executor_id ORDER BY at) AS starts FROM public.step_runs
      WHERE phase = 'start' AND workflow_id = ANY($1) GROUP BY 1, 2 HAVING count(*) > 1 ORDER BY 1, 2`,
    [ids],
  );
  return r.rows;
}

/**
 * The live executors' work is untouched: every workflow still on the executor that started it (PENDING,
 * or finished there), no recovery of any live executor, no step body started twice.
 */
export async function expectUntouched(sql: pg.Pool, owned: Record<string, string[]>): Promise<void> {
  const ids = Object.values(owned).flat();
  const rows = await sql.query<{ workflow_uuid: string; status: string; executor_id: string }>(
    `SELECT workflow_uuid, status, executor_id FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) ORDER BY 1`,
    [ids],
  );
  const expected = Object.entries(owned)
    .flatMap(([executorId, wfs]) => wfs.map((id) => ({ workflow_uuid: id, executor_id: executorId })))
    .sort((a, b) => a.workflow_uuid.localeCompare(b.workflow_uuid));
  expect(rows.rows.map(({ workflow_uuid, executor_id }) => ({ workflow_uuid, executor_id }))).toEqual(expected);
  for (const row of rows.rows) expect(['PENDING', 'SUCCESS']).toContain(row.status);
  const recovered = await sql.query(`SELECT executor_id, reason FROM afterlife.recoveries WHERE executor_id = ANY($1)`, [
    Object.keys(owned),
  ]);
  expect(recovered.rows).toEqual([]);
  const dead = await sql.query(`SELECT executor_id FROM afterlife.executors WHERE executor_id = ANY($1) AND state = 'dead'`, [
    Object.keys(owned),
  ]);
  expect(dead.rows).toEqual([]);
  expect(await stepsStartedTwice(sql, ids)).toEqual([]);
}

export async function finishedOnOwners(sql: pg.Pool, owned: Record<string, string[]>, timeoutMs = 60_000): Promise<void> {
  const ids = Object.values(owned).flat();
  await waitFor(
    `every workflow finishes on its own executor`,
    async () => {
      const r = await sql.query<{ workflow_uuid: string; status: string; executor_id: string }>(
        `SELECT workflow_uuid, status, executor_id FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`,
        [ids],
      );
      return r.rows.length === ids.length && r.rows.every((x) => x.status === 'SUCCESS');
    },
    { timeoutMs },
  );
  await expectUntouched(sql, owned);
}
