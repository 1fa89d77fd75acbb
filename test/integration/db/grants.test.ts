import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { DBOSClient } from '@dbos-inc/dbos-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleDrainRequest } from '../../../functions/drain/handle.js';
import { handleDeathEvent } from '../../helpers/executorDeath.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { unlimitedBudget } from '../../../shared/lifecycle/deadline.js';
import { runRetentionPass } from '../../../shared/retention/pass.js';
import { makeOrphans } from '../../helpers/agents.js';
import { pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { createTestDatabase, type TestDatabase, uniqueName, workflowRows } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';
import { ADMIN_DATABASE_URL } from '../../helpers/services.js';

/**
 * infra/grants.sql, rendered as Terraform renders it, run against the local Postgres in a test database
 * by its schema owner; then each function's code runs as a user holding only its role. Roles are
 * cluster-wide, so their names are unique to this run and they are dropped afterwards.
 */
const repoRoot = resolve(import.meta.dirname, '..', '..', '..');
const tag = `afl_${randomBytes(4).toString('hex')}`;
const roles = { executor_death: `${tag}_executor_death`, reaper: `${tag}_reaper`, drain: `${tag}_drain` };
// Shaped like IAM database users (an @ and dots), so the SQL's quoting is exercised.
const users = { executor_death: `${tag}-executor-death@proj.iam`, reaper: `${tag}-reaper@proj.iam`, drain: `${tag}-drain@proj.iam` };
const vars: Record<string, string> = {
  dbos_schema: 'dbos',
  afterlife_schema: 'afterlife',
  executor_death_role: roles.executor_death,
  reaper_role: roles.reaper,
  drain_role: roles.drain,
  executor_death_user: users.executor_death,
  reaper_user: users.reaper,
  drain_user: users.drain,
};

const urlAs = (url: string, user: string) => {
  const u = new URL(url);
  u.username = encodeURIComponent(user);
  u.password = '';
  return u.toString();
};

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

describe('per-function database roles (infra/grants.sql)', () => {
  let tdb: TestDatabase;
  let sql: string;
  const app = uniqueName('grants-app');

  beforeAll(async () => {
    const template = await readFile(join(repoRoot, 'infra', 'grants.sql'), 'utf8');
    // The test renders with exactly the variables Terraform passes (iam.tf's templatefile call).
    const iam = await readFile(join(repoRoot, 'infra', 'iam.tf'), 'utf8');
    const call = /templatefile\("\$\{path\.module\}\/grants\.sql", \{([\s\S]*?)\}\)/.exec(iam)?.[1] ?? '';
    const passed = [...call.matchAll(/^\s*([a-z_]+)\s*=/gm)].map((m) => m[1]).sort();
    const used = [...new Set([...template.matchAll(/\$\{([a-z_]+)\}/g)].map((m) => m[1]))].sort();
    expect(used).toEqual(passed);
    expect(Object.keys(vars).sort()).toEqual(passed);
    sql = template.replace(/\$\{([a-z_]+)\}/g, (_, k: string) => vars[k] ?? `<${k}>`);

    tdb = await createTestDatabase();
    await admin(async (c) => {
      for (const u of Object.values(users)) await c.query(`CREATE ROLE "${u}" LOGIN`);
    });
    await makeOrphans({
      databaseUrl: tdb.url,
      sql: tdb.sql,
      applicationName: app,
      executorId: 'exec-A',
      applicationVersion: 'v1',
      ids: ['g-0', 'g-1'],
    });
    // As the owner of both schemas (the test database's superuser here); twice, as after a DBOS upgrade.
    await tdb.sql.query(sql);
    await tdb.sql.query(sql);
  });

  afterAll(async () => {
    await tdb?.drop();
    await admin(async (c) => {
      for (const r of [...Object.values(users), ...Object.values(roles)]) await c.query(`DROP ROLE IF EXISTS "${r}"`);
    });
  });

  it("drain's role reads DBOS's tables and cannot UPDATE dbos.workflow_status; the drain function works with it", async () => {
    const pool = new pg.Pool({ connectionString: urlAs(tdb.url, users.drain), max: 2 });
    try {
      const read = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`, [
        ['g-0', 'g-1'],
      ]);
      expect(read.rows[0]?.n).toBe(2);
      await expect(pool.query(`UPDATE dbos.workflow_status SET status = 'ENQUEUED' WHERE workflow_uuid = 'g-0'`)).rejects.toMatchObject({
        code: '42501',
      });
      await expect(pool.query(`INSERT INTO dbos.workflow_status (workflow_uuid, status) VALUES ('g-x', 'PENDING')`)).rejects.toMatchObject({
        code: '42501',
      });
      await expect(pool.query(`DELETE FROM dbos.operation_outputs WHERE workflow_uuid = 'g-0'`)).rejects.toMatchObject({ code: '42501' });
    } finally {
      await pool.end();
    }

    const rt = testRuntime({ databaseUrl: urlAs(tdb.url, users.drain), applicationName: app, redis: 'none' });
    try {
      const post = await handleDrainRequest(rt, { method: 'POST', body: { applicationVersion: 'v1' }, query: {} });
      expect(post.status).toBe(202);
      const get = await handleDrainRequest(rt, { method: 'GET', body: undefined, query: { applicationVersion: 'v1' } });
      expect(get.status).toBe(200);
    } finally {
      await rt.close();
    }
    const rows = await workflowRows(tdb.sql, ['g-0', 'g-1']);
    expect(rows.every((r) => r.status === 'PENDING')).toBe(true);
  });

  it("drain's role writes only what the drain function says: no date of its own (no `infinity`), a budget and names within bounds", async () => {
    // Issue 30: a request dated `infinity` drained every later executor of its version, and the prune never removed it.
    const c = new pg.Client({ connectionString: urlAs(tdb.url, users.drain) });
    await c.connect();
    const insert = (cols: string, values: string) =>
      c.query(`INSERT INTO afterlife.drain_requests (${cols}) VALUES (${values}) RETURNING id`);
    try {
      const base = `application_name, application_version, budget_ms, requested_by`;
      await expect(insert(`${base}, requested_at`, `'${app}', 'v9', 60000, 'x', 'infinity'`)).rejects.toMatchObject({ code: '42501' });
      await expect(insert(`${base}, requested_at`, `'${app}', 'v9', 60000, 'x', now() - interval '1 day'`)).rejects.toMatchObject({
        code: '42501',
      });
      // 23514: the row's CHECK (migration 0015), past the privilege check.
      await expect(insert(base, `'${app}', 'v9', 2147483647, 'x'`)).rejects.toMatchObject({ code: '23514' });
      await expect(insert(base, `'${app}', repeat('v', 513), 60000, 'x'`)).rejects.toMatchObject({ code: '23514' });
      await expect(insert(base, `'${app}', 'v9', 60000, repeat('x', 100000)`)).rejects.toMatchObject({ code: '23514' });
      const ok = await insert(base, `'${app}', 'v9', 60000, 'x'`);
      const row = await tdb.sql.query<{ fresh: boolean }>(
        `SELECT requested_at BETWEEN now() - interval '1 minute' AND now() AS fresh FROM afterlife.drain_requests WHERE id = $1`,
        [ok.rows[0]?.id],
      );
      expect(row.rows[0]?.fresh).toBe(true);
    } finally {
      await c.end();
    }
    // Nothing but the one legitimate row for v9: no `infinity`, no huge budget.
    const v9 = await tdb.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM afterlife.drain_requests WHERE application_version = 'v9'`,
    );
    expect(v9.rows[0]?.n).toBe(1);
  });

  it("executorDeath's role re-enqueues a dead executor's workflows and writes the audit", async () => {
    const rt = testRuntime({ databaseUrl: urlAs(tdb.url, users.executor_death), applicationName: app, redis: 'none' });
    try {
      const notice = deathNotice({ executorId: 'exec-A', applicationName: app, reason: 'manual', detectedBy: 'test' });
      const out = await handleDeathEvent(rt, JSON.parse(pubsubCloudEvent(JSON.stringify(notice)).body) as unknown);
      expect(out).toMatchObject({ ack: true, kind: 'recovered' });
      if (out.kind !== 'recovered' || out.summary.outcome === 'false-alarm') throw new Error(`unexpected ${JSON.stringify(out)}`);
      expect(out.summary.reenqueued).toBe(2);
    } finally {
      await rt.close();
    }
    const rows = await workflowRows(tdb.sql, ['g-0', 'g-1']);
    expect(rows.map((r) => r.status)).toEqual(['ENQUEUED', 'ENQUEUED']);
    const audit = await tdb.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM afterlife.recoveries WHERE executor_id = 'exec-A'`);
    expect(audit.rows[0]?.n).toBeGreaterThan(0);
  });

  it('duplicate notices about one known dead executor write one audit row, even at once; rows to move make a new one', async () => {
    // Issue 30: 1,000 notices about one known dead executor wrote 1,000 `recoveries` rows in 11 s.
    const audit = async () =>
      (await tdb.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM afterlife.recoveries WHERE executor_id = 'exec-A'`)).rows[0]?.n;
    const before = await audit();
    expect(before).toBeGreaterThan(0);
    const rt = testRuntime({ databaseUrl: urlAs(tdb.url, users.executor_death), applicationName: app, redis: 'none', poolMax: 8 });
    const send = async () => {
      const notice = deathNotice({ executorId: 'exec-A', applicationName: app, reason: 'manual', detectedBy: 'test' });
      return handleDeathEvent(rt, JSON.parse(pubsubCloudEvent(JSON.stringify(notice)).body) as unknown);
    };
    try {
      // Degraded (no Redis lock): six at a time, so only the statement's own lock keeps them to one row.
      for (let round = 0; round < 5; round++) {
        const outs = await Promise.all(Array.from({ length: 6 }, send));
        for (const out of outs) expect(out).toMatchObject({ ack: true, kind: 'recovered', summary: { outcome: 'nothing-to-do' } });
      }
      expect(await audit()).toBe(before);
      // A PENDING row of the dead executor again (say a claim raced the death): the next notice has work, audited anew.
      await tdb.sql.query(
        `UPDATE dbos.workflow_status SET status = 'PENDING', executor_id = 'exec-A', queue_name = NULL WHERE workflow_uuid = 'g-0'`,
      );
      expect(await send()).toMatchObject({ ack: true, summary: { outcome: 'completed', reenqueued: 1 } });
      expect(await audit()).toBe((before ?? 0) + 1);
      await Promise.all(Array.from({ length: 6 }, send));
      expect(await audit()).toBe((before ?? 0) + 1);
    } finally {
      await rt.close();
    }
  });

  it("the reaper's role forks, cancels and rewinds through DBOS's own client; drain's cannot fork", async () => {
    const client = await DBOSClient.create({
      systemDatabaseUrl: urlAs(tdb.url, users.reaper),
      applicationName: app,
      systemDatabasePoolSize: 2,
    });
    try {
      expect(await client.forkWorkflow('g-0', 0, { newWorkflowID: 'g-0-fork-1' })).toBe('g-0-fork-1');
      await client.cancelWorkflow('g-0-fork-1');
      // DBOS 5.3's rewind (shared/repair's repair in place) deletes recorded history from the cut on.
      await client.rewindWorkflow('g-0-fork-1', { startStep: 0 });
    } finally {
      await client.destroy();
    }
    const rows = await workflowRows(tdb.sql, ['g-0-fork-1']);
    expect(rows.map((r) => r.status)).toEqual(['ENQUEUED']);

    const reader = await DBOSClient.create({
      systemDatabaseUrl: urlAs(tdb.url, users.drain),
      applicationName: app,
      systemDatabasePoolSize: 2,
    });
    try {
      await expect(reader.forkWorkflow('g-1', 0, { newWorkflowID: 'g-1-fork-1' })).rejects.toThrow(/permission denied/);
    } finally {
      await reader.destroy();
    }
  });

  it("executorDeath's role forks, cancels and rewinds, but deletes no workflow: retention fails for it (42501); the reaper's runs", async () => {
    // Issue 30: executorDeath's role held DELETE on every DBOS table and ran `afterlife-plane retention` (14 workflows gone).
    const client = await DBOSClient.create({
      systemDatabaseUrl: urlAs(tdb.url, users.executor_death),
      applicationName: app,
      systemDatabasePoolSize: 2,
    });
    try {
      // Its orphaned-version hook repairs in place (REPAIR_MODE=rewind) or forks: both must still work.
      expect(await client.forkWorkflow('g-1', 0, { newWorkflowID: 'g-1-fork-ed' })).toBe('g-1-fork-ed');
      await client.cancelWorkflow('g-1-fork-ed');
      await client.rewindWorkflow('g-1-fork-ed', { startStep: 0 });
    } finally {
      await client.destroy();
    }
    expect((await workflowRows(tdb.sql, ['g-1-fork-ed'])).map((r) => r.status)).toEqual(['ENQUEUED']);

    // Completed two days ago, with steps, input and output: what RETENTION_MAX_AGE_MS of a day deletes.
    const old = ['ret-0', 'ret-1', 'ret-2'];
    await tdb.sql.query(
      `WITH w AS (SELECT id, (EXTRACT(EPOCH FROM now()) * 1000)::bigint - 172800000 AS at FROM unnest($1::text[]) id),
       s AS (INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, application_name, application_version,
               created_at, updated_at, completed_at) SELECT id, 'SUCCESS', 'w', '', '', $2, 'v1', at, at, at FROM w RETURNING workflow_uuid),
       i AS (INSERT INTO dbos.workflow_input (workflow_uuid, inputs) SELECT workflow_uuid, '[]' FROM s RETURNING 1)
       INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, output) SELECT workflow_uuid, 0, 'step', 'out' FROM s`,
      [old, app],
    );
    const retentionAs = async (user: string) => {
      const rt = testRuntime({
        databaseUrl: urlAs(tdb.url, user),
        applicationName: app,
        redis: 'none',
        env: { RETENTION_MAX_AGE_MS: '86400000' },
      });
      try {
        return await runRetentionPass(rt, { budget: unlimitedBudget() });
      } finally {
        await rt.close();
      }
    };
    await expect(retentionAs(users.executor_death)).rejects.toMatchObject({ code: '42501' });
    await expect(
      tdb.sql.query(`SELECT count(*)::int AS n FROM dbos.operation_outputs WHERE workflow_uuid = ANY($1)`, [old]),
    ).resolves.toMatchObject({
      rows: [{ n: 3 }],
    });
    expect((await workflowRows(tdb.sql, old)).length).toBe(3);
    // The same pass as the reaper's role deletes them: the refusal above is the grant's, not the data's.
    expect((await retentionAs(users.reaper)).deleted).toBe(3);
    expect(await workflowRows(tdb.sql, old)).toEqual([]);
  });

  it("each user holds only its own function's role", async () => {
    const held = await tdb.sql.query<{ member: string; role: string }>(
      `SELECT m.rolname AS member, r.rolname AS role FROM pg_auth_members a
         JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member
        WHERE m.rolname = ANY($1) ORDER BY 1`,
      [Object.values(users)],
    );
    expect(held.rows.map((r) => [r.member, r.role]).sort()).toEqual(
      (['executor_death', 'reaper', 'drain'] as const).map((k) => [users[k], roles[k]]).sort(),
    );
    // The reaper's writes are those of executorDeath (plus cancels): UPDATE allowed, in a rolled-back transaction.
    const c = new pg.Client({ connectionString: urlAs(tdb.url, users.reaper) });
    await c.connect();
    try {
      await c.query('BEGIN');
      const u = await c.query(`UPDATE dbos.workflow_status SET updated_at = updated_at WHERE workflow_uuid = 'g-0'`);
      expect(u.rowCount).toBe(1);
      await c.query('ROLLBACK');
    } finally {
      await c.end();
    }
  });
});
