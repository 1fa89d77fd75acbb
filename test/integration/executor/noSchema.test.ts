import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../../shared/db/migrate.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { waitForLock } from '../../helpers/detection.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { kitEnv } from '../../helpers/kit.js';

/**
 * The kit fails quietly and clearly (issue 19): a real DBOS executor with the kit, started against a
 * database where afterlife's schema was never migrated, says once what is wrong and what to run — and that
 * the process is not protected — instead of a WARNING per attempt (446 lines in 28 s before), and never has
 * more than one liveness connection (pg_stat_activity sampled throughout). Once the schema exists, it picks
 * it up by itself: registered, lease held. (With AFTERLIFE_ATTACH_FATAL=false: by default a missing schema
 * fails the attach and exits the process, zeroConfig.test.ts.)
 */
const WATCH_MS = 25_000;

describe('kit: afterlife schema missing', () => {
  let tdb: TestDatabase;
  let e: ExecutorHandle | undefined;
  const app = uniqueName('app-noschema');
  beforeAll(async () => {
    tdb = await createTestDatabase();
    await tdb.sql.query('DROP SCHEMA afterlife CASCADE');
  });
  afterAll(async () => {
    await e?.stop();
    await tdb?.drop();
  });

  it(
    `at most one log line per minute, saying what to run; one liveness connection at most; recovers once migrated`,
    { timeout: 90_000 },
    async () => {
      e = await startExecutor({
        databaseUrl: tdb.url,
        applicationName: app,
        applicationVersion: 'v1',
        executorId: 'bare',
        env: kitEnv({ env: { DBOS_LOG_LEVEL: 'error', AFTERLIFE_ATTACH_FATAL: 'false' } }),
      });
      const kitLines = () =>
        e!.output
          .join('')
          .split('\n')
          .filter((l) => l.includes('"component":"afterlife-executor"'));
      const startup = await waitFor(
        'the schema error',
        async () => {
          const lines = kitLines();
          return lines.some((l) => l.includes('afterlife_schema_missing')) ? lines.length : undefined;
        },
        { timeoutMs: 15_000 },
      );
      const t0 = Date.now();
      let maxSessions = 0;
      while (Date.now() - t0 < WATCH_MS) {
        const r = await tdb.sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'afterlife_live_%'`,
        );
        maxSessions = Math.max(maxSessions, r.rows[0]?.n ?? 0);
        await new Promise((r) => setTimeout(r, 25));
      }
      const lines = kitLines();
      const errors = lines.filter((l) => l.includes('afterlife_schema_missing'));
      const after = lines.slice(startup);
      console.log(
        `[kit:no-schema] ${lines.length} kit lines in all (${startup} by the first schema error), ${after.length} in the ${WATCH_MS} ms after it; at most ${maxSessions} liveness session(s) at once`,
      );
      expect(errors).toHaveLength(1);
      expect(errors[0]).toContain('"severity":"ERROR"');
      expect(errors[0]).toContain('NOT protected');
      expect(errors[0]).toContain('afterlife-plane migrate');
      // The throttle is a minute: nothing else in the window (no per-attempt WARNING from any chore).
      expect(after).toEqual([]);
      expect(maxSessions).toBeLessThanOrEqual(1);
      expect(e.child.exitCode).toBeNull();

      // Migrated now: the kit registers and takes its lease without a restart (backoff is bounded).
      const db = afterlifeDb(tdb.url);
      try {
        await migrate(db);
      } finally {
        await db.pool.end();
      }
      await waitForLock(tdb.sql, app, 'bare', { timeoutMs: 15_000 });
      const reg = await tdb.sql.query<{ state: string }>(
        `SELECT state FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'bare'`,
        [app],
      );
      expect(reg.rows).toEqual([{ state: 'alive' }]);
    },
  );
});
