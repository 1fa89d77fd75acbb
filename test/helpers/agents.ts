import type pg from 'pg';
import { deathNotice } from '../../packages/executor/src/contract/deathNotice.js';
import { recoverExecutor, type RecoverySummary } from '../../shared/recovery/recoverExecutor.js';
import type { Runtime } from '../../shared/runtime.js';
import { heartbeatKey, writeHeartbeat } from '../../packages/executor/src/contract/heartbeat.js';
import { waitReady } from '../../packages/executor/src/lock/redis.js';
import type { Redis } from 'ioredis';
import { waitFor } from './db.js';
import { startExecutor } from './executor.js';

/** Writes a heartbeat exactly as the executor kit does (for suites that test consumers of the contract). */
export async function beat(
  redis: Redis,
  app: string,
  executorId: string,
  version: string,
  ttlMs = 60_000,
  state: 'alive' | 'draining' | 'drained' = 'alive',
): Promise<void> {
  const now = new Date().toISOString();
  await waitReady(redis, 2_000);
  await writeHeartbeat(
    redis,
    { executorId, applicationName: app, applicationVersion: version, state, startedAt: now, beatAt: now, inFlight: 0 },
    ttlMs,
  );
}

export async function pendingIds(sql: pg.Pool, executorId: string): Promise<string[]> {
  const r = await sql.query<{ workflow_uuid: string }>(
    `SELECT workflow_uuid FROM dbos.workflow_status WHERE status = 'PENDING' AND executor_id = $1 ORDER BY 1`,
    [executorId],
  );
  return r.rows.map((x) => x.workflow_uuid);
}

export async function checkpointCount(sql: pg.Pool): Promise<number> {
  const r = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM dbos.operation_outputs`);
  return r.rows[0]?.n ?? 0;
}

export async function waitAllSuccess(sql: pg.Pool, ids: string[], timeoutMs = 60_000): Promise<void> {
  await waitFor(
    `${ids.length} workflows SUCCESS`,
    async () => {
      const r = await sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) AND status = 'SUCCESS'`,
        [ids],
      );
      return r.rows[0]?.n === ids.length;
    },
    { timeoutMs },
  );
}

/** The IDs afterlife's audit says it re-enqueued, one entry per re-enqueue. */
export async function auditedIds(sql: pg.Pool, executorId?: string): Promise<string[]> {
  const r = await sql.query<{ id: string }>(
    `SELECT unnest(b.workflow_ids) AS id FROM afterlife.recovery_batches b JOIN afterlife.recoveries r ON r.id = b.recovery_id
      WHERE $1::text IS NULL OR r.executor_id = $1 ORDER BY 1`,
    [executorId ?? null],
  );
  return r.rows.map((x) => x.id);
}

/**
 * Real orphans: a real DBOS executor starts `n` workflows whose steps outlast the test, then is SIGKILLed,
 * leaving its rows PENDING under its executor ID exactly as a dead Cloud Run instance does.
 */
export async function makeOrphans(o: {
  databaseUrl: string;
  sql: pg.Pool;
  applicationName: string;
  executorId: string;
  applicationVersion: string;
  ids: string[];
  queueName?: string;
  /** Long enough that nothing completes before the kill, short enough that a recovered run finishes. */
  stepMs?: number;
}): Promise<void> {
  const e = await startExecutor({
    databaseUrl: o.databaseUrl,
    applicationName: o.applicationName,
    applicationVersion: o.applicationVersion,
    executorId: o.executorId,
    ...(o.queueName ? { queues: { [o.queueName]: {} } } : {}),
  });
  try {
    for (const id of o.ids) await e.start(id, { steps: 2, stepMs: o.stepMs ?? 4_000 }, o.queueName);
    await waitFor(`${o.ids.length} PENDING on ${o.executorId}`, async () => {
      const r = await o.sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) AND status = 'PENDING' AND executor_id = $2`,
        [o.ids, o.executorId],
      );
      return r.rows[0]?.n === o.ids.length;
    });
  } finally {
    await e.stop();
  }
}

/**
 * Once `liveExecutorId`'s kit beats, recovers the dead executor's rows through the real recovery: with
 * only another version alive they are re-enqueued on a version nobody runs (orphaned). Throws on a false alarm.
 */
export async function orphanThroughRecovery(
  rt: Runtime,
  o: { applicationName: string; deadExecutorId: string; liveExecutorId: string },
): Promise<Exclude<RecoverySummary, { outcome: 'false-alarm' }>> {
  await waitFor(
    `the ${o.liveExecutorId} kit beats`,
    async () => (await rt.redis?.exists(heartbeatKey(o.applicationName, o.liveExecutorId))) === 1,
  );
  const summary = await recoverExecutor(
    { db: rt.db, redis: rt.redis, lock: rt.lock, logger: rt.logger, batchSize: 100, lockTtlMs: 10_000, clock: Date.now },
    deathNotice({ executorId: o.deadExecutorId, applicationName: o.applicationName, reason: 'manual', detectedBy: 'test' }),
  );
  if (summary.outcome === 'false-alarm') throw new Error(`recovery of ${o.deadExecutorId}: false alarm`);
  return summary;
}

/**
 * Registry rows (state `alive`, no liveness lock, no heartbeat) for executors a suite sends notices about
 * without giving them workflows: a notice about an executor with no row and nothing PENDING is refused
 * as unknown (issue 23), so suites that exercise the recovery path make them known first.
 */
export async function knownExecutors(sql: pg.Pool, applicationName: string, executorIds: string[]): Promise<void> {
  await sql.query(
    `INSERT INTO afterlife.executors (application_name, executor_id, state) SELECT $1, id, 'alive' FROM unnest($2::text[]) AS id ON CONFLICT DO NOTHING`,
    [applicationName, executorIds],
  );
}
