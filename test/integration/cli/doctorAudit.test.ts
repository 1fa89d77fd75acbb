import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DoctorOutput } from '../../../cli/schemas.js';
import { DEFAULT_LIVENESS_LEASE_MS } from '../../../packages/executor/src/contract/lease.js';
import { registerAlive } from '../../../packages/executor/src/db/queries/executors.js';
import type { Db } from '../../../packages/executor/src/db/pool.js';
import { KIT_VERSION } from '../../../packages/executor/src/version.js';
import { loadConfig } from '../../../shared/config/index.js';
import { livenessCheck } from '../../../shared/doctor/liveness.js';
import type { DoctorDeps } from '../../../shared/doctor/types.js';
import { versionsCheck } from '../../../shared/doctor/versions.js';
import { parseJson, runCli } from '../../helpers/cli.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { grantRoles, type GrantRoles } from '../../helpers/grants.js';
import { holdLiveness } from '../../helpers/liveness.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redisServer.js';

/**
 * `afterlife-plane doctor` on what an audit found it misjudging, run as the reaper's user of infra/grants.sql:
 * a fresh stack (a plane ticking, a Redis it never had a reason to read, no kit yet) exits 0; with 1,000
 * registry rows a kit on an unsupported DBOS, or one with no lease in force, is named wherever its ID sorts;
 * and names carrying line breaks (an executor ID, an application name, a refusal's detail) cannot print a
 * line of their own in the text output.
 */
