import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NEWEST_TESTED_DBOS_MIGRATION } from '../../../shared/dbos/schemaGuard.js';
import { DbosSchemaError } from '../../../packages/executor/src/errors.js';
import { Lifecycle } from '../../../packages/executor/src/lifecycle/orderedShutdown.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { createRuntime } from '../../../shared/runtime.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

/**
 * The DBOS schema-version guard at start (shared/dbos/schemaGuard.ts, called by createRuntime): a system
 * schema newer than the newest tested is refused with both versions named, unless the operator raised
 * DBOS_SCHEMA_MAX_VERSION; the tested one starts.
 */
describe('DBOS schema-version guard', () => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase();
    // A copy of the real DBOS schema's version table, one migration ahead (what a DBOS upgrade leaves).
    await tdb.sql.query(
      `CREATE SCHEMA next_dbos; CREATE TABLE next_dbos.dbos_migrations (version bigint PRIMARY KEY); INSERT INTO next_dbos.dbos_migrations VALUES (124)`,
    );
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  const start = async (env: Record<string, string>) => {
    const lifecycle = new Lifecycle();
    try {
      const rt = await createRuntime({
        env: { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: 'guard', ...env },
        logger: memoryLogger(),
        lifecycle,
        publisher: 'none',
        migrate: false,
      });
      return rt.config.dbosSchema;
    } finally {
      await lifecycle.shutdown();
    }
  };

  it('starts on the tested schema version', async () => {
    const v = await tdb.sql.query<{ v: string }>(`SELECT max(version)::text AS v FROM dbos.dbos_migrations`);
    expect(Number(v.rows[0]?.v)).toBe(NEWEST_TESTED_DBOS_MIGRATION);
    await expect(start({})).resolves.toBe('dbos');
  });

  it('refuses a newer schema, naming both versions and the override', async () => {
    const err = await start({ DBOS_SYSTEM_SCHEMA: 'next_dbos' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DbosSchemaError);
    expect(String(err)).toMatch(/migration 124, newer than 123.*5\.2\.11 and 5\.3\.0.*DBOS_SCHEMA_MAX_VERSION=124/s);
  });

  it('starts on the newer schema once the operator raised DBOS_SCHEMA_MAX_VERSION', async () => {
    await expect(start({ DBOS_SYSTEM_SCHEMA: 'next_dbos', DBOS_SCHEMA_MAX_VERSION: '124' })).resolves.toBe('next_dbos');
  });
});
