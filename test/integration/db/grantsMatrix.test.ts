import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { ADMIN_DATABASE_URL } from '../../helpers/services.js';

/**
 * Issue 23, observation 5: infra/grants.sql gave the drain role read-write on every afterlife table, so
 * `UPDATE afterlife.executors SET state = 'dead'` as drain fenced a live executor, and an `infinity` row in
 * afterlife.leases blinded the reaper. The grants must be exactly what the docs say: drain writes only
 * drain requests; only executorDeath and the reaper write the registry, and only the reaper the lease.
 *
 * Every write (INSERT, UPDATE, DELETE, TRUNCATE) on every table of both schemas, as each function's user
 * holding only its role from infra/grants.sql (rendered as Terraform renders it), in a rolled-back
 * transaction: a forbidden write must fail with 42501, an allowed one must pass the privilege check. A
 * table this matrix does not list fails the test, so a new table needs an explicit decision.
 */
const repoRoot = resolve(import.meta.dirname, '..', '..', '..');
const tag = `aflm_${randomBytes(4).toString('hex')}`;
const ROLES = ['executor_death', 'reaper', 'drain'] as const;
type Role = (typeof ROLES)[number];
const roles = Object.fromEntries(ROLES.map((r) => [r, `${tag}_${r}`])) as Record<Role, string>;
const users = Object.fromEntries(ROLES.map((r) => [r, `${tag}-${r.replace('_', '-')}@proj.iam`])) as Record<Role, string>;

type Op = 'INSERT' | 'UPDATE' | 'DELETE' | 'TRUNCATE';
const OPS: Op[] = ['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE'];
const w = (s: string): Op[] => [...s].map((c) => ({ I: 'INSERT', U: 'UPDATE', D: 'DELETE' })[c] as Op);

/** afterlife's tables: who may write what (docs/security.md, docs/threat-model.md). */
const AFTERLIFE: Record<string, Record<Role, Op[]>> = {
  // The registry: executorDeath marks deaths, the reaper declares them (and prunes, retention).
  executors: { executor_death: w('IU'), reaper: w('IUD'), drain: [] },
  recoveries: { executor_death: w('IU'), reaper: w('IUD'), drain: [] },
  recovery_batches: { executor_death: w('IU'), reaper: w('IUD'), drain: [] },
  // Recovery timelines: every recovery opens or joins one and discards it on a false alarm; both recover.
  timelines: { executor_death: w('IUD'), reaper: w('IUD'), drain: [] },
  // Only the reaper holds its lease; a row here decides whether any reaper runs.
  leases: { executor_death: [], reaper: w('IUD'), drain: [] },
  // drain writes requests; the reaper may prune them (retention); executorDeath never touches them.
  drain_requests: { executor_death: [], reaper: w('D'), drain: w('I') },
  executor_observations: { executor_death: [], reaper: w('IUD'), drain: [] },
  stuck_workflows: { executor_death: [], reaper: w('IUD'), drain: [] },
  // The repair ledger: both repairers (orphaned versions in executorDeath; diverged/stuck in the reaper).
  forks: { executor_death: w('IUD'), reaper: w('IUD'), drain: [] },
  dead_letters: { executor_death: w('IU'), reaper: w('IUD'), drain: [] },
  rewinds: { executor_death: w('IU'), reaper: w('IUD'), drain: [] },
  // Retention's round and last pass: only the reaper runs retention.
  retention_state: { executor_death: [], reaper: w('IU'), drain: [] },
  // Redis's identity as the reaper last saw it: only the reaper judges whether Redis lost its keys.
  redis_witness: { executor_death: [], reaper: w('IU'), drain: [] },
  // Written by the kits (as the app's user) when they refuse a pooler; the plane only reads (doctor).
  kit_refusals: { executor_death: [], reaper: [], drain: [] },
  // Only the schema owner migrates.
  migrations: { executor_death: [], reaper: [], drain: [] },
};
/**
 * DBOS's tables: executorDeath and the reaper re-enqueue, fork, cancel and rewind; drain only reads. Only the
 * reaper (retention) deletes workflows; executorDeath deletes only what a rewind in place removes (issue 30).
 */
const REWIND_DELETES = new Set([
  'operation_outputs',
  'workflow_events',
  'workflow_events_history',
  'streams',
  'notifications',
  'workflow_output',
]);
const dbosWriters = (table: string): Record<Role, Op[]> => ({
  executor_death: w(REWIND_DELETES.has(table) ? 'IUD' : 'IU'),
  reaper: w('IUD'),
  drain: [],
});

const urlAs = (url: string, user: string) => {
  const u = new URL(url);
  u.username = encodeURIComponent(user);
  u.password = '';
  return u.toString();
};

async function admin(fn: (c: pg.Client) => Promise<void>): Promise<void> {
  const c = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await c.connect();
  try {
    await fn(c);
  } finally {
    await c.end();
  }
}

/** The privilege check's verdict on one write: `denied` (42501) or `allowed` (anything else, e.g. a NOT NULL violation of DEFAULT VALUES). */
async function attempt(c: pg.Client, sql: string): Promise<'allowed' | 'denied'> {
  await c.query('BEGIN');
  try {
    await c.query(sql);
    return 'allowed';
  } catch (err) {
    return (err as { code?: string }).code === '42501' ? 'denied' : 'allowed';
  } finally {
    await c.query('ROLLBACK');
  }
}

