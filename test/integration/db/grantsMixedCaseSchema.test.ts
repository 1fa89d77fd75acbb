import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

/**
 * Issue 10, suspected item: the grants SQL Terraform renders (infra/grants.sql, through iam.tf's
 * templatefile) must name a mixed-case schema as the code does (quoted), or Postgres folds it and grants
 * on another schema (or fails). Rendered here with mixed-case names and run against a real database.
 */
describe('grants SQL with mixed-case schema names', () => {
  let tdb: TestDatabase;
  const tag = randomBytes(3).toString('hex');
  const roles = {
    executor_death_role: `Afterlife_Death_${tag}`,
    reaper_role: `Afterlife_Reaper_${tag}`,
    drain_role: `Afterlife_Drain_${tag}`,
  };
  const users = {
    executor_death_user: `afterlife-death-${tag}@p.iam`,
    reaper_user: `afterlife-reaper-${tag}@p.iam`,
    drain_user: `afterlife-drain-${tag}@p.iam`,
  };

  function grantsTemplate(): string {
    return readFileSync(new URL('../../../infra/grants.sql', import.meta.url), 'utf8');
  }

  function rendered(dbosSchema: string, afterlifeSchema: string): string {
    const vars: Record<string, string> = { dbos_schema: dbosSchema, afterlife_schema: afterlifeSchema, ...roles, ...users };
    return grantsTemplate().replace(/\$\{([a-z_]+)\}/g, (_, k: string) => {
      const v = vars[k];
      if (v === undefined) throw new Error(`grants.sql uses \${${k}}, which the test does not render`);
      return v;
    });
  }

  beforeAll(async () => {
    tdb = await createTestDatabase();
    for (const u of Object.values(users)) await tdb.sql.query(`CREATE ROLE "${u}" LOGIN`);
    // grants.sql names afterlife's tables one by one (each role gets exactly its writes), so every table it
    // names must exist in the mixed-case schema too.
    const afterlifeTables = [...new Set([...grantsTemplate().matchAll(/"\$\{afterlife_schema\}"\.([a-z_]+)/g)].map((m) => m[1]))];
    expect(afterlifeTables).toContain('recoveries');
    // A column-level grant (drain's INSERT on drain_requests) needs its columns to exist.
    const columnGrants = [...grantsTemplate().matchAll(/\(([a-z_, ]+)\) ON "\$\{afterlife_schema\}"\.([a-z_]+)/g)];
    const columnsOf = (t: string | undefined) =>
      ['id int', ...columnGrants.filter((m) => m[2] === t).flatMap((m) => (m[1] ?? '').split(',').map((c) => `${c.trim()} text`))].join(
        ', ',
      );
    await tdb.sql.query(
      `CREATE SCHEMA "MyDbos"; CREATE TABLE "MyDbos".workflow_status (id int); CREATE SCHEMA "MyAfterlife"; ` +
        afterlifeTables.map((t) => `CREATE TABLE "MyAfterlife".${t} (${columnsOf(t)});`).join(' '),
    );
  });
  afterAll(async () => {
    const all = [...Object.values(roles), ...Object.values(users)].map((r) => `"${r}"`).join(', ');
    await tdb?.sql.query(`DROP OWNED BY ${all}`).catch(() => undefined);
    await tdb?.drop();
    const admin = new pg.Client({ connectionString: tdb.url.replace(/\/[^/]+$/, '/postgres') });
    await admin.connect();
    for (const r of [...Object.values(users), ...Object.values(roles)])
      await admin.query(`DROP ROLE IF EXISTS "${r}"`).catch(() => undefined);
    await admin.end();
  });

  it('grants on "MyDbos" and "MyAfterlife" themselves', async () => {
    await tdb.sql.query(rendered('MyDbos', 'MyAfterlife'));
    const r = await tdb.sql.query<{
      dbos: boolean;
      table: boolean;
      mine: boolean;
      member: boolean;
      drainReads: boolean;
      drainWrites: boolean;
    }>(
      `SELECT has_schema_privilege($1, 'MyDbos', 'USAGE') AS dbos,
              has_table_privilege($1, '"MyDbos".workflow_status', 'UPDATE') AS table,
              has_table_privilege($1, '"MyAfterlife".recoveries', 'UPDATE') AS mine,
              pg_has_role($2, $1, 'MEMBER') AS member,
              has_table_privilege($3, '"MyDbos".workflow_status', 'SELECT') AS "drainReads",
              has_table_privilege($3, '"MyDbos".workflow_status', 'UPDATE') AS "drainWrites"`,
      [roles.executor_death_role, users.executor_death_user, roles.drain_role],
    );
    expect(r.rows[0]).toEqual({ dbos: true, table: true, mine: true, member: true, drainReads: true, drainWrites: false });
  });
});
