import { createServer, type Server, type Socket } from 'node:net';
import { DBOS } from '@dbos-inc/dbos-sdk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachExecutor } from '../../../packages/executor/src/runtime/index.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { freePort } from '../../helpers/services.js';

/**
 * A Redis that accepts connections and never answers, reached through a client that queues commands
 * until it is ready (ioredis's defaults, which an app may pass as `redis`): every heartbeat write hangs.
 * Each beat is bounded by TTL/3, so attachExecutor returns, later beats still come (each logged as
 * failed), the Postgres drain-request poll is not held up behind them, and close() completes. DBOS runs
 * in this test process: the kit needs a launched app, and only an in-process kit can be given a client.
 */
const TTL_MS = 1_500;

/** Fails with `what` if `p` has not settled within `ms`: a hang is the failure under test. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms))),
  ]).finally(() => clearTimeout(timer));
}

describe('executor kit: a Redis that never answers', () => {
  let tdb: TestDatabase;
  let server: Server;
  let redis: Redis;
  const sockets = new Set<Socket>();
  const app = uniqueName('app-hung');

  beforeAll(async () => {
    tdb = await createTestDatabase();
    const port = await freePort();
    server = createServer((s) => {
      sockets.add(s);
      s.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
    redis = new Redis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: null });
    redis.on('error', () => undefined);
    DBOS.setConfig({
      name: app,
      systemDatabaseUrl: tdb.url,
      executorID: 'exec-hung',
      applicationVersion: 'v1',
      runMigrations: false,
      logLevel: 'warn',
    });
    await DBOS.launch();
  });
  afterAll(async () => {
    if (DBOS.isInitialized()) await DBOS.shutdown({ workflowCompletionTimeoutMS: 0 });
    redis?.disconnect();
    sockets.forEach((s) => s.destroy());
    await new Promise((r) => server?.close(r));
    await tdb?.drop();
  });

  it('attach returns, beats keep coming, a drain request is still seen, close completes', async () => {
    // Proof that the client hangs rather than fails: a plain SET is still waiting after a second.
    await expect(within(redis.set('afterlife:probe', '1'), 1_000, 'probe SET')).rejects.toThrow(/still waiting/);

    const logger = memoryLogger();
    const t0 = Date.now();
    const kit = await within(
      attachExecutor({ databaseUrl: tdb.url, redis, heartbeatTtlMs: TTL_MS, handleSignals: false, publisher: 'none', logger }),
      5_000,
      'attachExecutor',
    );
    const attachMs = Date.now() - t0;
    expect(attachMs).toBeLessThan(TTL_MS);

    const failedBeats = () => logger.lines.filter((l) => l.event === 'heartbeat_failed').length;
    await waitFor('three failed beats', async () => failedBeats() >= 3, { timeoutMs: 4 * TTL_MS, intervalMs: 50 });

    await tdb.sql.query(
      `INSERT INTO afterlife.drain_requests (application_name, executor_id, budget_ms, requested_by) VALUES ($1, 'exec-hung', 1000, 'test')`,
      [app],
    );
    await waitFor('drain request seen', async () => kit.draining, { timeoutMs: 2 * TTL_MS, intervalMs: 50 });
    await within(kit.drained, 10_000, 'drain');
    expect(kit.state).toBe('drained');

    const closing = Date.now();
    await within(kit.close(), 5_000, 'close');
    console.log(`[hung redis] attach ${attachMs} ms; ${failedBeats()} failed beats; close ${Date.now() - closing} ms`);
  });
});
