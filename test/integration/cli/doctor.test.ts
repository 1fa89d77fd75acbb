import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GUARD_TICK_WITHIN_MS } from '../../../packages/executor/src/contract/guard.js';
import { DEFAULT_LIVENESS_LEASE_MS } from '../../../packages/executor/src/contract/lease.js';
import { KIT_VERSION } from '../../../packages/executor/src/version.js';
import { DoctorOutput } from '../../../cli/schemas.js';
import { livenessSessionName } from '../../../packages/executor/src/runtime/liveness.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { createRuntime } from '../../../shared/runtime.js';
import { parseJson, runCli } from '../../helpers/cli.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { admin, grantRoles, type GrantRoles } from '../../helpers/grants.js';
import { kitEnv } from '../../helpers/kit.js';
import { holdLiveness } from '../../helpers/liveness.js';
import { type PrivatePgBouncer, pgbouncerMissing, startPgBouncer } from '../../helpers/pgbouncer.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redisServer.js';

/**
 * `afterlife-plane doctor` (issue 27) against one real stack: infra/grants.sql's roles (doctor and the plane run as
 * the reaper's user, with pg_read_all_stats as docs/operations.md grants it), a private Redis, a real DBOS
 * executor with the kit, one reaper tick, the opt-in index. Healthy: every check PASS, exit 0. Then one thing
 * broken at a time, each reported with its fix and exit 1: kits under an application no plane guards, a
 * table DBOS's data source created after the grants ran (also the function's own WARNING at start), a
 * flushed Redis, and a real PgBouncer in transaction mode under a kit's liveness session.
 */