describe('afterlife-plane doctor: fresh stacks, large fleets, hostile names', () => {
  const app = uniqueName('docaudit');
  let tdb: TestDatabase;
  let roles: GrantRoles;
  let redis: PrivateRedis;
  let env: Record<string, string>;
  let owner: Db;

  beforeAll(async () => {
    [tdb, roles, redis] = await Promise.all([createTestDatabase(), grantRoles(), startPrivateRedis()]);
    owner = afterlifeDb(tdb.url, { max: 4 });
    await tdb.sql.query(roles.sql);
    await tdb.sql.query(`GRANT pg_read_all_stats TO "${roles.users.reaper}"`);
    await tdb.sql.query(`ALTER ROLE postgres IN DATABASE ${tdb.name} SET idle_in_transaction_session_timeout = '60s'`);
    env = {
      DATABASE_URL: roles.urlAs(tdb.url, roles.users.reaper),
      DBOS_APPLICATION_NAME: app,
      REDIS_URL: redis.url,
      FUNCTION_TIMEOUT_S: '300',
    };
    const indexes = await runCli(['migrate', '--indexes'], { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app });
    expect(indexes.code, indexes.stderr).toBe(0);
  }, 60_000);

  afterAll(async () => {
    await owner?.end();
    await redis?.stop();
    await tdb?.drop();
    await roles?.drop();
  });

  it('a fresh plane with no kits: the plane ticked, Redis was never read, doctor exits 0', async () => {
    const tick = await runCli(['reap', '--ticks', '1'], env);
    expect(tick.code, tick.stderr).toBe(0);
    const run = await runCli(['doctor', '--json', '--role-prefix', roles.prefix], env);
    const out = parseJson(run, DoctorOutput);
    expect(out.checks.filter((c) => c.status === 'FAIL')).toEqual([]);
    expect(out.checks.find((c) => c.id === 'redis')).toMatchObject({ status: 'PASS' });
    expect(run.code).toBe(0);
  });

  const deps = (applicationName: string): DoctorDeps => ({
    db: owner,
    config: loadConfig({ DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: applicationName }),
    redis: undefined,
    rolePrefix: roles.prefix,
  });

  /** `count` healthy live kits of `applicationName`, as a kit registers and records itself (no liveness lock). */
  const fleet = async (applicationName: string, count: number) => {
    for (let i = 0; i < count; i++)
      await registerAlive(owner, {
        applicationName,
        executorId: `kit-${String(i).padStart(4, '0')}`,
        applicationVersion: 'v1',
        startedAt: new Date(),
        heartbeats: true,
        liveness: false,
        incarnation: `inc-${i}`,
      });
    await tdb.sql.query(
      `UPDATE afterlife.executors
          SET kit_facts = jsonb_build_object('incarnation', incarnation, 'kitVersion', $2::text, 'dbosVersion', '5.3.0',
                                             'livenessLeaseMs', $3::int, 'pollsOnRequest', true)
        WHERE application_name = $1`,
      [applicationName, KIT_VERSION, DEFAULT_LIVENESS_LEASE_MS],
    );
  };

  it('1,000 registry rows: a kit on an unsupported DBOS is named wherever it sorts', { timeout: 120_000 }, async () => {
    for (const bad of ['aaa-bad', 'zzz-bad']) {
      const many = uniqueName('docmany');
      await fleet(many, 999);
      await registerAlive(owner, {
        applicationName: many,
        executorId: bad,
        applicationVersion: 'v1',
        startedAt: new Date(),
        heartbeats: true,
        liveness: false,
        incarnation: 'inc-bad',
      });
      await tdb.sql.query(
        `UPDATE afterlife.executors SET kit_facts = jsonb_build_object('incarnation', 'inc-bad', 'kitVersion', $3::text, 'dbosVersion', '5.1.0')
          WHERE application_name = $1 AND executor_id = $2`,
        [many, bad, KIT_VERSION],
      );
      const r = await versionsCheck.run(deps(many));
      expect(r.status, `${bad}: ${r.summary}`).toBe('FAIL');
      expect(r.details).toEqual([`executor ${bad}: kit ${KIT_VERSION}, @dbos-inc/dbos-sdk 5.1.0`]);
    }
    // And healthy, the PASS counts every one of them (it says "each"), printing a bounded list.
    const healthy = uniqueName('dochealthy');
    await fleet(healthy, 1_000);
    const ok = await versionsCheck.run(deps(healthy));
    expect(ok.status).toBe('PASS');
    expect(ok.summary).toMatch(/; 1000 live kit\(s\), each kit/);
    expect(ok.details.length).toBeLessThanOrEqual(50);
    expect(ok.details.at(-1)).toMatch(/… and \d+ more/);
  });

  it(
    '1,000 registry rows: a kit with no lease in force on its liveness session is named wherever it sorts',
    { timeout: 120_000 },
    async () => {
      const many = uniqueName('doclease');
      await fleet(many, 999);
      const { session, took } = await holdLiveness(owner, tdb.url, {
        applicationName: many,
        executorId: 'zzz-unleased',
        incarnation: 'inc-z',
      });
      try {
        expect(took[0]?.ok).toBe(true);
        await tdb.sql.query(
          `UPDATE afterlife.executors SET kit_facts = jsonb_build_object('incarnation', 'inc-z', 'kitVersion', $2::text, 'dbosVersion', '5.3.0', 'livenessLeaseMs', 0)
          WHERE application_name = $1 AND executor_id = 'zzz-unleased'`,
          [many, KIT_VERSION],
        );
        const r = await livenessCheck.run(deps(many));
        expect(r.status, r.summary).toBe('FAIL');
        expect(r.details.join('\n')).toMatch(/executor zzz-unleased: no lease in force/);
      } finally {
        await session.end();
      }
    },
  );

  it('line breaks in an executor ID, an application name or a refusal detail cannot forge a line of doctor’s text', async () => {
    const forged = (what: string) => `${what}\nPASS  forged  all is well\r\n10 passed, 0 warned, 0 failed\n`;
    await registerAlive(owner, {
      applicationName: app,
      executorId: forged('exec'),
      applicationVersion: 'v1',
      startedAt: new Date(),
      heartbeats: true,
      liveness: false,
      incarnation: 'inc-forged',
    });
    await tdb.sql.query(
      `UPDATE afterlife.executors SET kit_facts = jsonb_build_object('incarnation', 'inc-forged', 'kitVersion', $2::text, 'dbosVersion', '5.1.0')
        WHERE application_name = $1 AND incarnation = 'inc-forged'`,
      [app, KIT_VERSION],
    );
    await registerAlive(owner, {
      applicationName: forged('app'),
      executorId: 'stray',
      applicationVersion: 'v1',
      startedAt: new Date(),
      heartbeats: true,
      liveness: false,
      incarnation: 'inc-stray',
    });
    await tdb.sql.query(
      `INSERT INTO afterlife.kit_refusals (application_name, executor_id, incarnation, reason, detail) VALUES ($1, $2, 'inc-r', 'pooler', $3)`,
      [app, forged('refused'), forged('detail')],
    );
    const run = await runCli(['doctor', '--role-prefix', roles.prefix], env);
    const json = parseJson(await runCli(['doctor', '--json', '--role-prefix', roles.prefix], env), DoctorOutput);
    const lines = run.stdout.split('\n');
    // One status line per check, one summary line, and the names escaped where they stand.
    expect(lines.filter((l) => /^(PASS|WARN|FAIL)\s/.test(l))).toHaveLength(json.checks.length);
    expect(lines.filter((l) => /^\d+ passed, \d+ warned, \d+ failed$/.test(l))).toHaveLength(1);
    expect(lines.some((l) => /forged/.test(l) && !/\\n/.test(l))).toBe(false);
    expect(run.stdout).toContain('exec\\nPASS  forged  all is well\\r\\n10 passed');
    expect(run.stdout).toContain('detail\\nPASS  forged');
    expect(run.stdout).toContain('app\\nPASS  forged');
    // The exit code and --json were true all along; the names reach --json as they are.
    expect(run.code).toBe(1);
    expect(JSON.stringify(json)).toContain(JSON.stringify(forged('exec')).slice(1, -1));
  });
});
