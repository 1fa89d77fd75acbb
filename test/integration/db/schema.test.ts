import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate, MIGRATIONS_DIR } from '../../../shared/db/migrate.js';
import { checkDbosSchema, MIN_DBOS_MIGRATION } from '../../../shared/dbos/schema.js';
import { DbosSchemaError } from '../../../packages/executor/src/errors.js';
import { afterlifeDb, createTestDatabase, type TestDatabase } from '../../helpers/db.js';

/** The DBOS schema check and afterlife's own migrations against a real database. */
describe('schemas', () => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase();
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  it('accepts a DBOS 5.2+ system schema and explains what to do otherwise', async () => {
    const db = afterlifeDb(tdb.url);
    try {
      const { version } = await checkDbosSchema(db);
      expect(version).toBeGreaterThanOrEqual(MIN_DBOS_MIGRATION);

      const missing = Object.assign(Object.create(db) as typeof db, { dbosSchema: 'nope' });
      await expect(checkDbosSchema(missing)).rejects.toThrow(/not found.*DBOS_SYSTEM_SCHEMA/s);

      await tdb.sql.query(
        `CREATE SCHEMA old_dbos; CREATE TABLE old_dbos.dbos_migrations (version bigint PRIMARY KEY); INSERT INTO old_dbos.dbos_migrations VALUES (114)`,
      );
      const old = Object.assign(Object.create(db) as typeof db, { dbosSchema: 'old_dbos' });
      const err = await checkDbosSchema(old).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DbosSchemaError);
      expect(String(err)).toMatch(/migration 114.*123.*5\.2/s);
    } finally {
      await db.end();
    }
  });

  it('migrates a fresh schema once, even when several instances start at the same moment', async () => {
    const dbs = Array.from({ length: 4 }, () => afterlifeDb(tdb.url, { max: 1 }));
    const fresh = dbs.map((d) => Object.assign(Object.create(d) as typeof d, { afterlifeSchema: 'afterlife_fresh' }));
    try {
      const results = await Promise.all(fresh.map((d) => migrate(d)));
      const applied = results.flatMap((r) => r.applied);
      const files = (await tdb.sql.query<{ name: string }>(`SELECT name FROM afterlife_fresh.migrations ORDER BY id`)).rows.map(
        (r) => r.name,
      );
      expect(applied.sort()).toEqual([...files].sort()); // each applied by exactly one instance
      expect(files[0]).toBe('0001_foundation');
      expect((await migrate(fresh[0]!)).applied).toEqual([]);
    } finally {
      await Promise.all(dbs.map((d) => d.end()));
    }
  });

  it('applies a migration that lands after a higher-numbered one (written side by side)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'afterlife-mig-'));
    const db = Object.assign(afterlifeDb(tdb.url, { max: 1 }), { afterlifeSchema: 'afterlife_late' });
    try {
      await cp(MIGRATIONS_DIR, dir, { recursive: true });
      await writeFile(join(dir, '9998_newer.sql'), 'CREATE TABLE :SCHEMA:.newer (x int);');
      expect((await migrate(db, `${dir}/`)).applied).toContain('9998_newer');
      await writeFile(join(dir, '9997_landed_later.sql'), 'CREATE TABLE :SCHEMA:.landed_later (x int);');
      expect((await migrate(db, `${dir}/`)).applied).toEqual(['9997_landed_later']);
    } finally {
      await db.end();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a runtime role with only USAGE and DML starts against a current schema (no CREATE needed)', async () => {
    const role = `afterlife_rt_${Math.random().toString(36).slice(2, 10)}`;
    const grants = [
      `CREATE ROLE ${role} LOGIN`,
      `REVOKE CREATE ON SCHEMA public FROM PUBLIC`,
      `GRANT USAGE ON SCHEMA afterlife, dbos TO ${role}`,
      `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA afterlife, dbos TO ${role}`,
    ];
    for (const g of grants) await tdb.sql.query(g);
    const url = new URL(tdb.url);
    url.username = role;
    const db = afterlifeDb(url.toString(), { max: 1 });
    try {
      await expect(db.query('CREATE TABLE afterlife.probe (x int)')).rejects.toThrow(/permission denied/);
      expect(await migrate(db)).toEqual({ applied: [] });
    } finally {
      await db.end();
      await tdb.sql.query(`DROP OWNED BY ${role}`);
      await tdb.sql.query(`DROP ROLE ${role}`);
    }
  });
});
