import { DBOS } from '@dbos-inc/dbos-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../packages/executor/src/errors.js';
import { ATTACH_FAILED_EXIT_CODE, attachExecutor } from '../../../packages/executor/src/runtime/index.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { startExecutor } from '../../helpers/executor.js';
import { kitEnv } from '../../helpers/kit.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * Issue 24: zero-configuration attach. DBOS runs in this test process (the kit needs a launched app) with
 * its URL, name, executor ID and version given only to DBOS.setConfig; the kit's environment names none of
 * them (DBOS_SYSTEM_DATABASE_URL points elsewhere on purpose: what DBOS launched with wins). A failed attach
 * is fatal by default: a real app process exits with ATTACH_FAILED_EXIT_CODE and says why.
 */
describe('executor kit: attach with what DBOS already knows', () => {
  let tdb: TestDatabase;
  const app = uniqueName('app-zc');

  beforeAll(async () => {
    tdb = await createTestDatabase();
    DBOS.setConfig({
      name: app,
      systemDatabaseUrl: tdb.url,
      executorID: 'exec-zc',
      applicationVersion: 'zc1',
      runMigrations: false,
      logLevel: 'warn',
    });
    await DBOS.launch();
  });
  afterAll(async () => {
    if (DBOS.isInitialized()) await DBOS.shutdown({ workflowCompletionTimeoutMS: 0 });
    await tdb?.drop();
  });

  it('no databaseUrl, no applicationName: both come from DBOS, the kit registers and holds its lock', async () => {
    const logger = memoryLogger();
    const env = { REDIS_URL: TEST_REDIS_URL, AFTERLIFE_PUBLISH: 'none', DBOS_SYSTEM_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/nowhere' };
    const kit = await attachExecutor({ env, handleSignals: false, logger, fatal: false });
    try {
      expect(kit).toMatchObject({ executorId: 'exec-zc', applicationName: app, applicationVersion: 'zc1' });
      expect(logger.lines.find((l) => l.message === 'executor kit attached')).toMatchObject({
        databaseUrlFrom: 'dbos-config',
        deathNotices: 'off',
      });
      await waitFor('liveness lock held', async () => kit.livenessHeld);
      const r = await tdb.sql.query(
        `SELECT state, application_version FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'exec-zc'`,
        [app],
      );
      expect(r.rows).toEqual([{ state: 'alive', application_version: 'zc1' }]);
    } finally {
      await kit.close();
    }
  });

  it('fatal: false: a configuration error rejects; a schema that is not there does not stop the attach', async () => {
    const bad = await attachExecutor({
      env: { AFTERLIFE_PUBLISH: 'none', HEARTBEAT_TTL_MS: '10' },
      handleSignals: false,
      logger: memoryLogger(),
      fatal: false,
    }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(ConfigError);
    expect(String((bad as Error).message)).toMatch(/HEARTBEAT_TTL_MS/);
    // The degraded start issue 19 describes: unprotected, said at ERROR, healed once migrated (noSchema.test.ts).
    const logger = memoryLogger();
    const kit = await attachExecutor({
      env: { AFTERLIFE_PUBLISH: 'none', AFTERLIFE_SCHEMA: 'not_migrated' },
      handleSignals: false,
      logger,
      fatal: false,
    });
    try {
      await waitFor('the schema error', async () =>
        logger.lines.some((l) => l.event === 'afterlife_schema_missing' && l.severity === 'ERROR'),
      );
    } finally {
      await kit.close();
    }
  });

  it('fatal by default: the app process exits with ATTACH_FAILED_EXIT_CODE and one ERROR line saying why', async () => {
    const started = startExecutor({
      databaseUrl: tdb.url,
      applicationName: app,
      applicationVersion: 'zc1',
      executorId: 'exec-fatal',
      env: kitEnv({ env: { AFTERLIFE_SCHEMA: 'not_migrated' } }),
    });
    const err = await started.then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(new RegExp(`exited \\(${ATTACH_FAILED_EXIT_CODE}\\) before ready`));
    expect(err?.message).toMatch(/executor kit NOT attached/);
    expect(err?.message).toMatch(/kit_attach_failed/);
    expect(err?.message).toMatch(/afterlife-plane migrate/);
  });
});
