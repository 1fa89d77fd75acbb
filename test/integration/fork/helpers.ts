import { DBOSClient } from '@dbos-inc/dbos-sdk';
import type pg from 'pg';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { budgetFrom } from '../../../shared/lifecycle/deadline.js';
import { recoverExecutor } from '../../../shared/recovery/recoverExecutor.js';
import { runReaper, type ReaperSummary } from '../../../shared/reaper/index.js';
import { runTick } from '../../../shared/reaper/tick.js';
import type { ReaperState, TickResult } from '../../../shared/reaper/types.js';
import type { Runtime } from '../../../shared/runtime.js';
import { waitFor } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { testReaperDeps } from '../../helpers/reaper.js';

/** Shared by the fork suites: start workflows by name through DBOS's client, and wait on their status. */
export const FORK_QUEUE = 'forktest';
export const QUEUES = { [FORK_QUEUE]: {} };

export { dbosClient } from '../../helpers/repair.js';

/** An executor of the example app on the fork suites' queue, stopped with the fixture. */
export async function startForkExecutor(
  f: { tdb: { url: string }; app: string; executors: ExecutorHandle[] },
  executorId: string,
  applicationVersion = 'v1',
): Promise<ExecutorHandle> {
  const e = await startExecutor({ databaseUrl: f.tdb.url, applicationName: f.app, applicationVersion, executorId, queues: QUEUES });
  f.executors.push(e);
  return e;
}

export async function enqueue(
  client: DBOSClient,
  workflowName: string,
  workflowID: string,
  appVersion: string,
  ...args: unknown[]
): Promise<void> {
  await client.enqueue({ queueName: FORK_QUEUE, workflowName, workflowID, appVersion }, ...args);
}

export async function statusOf(sql: pg.Pool, id: string): Promise<string | undefined> {
  const r = await sql.query<{ status: string }>(`SELECT status FROM dbos.workflow_status WHERE workflow_uuid = $1`, [id]);
  return r.rows[0]?.status;
}

export function waitStatus(sql: pg.Pool, id: string, want: string, timeoutMs = 45_000): Promise<string> {
  return waitFor(`${id} ${want}`, async () => ((await statusOf(sql, id)) === want ? want : undefined), { timeoutMs });
}

/** How many times a step body started, per workflow (public.step_runs, written by the example app). */
export async function stepStarts(sql: pg.Pool, workflowId: string, step: number): Promise<number> {
  const r = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM public.step_runs WHERE workflow_id = $1 AND step = $2 AND phase = 'start'`,
    [workflowId, step],
  );
  return r.rows[0]?.n ?? 0;
}

export async function hasCheckpoint(sql: pg.Pool, workflowId: string, functionId: number): Promise<boolean> {
  const r = await sql.query(`SELECT 1 FROM dbos.operation_outputs WHERE workflow_uuid = $1 AND function_id = $2`, [workflowId, functionId]);
  return (r.rowCount ?? 0) > 0;
}

export async function forksOf(sql: pg.Pool, source: string): Promise<string[]> {
  const r = await sql.query<{ workflow_uuid: string }>(`SELECT workflow_uuid FROM dbos.workflow_status WHERE forked_from = $1 ORDER BY 1`, [
    source,
  ]);
  return r.rows.map((x) => x.workflow_uuid);
}

export type CompletedReap = Extract<ReaperSummary, { outcome: 'completed' }>;

/**
 * One invocation of the real reaper (lease, ticks, its diverged pass, shared/reaper/deps.ts's autoFork),
 * as Scheduler would start it. Throws if another invocation holds the lease.
 */
export async function reap(rt: Runtime, o: { maxTicks?: number; signal?: AbortSignal } = { maxTicks: 1 }): Promise<CompletedReap> {
  const s = await runReaper(testReaperDeps(rt), o);
  if (s.outcome !== 'completed') throw new Error(`reaper skipped: ${s.reason}`);
  return s;
}

/**
 * One tick of the real reaper without the lease: what a second reaper does when its lease expired and was
 * taken over while its tick still ran (the lease makes reapers single-flight, it is no fence). The fork
 * module's own fences must hold against it.
 */
export function reaperTick(rt: Runtime, state: ReaperState, tick = 1): Promise<TickResult> {
  const budget = budgetFrom(rt.clock(), rt.config.functionTimeoutS, rt.config.budgetMarginMs, rt.clock);
  return runTick(testReaperDeps(rt, { detectedBy: 'reaper-racing' }), { tick, dryRun: false, planned: [], budget }, state);
}

/** Every fork in the database as `fork <- source`, sorted: what the whole run forked, and nothing else. */
export async function allForks(sql: pg.Pool): Promise<string[]> {
  const r = await sql.query<{ f: string }>(
    `SELECT workflow_uuid || ' <- ' || forked_from AS f FROM dbos.workflow_status WHERE forked_from IS NOT NULL ORDER BY 1`,
  );
  return r.rows.map((x) => x.f);
}

/** The fork ledger of one root, in order. */
export async function ledgerOf(sql: pg.Pool, root: string): Promise<Array<Record<string, unknown>>> {
  const r = await sql.query(
    `SELECT n, source_workflow_id AS source, new_workflow_id AS fork, from_step, reason, child_fork_id
       FROM afterlife.forks WHERE root_workflow_id = $1 ORDER BY n`,
    [root],
  );
  return r.rows;
}

/**
 * Real reaper invocations back to back (each ticking every REAPER_TICK_MS, as deployed) until `done`, then
 * stopped through their shutdown signal. Bounded by `timeoutMs`; an invocation that fails fails the wait.
 */
export async function reapUntil(rt: Runtime, what: string, done: () => Promise<boolean>, timeoutMs = 45_000): Promise<number> {
  const ac = new AbortController();
  let failure: unknown;
  let invocations = 0;
  const loop = (async () => {
    while (!ac.signal.aborted) {
      await reap(rt, { signal: ac.signal });
      invocations += 1;
    }
  })().catch((err: unknown) => {
    failure = err;
  });
  try {
    await waitFor(
      what,
      async () => {
        if (failure) throw failure;
        return done();
      },
      { timeoutMs },
    );
  } finally {
    ac.abort();
    await loop;
  }
  if (failure) throw failure instanceof Error ? failure : new Error(String(failure));
  return invocations;
}

/**
 * How the divergence suites make a replay diverge: the choice rows are flipped to 'b', exec-A is
 * SIGKILLed, exec-B (same version) starts, exec-A's death is recovered through the real recovery, and
 * `waitError` are awaited in ERROR. Returns exec-B.
 */
export async function divergeOnB(
  rt: Runtime,
  a: ExecutorHandle,
  o: { databaseUrl: string; applicationName: string; choices: string[]; waitError: string[]; sql: pg.Pool },
): Promise<ExecutorHandle> {
  await o.sql.query(`INSERT INTO public.divergent_choice SELECT unnest($1::text[]), 'b'`, [o.choices]);
  a.kill('SIGKILL');
  await a.exited;
  const b = await startExecutor({
    databaseUrl: o.databaseUrl,
    applicationName: o.applicationName,
    applicationVersion: 'v1',
    executorId: 'exec-B',
    queues: QUEUES,
  });
  await recoverExecutor(
    { db: rt.db, redis: undefined, lock: undefined, logger: rt.logger, batchSize: 100, lockTtlMs: 5_000, clock: Date.now },
    deathNotice({ executorId: 'exec-A', applicationName: o.applicationName, reason: 'manual', detectedBy: 'test' }),
  );
  for (const id of o.waitError) await waitStatus(o.sql, id, 'ERROR');
  return b;
}