describe('afterlife-plane doctor', () => {
  const app = uniqueName('doctor');
  let tdb: TestDatabase;
  let roles: GrantRoles;
  let redis: PrivateRedis;
  let exec: ExecutorHandle | undefined;
  let pooler: PrivatePgBouncer | undefined;
  const sessions: pg.Client[] = [];
  let env: Record<string, string>;
  let dataSource: string;
  const ownerDb = () => afterlifeDb(tdb.url, { max: 2 });

  const doctor = async (o: { ticking?: boolean } = {}) => {
    // A deployed plane ticks all the time; the suite's one reaper tick is kept fresh instead (its window is
    // the contract's two minutes, which a loaded run of this suite can outlast).
    if (o.ticking !== false) await tdb.sql.query(`UPDATE afterlife.leases SET last_tick_at = now() WHERE name = $1`, [`reaper:${app}`]);
    const run = await runCli(['doctor', '--json', '--role-prefix', roles.prefix], env);
    const out = parseJson(run, DoctorOutput);
    return { code: run.code, out, check: (id: string) => out.checks.find((c) => c.id === id) };
  };

  beforeAll(async () => {
    [tdb, roles, redis] = await Promise.all([createTestDatabase(), grantRoles(), startPrivateRedis()]);
    dataSource = `${roles.prefix}_datasource`;
    await tdb.sql.query(roles.sql);
    await tdb.sql.query(`GRANT pg_read_all_stats TO "${roles.users.reaper}"`);
    await tdb.sql.query(`ALTER ROLE postgres IN DATABASE ${tdb.name} SET idle_in_transaction_session_timeout = '60s'`);
    env = {
      DATABASE_URL: roles.urlAs(tdb.url, roles.users.reaper),
      DBOS_APPLICATION_NAME: app,
      REDIS_URL: redis.url,
      HEARTBEAT_TTL_MS: '3000',
      HEARTBEAT_INTERVAL_MS: '250',
      // The plane's invocations may last 5 minutes: one tick at the start keeps it "ticking" for the whole suite.
      FUNCTION_TIMEOUT_S: '300',
    };
    const indexes = await runCli(['migrate', '--indexes'], { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app });
    expect(indexes.code, indexes.stderr).toBe(0);
    exec = await startExecutor({
      databaseUrl: tdb.url,
      applicationName: app,
      applicationVersion: 'v1',
      executorId: 'doc-1',
      env: kitEnv({ ttlMs: 3_000, env: { REDIS_URL: redis.url, HEARTBEAT_INTERVAL_MS: '250' } }),
    });
    await lockHeld(tdb, 'doc-1');
    const tick = await runCli(['reap', '--ticks', '1'], env);
    expect(tick.code, tick.stderr).toBe(0);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(sessions.map((s) => s.end().catch(() => undefined)));
    await exec?.stop();
    await pooler?.stop();
    await redis?.stop();
    await tdb?.drop();
    await roles?.drop();
    await admin((c) => c.query(`DROP ROLE IF EXISTS "${dataSource}"`));
  });

  it('a healthy stack: every check PASS, exit 0', async () => {
    // The app's data source created dbos.transaction_completion at launch, after the grants ran, as the
    // app's user: the default privileges grants.sql set for that role cover it.
    const later = await tdb.sql.query(`SELECT to_regclass('dbos.transaction_completion')::text AS t`);
    expect(later.rows[0]?.t).toBe('dbos.transaction_completion');
    const { code, out, check } = await doctor();
    expect(out.checks.filter((c) => c.status !== 'PASS')).toEqual([]);
    expect(out.checks.map((c) => c.id)).toEqual([
      'plane',
      'kits',
      'versions',
      'grants',
      'liveness',
      'pooler',
      'unattributed',
      'idle-transactions',
      'redis',
      'index',
      'settings',
    ]);
    // What the kit recorded at registration, as the server and its package say: its version, DBOS's, and
    // the lease the server reports in force on its liveness session.
    expect(check('versions')?.details).toEqual([`executor doc-1: kit ${KIT_VERSION}, @dbos-inc/dbos-sdk 5.3.0`]);
    expect(check('liveness')?.details).toEqual([`executor doc-1: idle_session_timeout ${DEFAULT_LIVENESS_LEASE_MS} ms`]);
    expect(code).toBe(0);
  });

  it('a session DBOS for Python names plain dbos_transact: unattributed WARN naming both fixes, exit 0', async () => {
    // A pg client under the name DBOS for Python 2.30.0 gives its sessions (`_dbos_config.py`): a stand-in for the
    // SDK; test/integration/python/noKit.test.ts meets the real one.
    const python = new pg.Client({ connectionString: tdb.url, application_name: 'dbos_transact' });
    await python.connect();
    try {
      const { code, check } = await doctor();
      expect(check('unattributed')?.status).toBe('WARN');
      expect(check('unattributed')?.details.join('\n')).toMatch(/1 session\(s\) named "dbos_transact" .*DBOS for Python/);
      expect(check('unattributed')?.fix).toMatch(/attach_executor\(\).*dbos_transact_\{executor_id\}_\{application_version\}/);
      expect(code).toBe(0);
    } finally {
      await python.end();
    }
    expect((await doctor()).check('unattributed')?.status).toBe('PASS');
  });

  it('a kit on a DBOS outside the range, and no lease in force on its liveness session: versions and liveness FAIL naming it', async () => {
    const facts = await tdb.sql.query<{ f: unknown }>(`SELECT kit_facts AS f FROM afterlife.executors WHERE executor_id = 'doc-1'`);
    const original = JSON.stringify(facts.rows[0]?.f);
    await tdb.sql.query(
      `UPDATE afterlife.executors SET kit_facts = kit_facts || '{"dbosVersion": "5.1.0", "livenessLeaseMs": 0}'::jsonb WHERE executor_id = 'doc-1'`,
    );
    try {
      const { code, check } = await doctor();
      expect(check('versions')).toMatchObject({
        status: 'FAIL',
        details: [`executor doc-1: kit ${KIT_VERSION}, @dbos-inc/dbos-sdk 5.1.0`],
      });
      expect(check('versions')?.fix).toContain('>=5.2.11 <5.4.0');
      expect(check('liveness')?.status).toBe('FAIL');
      expect(check('liveness')?.details.join('\n')).toContain(
        'executor doc-1: no lease in force on its liveness session (idle_session_timeout 0)',
      );
      expect(code).toBe(1);
    } finally {
      await tdb.sql.query(`UPDATE afterlife.executors SET kit_facts = $1::jsonb WHERE executor_id = 'doc-1'`, [original]);
    }
  });

  it("a plane whose last tick is older than the contract's guard window: plane FAIL, as the kits see it", async () => {
    // FUNCTION_TIMEOUT_S is 300 here: doctor's own window (2 × the timeout) called this plane running for
    // 10 minutes while the kits, on the contract's 2, already warned kit_unwatched.
    await tdb.sql.query(
      `UPDATE afterlife.leases SET last_tick_at = now() - make_interval(secs => $2::double precision / 1000) WHERE name = $1`,
      [`reaper:${app}`, GUARD_TICK_WITHIN_MS + 30_000],
    );
    const { code, check } = await doctor({ ticking: false });
    expect(check('plane')).toMatchObject({ status: 'FAIL' });
    expect(check('plane')?.summary).toMatch(/more than 120 s/);
    expect(code).toBe(1);
  });

  it('a kit under an application no plane guards: kits FAIL naming both names, exit 1', async () => {
    const other = `${app}-dbos-name`;
    const { session } = await holdLiveness(ownerDb(), tdb.url, { applicationName: other, executorId: 'stray-1', incarnation: 'inc-s' });
    sessions.push(session);
    const { code, check } = await doctor();
    expect(check('kits')).toMatchObject({ status: 'FAIL', doc: 'docs/operations.md#check-kits' });
    expect(check('kits')?.summary).toContain(`"${other}"`);
    expect(check('kits')?.summary).toContain(`"${app}"`);
    expect(check('kits')?.fix).toContain('DBOS_APPLICATION_NAME');
    expect(code).toBe(1);
    await session.end();
  });

  it("a table the app's data source created after the grants ran: grants FAIL naming it, the function warns at start; rerunning grants.sql covers it and what that role creates later", async () => {
    await admin(async (c) => {
      await c.query(`CREATE ROLE "${dataSource}" NOLOGIN`);
    });
    await tdb.sql.query(`GRANT USAGE, CREATE ON SCHEMA dbos TO "${dataSource}"`);
    // A second data source connecting as its own user creates its checkpoint table after the grants ran.
    await asRole(
      tdb,
      dataSource,
      `CREATE TABLE dbos.ds_transaction_completion (workflow_id text, function_num int, output text, PRIMARY KEY (workflow_id, function_num))`,
    );
    const { code, check } = await doctor();
    expect(check('grants')?.status).toBe('FAIL');
    for (const r of ['executor_death', 'reaper', 'drain'] as const)
      expect(check('grants')?.details).toContain(`${roles.roles[r]}: SELECT on dbos.ds_transaction_completion`);
    expect(check('grants')?.fix).toContain('infra/grants.sql');
    expect(code).toBe(1);

    const logger = memoryLogger();
    const rt = await createRuntime({ env: { ...env, FUNCTION_TARGET: 'reaper' }, logger, publisher: 'none', migrate: false });
    await rt.lifecycle.shutdown();
    const warning = logger.lines.find((l) => l.event === 'grants_missing');
    expect(warning?.severity).toBe('WARNING');
    expect(warning?.message).toContain('SELECT on dbos.ds_transaction_completion');
    expect(warning?.message).toContain('infra/grants.sql');

    await tdb.sql.query(roles.sql);
    await asRole(tdb, dataSource, `CREATE TABLE dbos.created_by_data_source_later (id int)`);
    expect((await doctor()).check('grants')?.status).toBe('PASS');
  });

  it('a flushed Redis: redis FAIL since the plane last saw it, exit 1', async () => {
    await redis.flushAll();
    const { code, check } = await doctor();
    expect(check('redis')?.status).toBe('FAIL');
    expect(check('redis')?.summary).toMatch(/flushed/);
    expect(code).toBe(1);
    // The plane's next tick sees the reset and starts counting afresh.
    expect((await runCli(['reap', '--ticks', '1'], env)).code).toBe(0);
  });

  it.skipIf(pgbouncerMissing("doctor's pooler check against a real PgBouncer"))(
    "a PgBouncer in transaction mode under a kit's liveness session: pooler FAIL with the fix, exit 1",
    async () => {
      pooler = await startPgBouncer({ poolMode: 'transaction', poolSize: 1 });
      const url = new URL(pooler.via(tdb.url));
      url.searchParams.set('application_name', livenessSessionName('pooled-1', 'inc-p'));
      const { session, took } = await holdLiveness(ownerDb(), url.toString(), {
        applicationName: app,
        executorId: 'pooled-1',
        incarnation: 'inc-p',
      });
      sessions.push(session);
      expect(took[0]).toEqual({ ok: true, recorded: true });
      // Another client of the pool gets the same server session, and PgBouncer gives it that client's name.
      const client = new pg.Client({ connectionString: pooler.via(tdb.url), application_name: 'another_client' });
      sessions.push(client);
      await client.connect();
      await client.query('SELECT 1');

      const { code, check } = await doctor();
      expect(check('pooler')?.status).toBe('FAIL');
      expect(check('pooler')?.details.join('\n')).toMatch(/executor pooled-1: its lock is on backend \d+, now named "another_client"/);
      expect(check('pooler')?.fix).toContain('AFTERLIFE_LIVENESS_DATABASE_URL');
      expect(code).toBe(1);

      const text = await runCli(['doctor', '--role-prefix', roles.prefix], env);
      expect(text.code).toBe(1);
      expect(text.stdout).toMatch(/^FAIL +pooler +/m);
      expect(text.stdout).toContain('see: docs/operations.md#check-pooler');
    },
  );
});

async function lockHeld(tdb: TestDatabase, executorId: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const r = await tdb.sql.query<{ held: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM afterlife.executors x JOIN pg_locks l ON l.pid = x.liveness_pid AND l.locktype = 'advisory' AND l.granted
                       WHERE x.executor_id = $1) AS held`,
      [executorId],
    );
    if (r.rows[0]?.held) return;
    if (Date.now() > deadline) throw new Error(`${executorId} did not take its liveness lock within 15 s`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function asRole(tdb: TestDatabase, role: string, sql: string): Promise<void> {
  const c = await tdb.sql.connect();
  try {
    await c.query(`SET ROLE "${role}"`);
    await c.query(sql);
  } finally {
    await c.query('RESET ROLE');
    c.release();
  }
}
