import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MigrateOutput } from '../../../cli/schemas.js';
import { loadMigrations } from '../../../shared/db/migrate.js';
import { parseJson, runCli } from '../../helpers/cli.js';
import { ADMIN_DATABASE_URL, databaseUrl } from '../../helpers/services.js';

/**
 * `afterlife-plane migrate` on an empty database: without --dbos it refuses (DBOS's schema is missing) and says
 * how to fix it; with --dbos it creates DBOS's system schema and afterlife's; a second run applies nothing;
 * --indexes builds the opt-in indexes on DBOS's table.
 */
describe('afterlife-plane migrate', () => {
  const name = `afterlife_t_${process.pid}_migrate`;
  const url = databaseUrl(name);
  const env = { DATABASE_URL: url, DBOS_APPLICATION_NAME: 'cli-migrate' };

  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
  });
  afterAll(async () => {
    const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });

  it('refuses without DBOS, migrates both schemas with --dbos, then is a no-op', async () => {
    const refused = await runCli(['migrate'], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/DBOS system schema "dbos" not found/);

    const all = (await loadMigrations()).map((m) => m.name);
    const first = await runCli(['migrate', '--dbos', '--json'], env, 60_000);
    expect(first.code, first.stderr).toBe(0);
    const out = parseJson(first, MigrateOutput);
    expect(out.applied).toEqual(all);
    expect(out.current).toEqual(all);
    expect(out.dbosMigration).toBeGreaterThanOrEqual(123);

    const second = await runCli(['migrate'], env);
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(/^afterlife schema is up to date\nschema "afterlife" is at /);
    const again = parseJson(await runCli(['migrate', '--json'], env), MigrateOutput);
    expect(again.applied).toEqual([]);
    expect(again.indexes).toEqual([]);

    const indexed = await runCli(['migrate', '--indexes'], env, 60_000);
    expect(indexed.code, indexed.stderr).toBe(0);
    expect(indexed.stdout).toMatch(/opt-in indexes in place on "dbos": afterlife_workflow_status_pending_owner_created\n$/);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const valid = await c.query(
        `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'afterlife_workflow_status_pending_owner_created'`,
      );
      expect(valid.rows).toEqual([{ indisvalid: true }]);
    } finally {
      await c.end();
    }
  });
});
