import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import pg from 'pg';
import type { Logger } from '../packages/executor/src/log.js';
import { type AgentExecutor, startAgentExecutor } from '../scripts/stack/executor.js';
import { type Stack, startStack } from '../scripts/stack/index.js';
import { createDbosDatabase, dropDatabase } from './lib.js';

/**
 * What the benches that kill an executor and time its recovery share (bench/detection, bench/vanish): the
 * local stack as `npm start` runs it at Terraform's FUNCTION_TIMEOUT_S on a throwaway database, the
 * step_runs table the agent app writes its steps to, and executors with the kit, all stopped at the end.
 * One place, so both benches measure the same deployment.
 */
export interface KillBench {
  app: string;
  url: string;
  sql: pg.Pool;
  stack: Stack;
  /** The load average before the stack started. */
  load0: number[];
  /** The kit's environment for an executor joining this stack, `extra` over it. */
  kitEnv(extra?: Record<string, string>): Record<string, string>;
  /** An agent-app executor of version v1 (on `databaseUrl`, the bench's database by default), stopped by stop(). */
  startExecutor(executorId: string, env: Record<string, string>, databaseUrl?: string): Promise<AgentExecutor>;
  /** Waits for the steady state: Redis has kept its keys for a TTL, as in production (a missing key is evidence only then). */
  settle(): Promise<void>;
  /** Stops the executors, then `afterExecutors` (what the bench put between them and the database), then the rest. */
  stop(afterExecutors?: () => Promise<void>): Promise<void>;
}

export async function startKillBench(name: string, o: { scheduleMs: number; logger: Logger }): Promise<KillBench> {
  const app = `bench-${name}-${randomBytes(3).toString('hex')}`;
  const dbName = `afterlife_bench_${name}_${process.pid}`;
  const url = await createDbosDatabase(dbName);
  const sql = new pg.Pool({ connectionString: url, max: 2 });
  const load0 = loadavg();
  const stack = await startStack({
    env: {
      ...process.env,
      DATABASE_URL: url,
      REDIS_URL: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
      DBOS_APPLICATION_NAME: app,
      REDIS_KEY_PREFIX: `afterlife-bench-${process.pid}`,
      FUNCTION_TIMEOUT_S: '150',
      LOG_LEVEL: 'WARNING',
    },
    scheduleMs: o.scheduleMs,
    logger: o.logger,
  });
  const executors: AgentExecutor[] = [];
  const stop = async (afterExecutors?: () => Promise<void>) => {
    await Promise.all(executors.map((e) => e.stop()));
    await afterExecutors?.();
    await stack.stop();
    await sql.end();
    await dropDatabase(dbName);
  };
  try {
    await sql.query(
      `CREATE TABLE IF NOT EXISTS public.step_runs (workflow_id text NOT NULL, step integer NOT NULL, executor_id text NOT NULL, phase text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    app,
    url,
    sql,
    stack,
    load0,
    kitEnv: (extra = {}) => ({
      ...stack.env,
      AFTERLIFE_KIT: 'on',
      DBOS_APP_NAME: app,
      REDIS_KEY_PREFIX: stack.env.REDIS_KEY_PREFIX ?? 'afterlife',
      ...extra,
      ...(stack.pubsub.kind === 'emulator' ? {} : { AFTERLIFE_PUBLISH: 'none' }),
    }),
    startExecutor: async (executorId, env, databaseUrl = url) => {
      const e = await startAgentExecutor({ databaseUrl, applicationName: app, applicationVersion: 'v1', executorId, env });
      executors.push(e);
      return e;
    },
    settle: () => new Promise((r) => setTimeout(r, 16_000)),
    stop,
  };
}

/** Polls every 25 ms until the probe answers, or throws once `timeoutMs` has passed. */
export async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined | false>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * One source of truth (issue 29): when the death's own timeline says its first moved step started, as epoch
 * ms; NaN when no timeline of `executorId` closed within 30 s. The benches print it beside what they saw.
 */
export async function timelineFirstStepAt(sql: pg.Pool, executorId: string): Promise<number> {
  return until(`${executorId}'s timeline closed`, 30_000, async () => {
    const r = await sql.query<{ t: Date | null }>(
      `SELECT first_step_elsewhere_at AS t FROM afterlife.timelines WHERE executor_id = $1 AND closed_at IS NOT NULL ORDER BY id DESC LIMIT 1`,
      [executorId],
    );
    return r.rows[0] ? (r.rows[0].t?.getTime() ?? NaN) : undefined;
  }).catch(() => NaN);
}

/** The line both benches print: how far the timeline's first step elsewhere lies from the bench's own observation. */
export function timelineAgreement(pairs: Array<{ timelineMs: number | undefined; outsideMs: number | undefined }>): string {
  const apart = pairs
    .filter((p): p is { timelineMs: number; outsideMs: number } => p.timelineMs !== undefined && p.outsideMs !== undefined)
    .map((p) => p.timelineMs - p.outsideMs)
    .filter((d) => !Number.isNaN(d));
  const sorted = [...apart].sort((a, b) => a - b);
  const mid = sorted.length ? sorted[Math.floor(sorted.length / 2)]! : NaN;
  return (
    `timeline − outside observation, first step elsewhere: ${apart.length} of ${pairs.length} deaths closed; ` +
    (apart.length ? `median ${mid.toFixed(0)} ms, largest |Δ| ${Math.max(...apart.map(Math.abs)).toFixed(0)} ms` : 'none')
  );
}
