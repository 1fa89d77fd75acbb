import { DBOS } from '@dbos-inc/dbos-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIVENESS_KEY_SQL } from '../../../packages/executor/src/contract/livenessKey.js';
import { attachExecutor } from '../../../packages/executor/src/runtime/index.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type PrivatePgBouncer, pgbouncerMissing, startPgBouncer } from '../../helpers/pgbouncer.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

const withPgBouncer = it.skipIf(pgbouncerMissing('the kit behind a busy PgBouncer'));

/**
 * A transaction-mode PgBouncer whose pool is busy (pool 2, 6 clients each running statements back to back):
 * the session probe's connection may get no backend in time, and the liveness backend is lent to other
 * clients between the kit's statements and handed back. Neither may pass as "one session": every attach
 * through it is refused, ten times in a row, with no lock and no registry row left behind. The documented
 * setup behind such a pooler (liveness off, DBOS's URL pooled) still attaches.
 */
describe('executor kit: a busy transaction-mode pooler on the liveness route', () => {
  let tdb: TestDatabase;
  let bouncer: PrivatePgBouncer | undefined;
  const app = uniqueName('app-busy');
  const executorId = 'exec-busy';
  const env = { REDIS_URL: TEST_REDIS_URL, AFTERLIFE_PUBLISH: 'none' };
  const busy: pg.Client[] = [];
  let stopBusy = false;
  const loops: Promise<void>[] = [];

  const locksOn = async (application: string) => {
    const k = LIVENESS_KEY_SQL.key('$1::text', '$2::text');
    const r = await tdb.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
          AND classid = ((${k} >> 32) & 4294967295)::oid AND objid = (${k} & 4294967295)::oid`,
      [application, executorId],
    );
    return r.rows[0]?.n ?? -1;
  };

  beforeAll(async () => {
    tdb = await createTestDatabase();
    DBOS.setConfig({ name: app, systemDatabaseUrl: tdb.url, executorID: executorId, runMigrations: false, logLevel: 'warn' });
    await DBOS.launch();
    if (pgbouncerMissing('the kit behind a busy PgBouncer')) return;
    bouncer = await startPgBouncer({ poolMode: 'transaction', poolSize: 2 });
    for (let i = 0; i < 6; i++) {
      const c = new pg.Client({ connectionString: bouncer.via(tdb.url) });
      c.on('error', () => undefined);
      await c.connect();
      busy.push(c);
      loops.push(
        (async () => {
          while (!stopBusy) await c.query('SELECT pg_sleep(0.02)').catch(() => undefined);
        })(),
      );
    }
  }, 30_000);
  afterAll(async () => {
    stopBusy = true;
    await Promise.all(loops);
    await Promise.all(busy.map((c) => c.end().catch(() => undefined)));
    await bouncer?.stop();
    if (DBOS.isInitialized()) await DBOS.shutdown({ workflowCompletionTimeoutMS: 0 });
    await tdb?.drop();
  });

  withPgBouncer(
    'ten attaches in a row: each refused naming the fix, no lock held through it and nothing registered',
    async () => {
      const via = bouncer?.via(tdb.url) ?? '';
      for (let run = 0; run < 10; run++) {
        const application = `${app}-${run}`;
        const logger = memoryLogger();
        const outcome = await attachExecutor({
          env,
          applicationName: application,
          livenessDatabaseUrl: via,
          handleSignals: false,
          logger,
          fatal: false,
        }).then(
          async (kit) => {
            await kit.close();
            return undefined;
          },
          (e: unknown) => e as Error,
        );
        expect(outcome?.name, `run ${run}: attached through a busy transaction-mode pool`).toBe('NotOneSessionError');
        expect(outcome?.message).toMatch(/AFTERLIFE_LIVENESS_DATABASE_URL/);
        expect(await locksOn(application)).toBe(0);
        const reg = await tdb.sql.query(`SELECT 1 FROM afterlife.executors WHERE application_name = $1`, [application]);
        expect(reg.rowCount).toBe(0);
      }
    },
    120_000,
  );

  it('a probe that gets no connection (a role allowed one) has not ruled a pooler out: refused at attach, naming why', async () => {
    const role = `one_conn_${process.pid}`;
    await tdb.sql.query(`DROP ROLE IF EXISTS ${role}`);
    await tdb.sql.query(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 1`);
    const u = new URL(tdb.url);
    u.username = role;
    u.password = '';
    const application = `${app}-one`;
    try {
      const err = await attachExecutor({
        env,
        applicationName: application,
        livenessDatabaseUrl: u.toString(),
        handleSignals: false,
        logger: memoryLogger(),
        fatal: false,
      }).then(
        async (kit) => {
          await kit.close();
          return undefined;
        },
        (e: unknown) => e as Error,
      );
      expect(err?.name).toBe('NotOneSessionError');
      expect(err?.message).toMatch(/a pooler could not be ruled out \(the probe connection failed/);
      expect(await locksOn(application)).toBe(0);
    } finally {
      await tdb.sql.query(`DROP ROLE IF EXISTS ${role}`);
    }
  });

  withPgBouncer(
    'the documented setup behind it (liveness off, DBOS URL pooled) attaches and beats',
    async () => {
      const kit = await attachExecutor({
        env,
        applicationName: `${app}-off`,
        databaseUrl: bouncer?.via(tdb.url) ?? '',
        liveness: false,
        handleSignals: false,
        logger: memoryLogger(),
        fatal: false,
      });
      try {
        await waitFor('registered', async () => {
          const r = await tdb.sql.query(`SELECT 1 FROM afterlife.executors WHERE application_name = $1`, [`${app}-off`]);
          return (r.rowCount ?? 0) > 0;
        });
        expect(kit.livenessHeld).toBe(false);
      } finally {
        await kit.close();
      }
    },
    30_000,
  );
});
