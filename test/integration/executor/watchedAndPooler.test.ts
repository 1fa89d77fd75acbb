import { DBOS } from '@dbos-inc/dbos-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../../shared/config/index.js';
import { poolerCheck } from '../../../shared/doctor/pooler.js';
import { LIVENESS_KEY_SQL, livenessHeldSql } from '../../../packages/executor/src/contract/livenessKey.js';
import { attachExecutor } from '../../../packages/executor/src/runtime/index.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { renewLease, tryAcquireLease } from '../../../shared/db/queries/leases.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type PrivatePgBouncer, pgbouncerMissing, startPgBouncer } from '../../helpers/pgbouncer.js';

const withPgBouncer = it.skipIf(pgbouncerMissing('the kit behind a real PgBouncer'));
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * Issue 27, the kit's side: it knows whether a plane guards its application (and says so within 15 s when
 * none does), and it refuses a liveness connection that is not one server session (a real PgBouncer in
 * transaction mode) while working through one in session mode. DBOS runs in this process (the kit needs a
 * launched app); the planes are their reapers' lease rows, written by the reaper's own lease statements.
 */
describe('executor kit: watched, and one server session for the lock', () => {
  let tdb: TestDatabase;
  let plane: ReturnType<typeof afterlifeDb>;
  const app = uniqueName('app-w');
  const executorId = 'exec-w';
  const env = { REDIS_URL: TEST_REDIS_URL, AFTERLIFE_PUBLISH: 'none' };

  /** One reaper tick of a plane guarding `name`, as the reaper records it. */
  const tick = async (name: string) => {
    expect(await tryAcquireLease(plane, `reaper:${name}`, `plane-of-${name}`, 60_000)).toBe(true);
    expect(await renewLease(plane, `reaper:${name}`, `plane-of-${name}`, 60_000, true)).toBe(true);
  };
  const backdateTick = (name: string, ms: number) =>
    tdb.sql.query(`UPDATE afterlife.leases SET last_tick_at = now() - make_interval(secs => $2::double precision / 1000) WHERE name = $1`, [
      `reaper:${name}`,
      ms,
    ]);
  /** Advisory locks on the liveness key of (application, executor), by anyone. */
  const locksOn = async (application: string) => {
    const k = LIVENESS_KEY_SQL.key('$1::text', '$2::text');
    const r = await tdb.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
          AND classid = ((${k} >> 32) & 4294967295)::oid AND objid = (${k} & 4294967295)::oid`,
      [application, executorId],
    );
    return r.rows[0]?.n ?? -1;
  };

  /** A kit of `application` whose liveness connection goes through the pooler (its pool goes straight). */
  const attachThrough = (bouncer: PrivatePgBouncer, application: string) =>
    attachExecutor({
      env,
      applicationName: application,
      livenessDatabaseUrl: bouncer.via(tdb.url),
      handleSignals: false,
      logger: memoryLogger(),
      fatal: false,
    });

  beforeAll(async () => {
    tdb = await createTestDatabase();
    plane = afterlifeDb(tdb.url);
    DBOS.setConfig({ name: app, systemDatabaseUrl: tdb.url, executorID: executorId, runMigrations: false, logLevel: 'warn' });
    await DBOS.launch();
  });
  afterAll(async () => {
    if (DBOS.isInitialized()) await DBOS.shutdown({ workflowCompletionTimeoutMS: 0 });
    await plane?.end();
    await tdb?.drop();
  });

  it('unwatched: a WARNING within 15 s naming its application and the guarded one; watched once a plane ticks for it', async () => {
    const other = uniqueName('other-app');
    const gone = uniqueName('gone-app');
    await tick(other);
    await tick(gone);
    await backdateTick(gone, 600_000);
    const logger = memoryLogger();
    const t0 = Date.now();
    const kit = await attachExecutor({ env, handleSignals: false, logger, fatal: false });
    try {
      await waitFor('the first answer', async () => kit.watched === false, { timeoutMs: 5_000 });
      expect(kit.watch.guardedApplications).toEqual([other]);
      const warning = await waitFor('kit_unwatched', async () => logger.lines.find((l) => l.event === 'kit_unwatched'), {
        timeoutMs: 16_000,
      });
      expect(Date.now() - t0).toBeLessThanOrEqual(15_000);
      expect(warning.severity).toBe('WARNING');
      expect(warning.message).toContain(`"${app}"`);
      expect(warning.message).toContain(`"${other}"`);
      expect(warning.message).not.toContain(gone);
      expect(warning.message).toContain(`DBOS_APPLICATION_NAME=${app}`);

      await tick(app);
      await waitFor('watched', async () => kit.watched === true, { timeoutMs: 8_000 });
      await waitFor('kit_watched at INFO', async () => logger.lines.some((l) => l.event === 'kit_watched' && l.severity === 'INFO'));
      // The plane stops: two minutes without a tick and it no longer guards; the warning is back at once.
      await backdateTick(app, 180_000);
      await waitFor('unwatched again', async () => logger.lines.filter((l) => l.event === 'kit_unwatched').length === 2, {
        timeoutMs: 8_000,
      });
      expect(kit.watched).toBe(false);
    } finally {
      await kit.close();
    }
  }, 40_000);

  withPgBouncer.each(['transaction', 'statement'] as const)(
    'a %s-mode PgBouncer on the liveness route: attach fails naming the fix, and no lock is held through it',
    async (poolMode) => {
      const bouncer = await startPgBouncer({ poolMode, poolSize: 4 });
      const application = `${app}-${poolMode}`;
      try {
        const err = await attachThrough(bouncer, application).then(
          () => undefined,
          (e: unknown) => e as Error,
        );
        expect(err?.name).toBe('NotOneSessionError');
        expect(err?.message).toMatch(/not one Postgres session/);
        expect(err?.message).toMatch(/AFTERLIFE_LIVENESS_DATABASE_URL/);
        expect(await locksOn(application)).toBe(0);
        const reg = await tdb.sql.query(`SELECT 1 FROM afterlife.executors WHERE application_name = $1`, [application]);
        expect(reg.rowCount).toBe(0);
        // It registered nothing, but said why where doctor looks: the pooler check names it with the fix.
        const pooler = await poolerCheck.run({
          db: plane,
          config: { applicationName: application } as Config,
          redis: undefined,
          rolePrefix: 'x',
        });
        expect(pooler.status).toBe('FAIL');
        expect(pooler.details.join('\n')).toMatch(
          new RegExp(`executor ${executorId}: refused to attach at .* \\(not-one-session\\): .*AFTERLIFE_LIVENESS_DATABASE_URL`),
        );
      } finally {
        await bouncer.stop();
      }
    },
  );

  withPgBouncer('a session-mode PgBouncer on the liveness route: the kit attaches and holds its lock', async () => {
    const bouncer = await startPgBouncer({ poolMode: 'session', poolSize: 4 });
    const application = `${app}-sess`;
    try {
      const kit = await attachThrough(bouncer, application);
      try {
        await waitFor('liveness lock held', async () => kit.livenessHeld);
        const held = await tdb.sql.query<{ held: boolean }>(`SELECT ${livenessHeldSql('afterlife', '$1::text', '$2::text')} AS held`, [
          application,
          executorId,
        ]);
        expect(held.rows[0]?.held).toBe(true);
      } finally {
        await kit.close();
      }
    } finally {
      await bouncer.stop();
    }
  });
});