function statement(op: Op, table: string, firstColumn: string): string {
  switch (op) {
    case 'INSERT':
      return `INSERT INTO ${table} DEFAULT VALUES`;
    case 'UPDATE':
      // A column that may be assigned (not an identity): only the privilege check can refuse it.
      return `UPDATE ${table} SET "${firstColumn}" = "${firstColumn}" WHERE false`;
    case 'DELETE':
      return `DELETE FROM ${table} WHERE false`;
    case 'TRUNCATE':
      return `TRUNCATE ${table}`;
  }
}

describe('grants exactly as documented', () => {
  let tdb: TestDatabase;
  const clients: Partial<Record<Role, pg.Client>> = {};
  let tables: Array<{ schema: string; name: string; firstColumn: string }>;

  beforeAll(async () => {
    const template = await readFile(join(repoRoot, 'infra', 'grants.sql'), 'utf8');
    const vars: Record<string, string> = { dbos_schema: 'dbos', afterlife_schema: 'afterlife' };
    for (const r of ROLES) {
      vars[`${r}_role`] = roles[r];
      vars[`${r}_user`] = users[r];
    }
    const sql = template.replace(/\$\{([a-z_]+)\}/g, (_, k: string) => vars[k] ?? `<${k}>`);
    tdb = await createTestDatabase();
    await admin(async (c) => {
      for (const u of Object.values(users)) await c.query(`CREATE ROLE "${u}" LOGIN`);
    });
    await tdb.sql.query(sql);
    const res = await tdb.sql.query<{ schema: string; name: string; first_column: string }>(
      `SELECT t.table_schema AS schema, t.table_name AS name,
              (SELECT c.column_name FROM information_schema.columns c
                WHERE c.table_schema = t.table_schema AND c.table_name = t.table_name AND c.is_identity = 'NO' AND c.is_generated = 'NEVER'
                ORDER BY c.ordinal_position LIMIT 1) AS first_column
         FROM information_schema.tables t
        WHERE t.table_schema IN ('afterlife', 'dbos') AND t.table_type = 'BASE TABLE' ORDER BY 1, 2`,
    );
    tables = res.rows.map((r) => ({ schema: r.schema, name: r.name, firstColumn: r.first_column }));
    for (const r of ROLES) {
      const c = new pg.Client({ connectionString: urlAs(tdb.url, users[r]) });
      await c.connect();
      clients[r] = c;
    }
  });

  afterAll(async () => {
    await Promise.all(Object.values(clients).map((c) => c?.end()));
    await tdb?.drop();
    await admin(async (c) => {
      for (const r of [...Object.values(users), ...Object.values(roles)]) await c.query(`DROP ROLE IF EXISTS "${r}"`);
    });
  });

  it('every afterlife table has a decision in the matrix', () => {
    expect(
      tables
        .filter((t) => t.schema === 'afterlife')
        .map((t) => t.name)
        .sort(),
    ).toEqual(Object.keys(AFTERLIFE).sort());
  });

  it('each role can make exactly the writes the matrix allows, on every table of both schemas', async () => {
    const got: string[] = [];
    const want: string[] = [];
    for (const t of tables) {
      for (const r of ROLES) {
        const allowed = t.schema === 'dbos' ? dbosWriters(t.name)[r] : (AFTERLIFE[t.name]?.[r] ?? []);
        for (const op of OPS) {
          const verdict = await attempt(clients[r]!, statement(op, `"${t.schema}"."${t.name}"`, t.firstColumn));
          got.push(`${r} ${op} ${t.schema}.${t.name}: ${verdict}`);
          want.push(`${r} ${op} ${t.schema}.${t.name}: ${allowed.includes(op) ? 'allowed' : 'denied'}`);
        }
      }
    }
    expect(got).toEqual(want);
  });

  it("the audit's two attacks as drain: marking an executor dead and planting an everlasting lease are refused", async () => {
    const c = clients.drain!;
    await tdb.sql.query(`INSERT INTO afterlife.executors (application_name, executor_id, state) VALUES ('app', 'exec-A', 'alive')`);
    await expect(c.query(`UPDATE afterlife.executors SET state = 'dead' WHERE executor_id = 'exec-A'`)).rejects.toMatchObject({
      code: '42501',
    });
    await expect(
      c.query(`INSERT INTO afterlife.leases (name, holder, expires_at) VALUES ('reaper:app', 'me', 'infinity')`),
    ).rejects.toMatchObject({ code: '42501' });
    await expect(
      clients.executor_death!.query(`INSERT INTO afterlife.leases (name, holder, expires_at) VALUES ('reaper:app', 'me', 'infinity')`),
    ).rejects.toMatchObject({ code: '42501' });
    const row = await tdb.sql.query<{ state: string }>(`SELECT state FROM afterlife.executors WHERE executor_id = 'exec-A'`);
    expect(row.rows[0]?.state).toBe('alive');
  });

  it('re-running grants.sql over the old, broader grants takes them back', async () => {
    // A deployment granted by the previous file: full DML for all three on afterlife's tables.
    await tdb.sql.query(
      `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA afterlife TO "${roles.drain}", "${roles.executor_death}"`,
    );
    const template = await readFile(join(repoRoot, 'infra', 'grants.sql'), 'utf8');
    const vars: Record<string, string> = { dbos_schema: 'dbos', afterlife_schema: 'afterlife' };
    for (const r of ROLES) {
      vars[`${r}_role`] = roles[r];
      vars[`${r}_user`] = users[r];
    }
    await tdb.sql.query(template.replace(/\$\{([a-z_]+)\}/g, (_, k: string) => vars[k] ?? `<${k}>`));
    expect(await attempt(clients.drain!, `UPDATE afterlife.executors SET state = state WHERE false`)).toBe('denied');
    expect(await attempt(clients.executor_death!, `DELETE FROM afterlife.leases WHERE false`)).toBe('denied');
  });
});
