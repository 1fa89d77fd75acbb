import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BudgetExhaustedError } from '../../../packages/executor/src/errors.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { Lifecycle } from '../../../packages/executor/src/lifecycle/orderedShutdown.js';
import { RedisLock } from '../../../shared/lock/lock.js';
import { createRedis } from '../../../packages/executor/src/lock/redis.js';
import { silentLogger } from '../../../packages/executor/src/log.js';
import { recoverExecutor } from '../../../shared/recovery/recoverExecutor.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { FUNCTIONS_FRAMEWORK_MAIN } from '../../helpers/kit.js';
import { freePort, TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * shared/lifecycle for afterlife's own functions: a SIGTERM mid-recovery stops the loop at a batch
 * boundary, the lock is released and the audit written before Redis and the pool close (in reverse
 * order); and under functions-framework, whose SIGTERM listener exits at once, cleanup still completes.
 */
describe('lifecycle: SIGTERM in afterlife functions', () => {
  let tdb: TestDatabase;
  let probe: Redis;
  const app = uniqueName('app-lc');

  beforeAll(async () => {
    tdb = await createTestDatabase();
    probe = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    probe?.disconnect();
    await tdb?.drop();
  });

  it('stops at a batch boundary, releases the lock, then closes Redis and the pool in reverse order', async () => {
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name)
       SELECT 'lc-' || i, 'PENDING', 'agentWorkflow', 'exec-dead', 'v1', $1 FROM generate_series(1, 3) AS i`,
      [app],
    );
    const lc = new Lifecycle();
    const order: string[] = [];
    const db = afterlifeDb(tdb.url);
    const redis = createRedis(TEST_REDIS_URL);
    lc.onShutdown('postgres', async () => {
      order.push('postgres');
      await db.end();
    });
    lc.onShutdown('redis', async () => {
      order.push('redis');
      await redis.quit();
    });
    const faults = new FaultInjector().onNth('recover.afterBatch', 1, () => {
      order.push('SIGTERM');
      void lc.shutdown(); // what the signal handler does
    });
    const notice = deathNotice({ executorId: 'exec-dead', applicationName: app, reason: 'manual', detectedBy: 'test' });
    const work = lc.track(
      recoverExecutor(
        { db, redis, lock: new RedisLock(redis), logger: silentLogger(), faults, batchSize: 1, lockTtlMs: 5_000, clock: Date.now },
        notice,
        {
          signal: lc.signal,
        },
      ),
    );
    await expect(work).rejects.toBeInstanceOf(BudgetExhaustedError);
    await lc.shutdown();
    expect(order).toEqual(['SIGTERM', 'redis', 'postgres']);
    expect(await probe.exists(`afterlife:${app}:recover:exec-dead`)).toBe(0);
    const audit = await tdb.sql.query(`SELECT outcome, reenqueued, batches FROM afterlife.recoveries WHERE executor_id = 'exec-dead'`);
    expect(audit.rows).toEqual([{ outcome: 'partial', reenqueued: 1, batches: 1 }]);
    const left = await tdb.sql.query(
      `SELECT count(*)::int AS n FROM dbos.workflow_status WHERE status = 'PENDING' AND executor_id = 'exec-dead'`,
    );
    expect(left.rows[0]).toEqual({ n: 2 });
  });

  it('handlers installed after functions-framework began listening still run before its exit', async () => {
    // The fixture installs them on its first request; the framework's own listener, registered once it
    // listens, calls process.exit() synchronously. Served from source through tsx.
    const port = await freePort();
    const fixture = fileURLToPath(new URL('./fixtures/lateSignals.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', FUNCTIONS_FRAMEWORK_MAIN, `--source=${fixture}`, '--target=late'], {
      cwd: fileURLToPath(new URL('../../..', import.meta.url)),
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, PORT: String(port), METADATA_SERVER_DETECTION: 'none' },
    });
    const out: string[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b.toString()));
    child.stderr.on('data', (b: Buffer) => out.push(b.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      await waitFor('handlers installed by the first request', async () => {
        if (child.exitCode !== null) throw new Error(`functions-framework exited ${child.exitCode}:\n${out.join('')}`);
        const r = await fetch(`http://127.0.0.1:${port}/`).catch(() => undefined);
        return r?.status === 200;
      });
      child.kill('SIGTERM');
      expect(await exited, out.join('')).toBe(0);
      const log = out.join('');
      expect(log).toContain('SIGTERM: shutting down');
      expect(log).toContain('closer ran');
      expect(log).toContain('shutdown complete');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('under functions-framework, SIGTERM waits for cleanup instead of exiting at once', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, [FUNCTIONS_FRAMEWORK_MAIN, '--target=drain'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        PORT: String(port),
        DATABASE_URL: tdb.url,
        DBOS_APPLICATION_NAME: app,
        REDIS_URL: TEST_REDIS_URL,
        METADATA_SERVER_DETECTION: 'none',
      },
    });
    const out: string[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b.toString()));
    child.stderr.on('data', (b: Buffer) => out.push(b.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      const res = await waitFor('drain function up', async () => {
        if (child.exitCode !== null) throw new Error(`functions-framework exited ${child.exitCode}:\n${out.join('')}`);
        const r = await fetch(`http://127.0.0.1:${port}/?applicationVersion=v1`).catch(() => undefined);
        return r?.status === 200 ? r : undefined;
      });
      expect(((await res.json()) as { executors: unknown[] }).executors).toEqual([]);
      const sessions = async () =>
        (
          await tdb.sql.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'afterlife'`,
          )
        ).rows[0]?.n;
      expect(await sessions()).toBeGreaterThan(0);
      const t0 = Date.now();
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(Date.now() - t0).toBeLessThan(8_000);
      const log = out.join('');
      expect(log).toContain('SIGTERM: shutting down');
      expect(log).toContain('shutdown complete');
      expect(log).not.toContain('shutdown step');
      expect(await sessions()).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
