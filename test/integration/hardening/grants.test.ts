import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

/**
 * Issue 10, suspected item: the grants SQL Terraform renders (`database_grants_sql` in infra/iam.tf) must
 * name a mixed-case schema as the code does (quoted), or Postgres folds it and grants on another schema
 * (or fails). Rendered here with mixed-case names and run against a real database.
 */
describe('grants SQL with mixed-case schema names', () => {
  let tdb: TestDatabase;
  const tag = randomBytes(3).toString('hex');
  const role = `Afterlife_Runtime_${tag}`;
  const grantee = `afterlife-fn-${tag}@p.iam`;

  function rendered(dbosSchema: string, afterlifeSchema: string): string {
    const tf = readFileSync(new URL('../../../infra/iam.tf', import.meta.url), 'utf8');
    const m = /database_grants_sql = <<-EOT\n([\s\S]*?)\n\s*EOT/.exec(tf);
    if (!m?.[1]) throw new Error('database_grants_sql not found in infra/iam.tf');
    return m[1]
      .replaceAll('${var.afterlife.dbos_system_schema}', dbosSchema)
      .replaceAll('${var.afterlife.afterlife_schema}', afterlifeSchema)
      .replaceAll('${local.db_runtime_role}', role)
      .replaceAll('${local.db_grantees}', `"${grantee}"`)
      .replaceAll('${local.admin_grants_sql}', '');
  }

  beforeAll(async () => {
    tdb = await createTestDatabase();
    await tdb.sql.query(`CREATE ROLE "${grantee}" LOGIN`);
    await tdb.sql.query(`CREATE SCHEMA "MyDbos"; CREATE TABLE "MyDbos".workflow_status (id int); CREATE SCHEMA "MyAfterlife"; CREATE TABLE "MyAfterlife".recoveries (id int)`);
  });
  afterAll(async () => {
    await tdb?.sql.query(`DROP OWNED BY "${role}", "${grantee}"`).catch(() => undefined);
    await tdb?.drop();
    const admin = new pg.Client({ connectionString: tdb.url.replace(/\/[^/]+$/, '/postgres') });
    await admin.connect();
    await admin.query(`DROP ROLE IF EXISTS "${grantee}"`).catch(() => undefined);
    await admin.query(`DROP ROLE IF EXISTS "${role}"`).catch(() => undefined);
    await admin.end();
  });

  it('grants on "MyDbos" and "MyAfterlife" themselves', async () => {
    await tdb.sql.query(rendered('MyDbos', 'MyAfterlife'));
    const r = await tdb.sql.query<{ dbos: boolean; table: boolean; mine: boolean; member: boolean }>(
      `SELECT has_schema_privilege($1, 'MyDbos', 'USAGE') AS dbos,
              has_table_privilege($1, '"MyDbos".workflow_status', 'UPDATE') AS table,
              has_table_privilege($1, '"MyAfterlife".recoveries', 'DELETE') AS mine,
              pg_has_role($2, $1, 'MEMBER') AS member`,
      [role, grantee],
    );
    expect(r.rows[0]).toEqual({ dbos: true, table: true, mine: true, member: true });
  });
});
