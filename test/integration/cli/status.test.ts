import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '../../../packages/executor/src/lock/redis.js';
import { ErrorOutput, StatusOutput } from '../../../cli/schemas.js';
import { beat } from '../../helpers/agents.js';
import { parseJson, runCli } from '../../helpers/cli.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * `afterlife-plane status` against real Postgres, Redis and a real DBOS executor: a live executor with a
 * heartbeat and PENDING work, an executor afterlife never heard of that still owns quiet PENDING rows
 * (stuck), a dead one in the registry, and a diverged workflow.
 */
describe('afterlife-plane status', () => {
  let tdb: TestDatabase;
  let executor: ExecutorHandle | undefined;
  const redis = createRedis(TEST_REDIS_URL);
  const app = uniqueName('cli-status');
  let env: Record<string, string>;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    env = { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app, REDIS_URL: TEST_REDIS_URL, STUCK_AFTER_MS: '600000' };
    executor = await startExecutor({ databaseUrl: tdb.url, applicationName: app, applicationVersion: 'v1', executorId: 'exec-live' });
    for (const id of ['live-1', 'live-2']) await executor.start(id, { steps: 2, stepMs: 30_000 });
    await beat(redis, app, 'exec-live', 'v1');
    await waitFor('live workflows PENDING', async () => {
      const r = await tdb.sql.query(`SELECT 1 FROM dbos.workflow_status WHERE executor_id = 'exec-live' AND status = 'PENDING'`);
      return r.rowCount === 2;
    });
    // exec-gone: never heard of, three PENDING rows quiet for two hours (stuck), one of them newer.
    const twoHoursAgo = Date.now() - 2 * 3_600_000;
    for (const [id, at] of [
      ['gone-1', twoHoursAgo],
      ['gone-2', twoHoursAgo],
      ['gone-3', Date.now()],
    ] as const) {
      await tdb.sql.query(
        `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, created_at, updated_at)
         VALUES ($1, 'PENDING', 'agentWorkflow', 'exec-gone', 'v0', $2, $3, $3)`,
        [id, app, at],
      );
    }
    await tdb.sql.query(
      `INSERT INTO afterlife.executors (application_name, executor_id, application_version, state, reason, detected_by)
       VALUES ($1, 'exec-dead', 'v1', 'dead', 'heartbeat-lapsed', 'reaper')`,
      [app],
    );
    // A diverged workflow: ERROR with DBOSUnexpectedStepError (code 26) in workflow_output, as DBOS records it.
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name) VALUES ('div-1', 'ERROR', 'agentWorkflow', 'exec-dead', 'v1', $1)`,
      [app],
    );
    await tdb.sql.query(`INSERT INTO dbos.workflow_output (workflow_uuid, error) VALUES ('div-1', $1)`, [
      JSON.stringify({
        json: { dbosErrorCode: 26, workflowID: 'div-1', stepID: 1, name: 'Error', message: 'During execution ...' },
        __dbos_serializer: 'superjson',
      }),
    ]);
  });
  afterAll(async () => {
    await executor?.stop();
    redis.disconnect();
    await tdb?.drop();
  });

  it('--json validates against StatusOutput and reports executors, stuck and diverged counts', async () => {
    const run = await runCli(['status', '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    const s = parseJson(run, StatusOutput);
    expect(s.applicationName).toBe(app);
    expect(s.redis).toBe('ok');
    const byId = Object.fromEntries(s.executors.map((e) => [e.executorId, e]));
    expect(byId['exec-live']).toMatchObject({ state: 'alive', applicationVersions: ['v1'], pending: 2, stuck: 0, inFlight: 0 });
    expect(byId['exec-live']?.heartbeatAgeMs).toBeLessThan(60_000);
    expect(byId['exec-live']?.heartbeatTtlMs).toBeGreaterThan(0);
    expect(byId['exec-gone']).toMatchObject({
      state: 'unknown',
      livenessLock: 'free',
      applicationVersions: ['v0'],
      pending: 3,
      stuck: 2,
      heartbeatAgeMs: null,
    });
    expect(byId['exec-gone']?.oldestActivityAgeMs).toBeGreaterThanOrEqual(2 * 3_600_000 - 60_000);
    expect(byId['exec-dead']).toMatchObject({ state: 'dead', pending: 0, reason: 'heartbeat-lapsed' });
    expect(s.totals).toMatchObject({ pending: 5, stuck: 2, diverged: 1, alive: 1, executors: 3 });
    expect(s.totals.byStatus).toMatchObject({ PENDING: 5, ERROR: 1 });
  });

  it('prints a table on a terminal', async () => {
    const run = await runCli(['status'], env);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.split('\n');
    expect(
      lines.some((l) => /^EXECUTOR\s+STATE\s+LOCK\s+VERSION\s+HEARTBEAT\s+IN-FLIGHT\s+PENDING\s+STUCK\s+OLDEST ACTIVITY$/.test(l)),
    ).toBe(true);
    expect(lines.some((l) => /^exec-live\s+alive\s+free\s+v1\s+\S+ ago\s+0\s+2\s+0\s+/.test(l))).toBe(true);
    expect(lines.some((l) => /^exec-gone\s+unknown\s+free\s+v0\s+-\s+-\s+3\s+2\s+2h0\dm ago$/.test(l))).toBe(true);
    expect(run.stdout).toMatch(/stuck: 2 .*diverged: 1/);
  });

  it('a live executor whose heartbeat lapsed shows as lapsed; without Redis the registry state shows and redis is not-configured', async () => {
    await tdb.sql.query(
      `INSERT INTO afterlife.executors (application_name, executor_id, application_version, state) VALUES ($1, 'exec-quiet', 'v1', 'alive')`,
      [app],
    );
    const withRedis = parseJson(await runCli(['status', '--json'], env), StatusOutput);
    expect(withRedis.executors.find((e) => e.executorId === 'exec-quiet')?.state).toBe('lapsed');
    const noRedis = parseJson(await runCli(['status', '--json'], { ...env, REDIS_URL: '' }), StatusOutput);
    expect(noRedis.redis).toBe('not-configured');
    expect(noRedis.executors.find((e) => e.executorId === 'exec-quiet')?.state).toBe('alive');
  });

  it('clear errors and exit codes: configuration (2), usage (2), a database without DBOS (1)', async () => {
    const noApp = await runCli(['status', '--json'], { DATABASE_URL: tdb.url });
    expect(noApp.code).toBe(2);
    expect(parseJson(noApp, ErrorOutput).error.code).toBe('invalid_config');
    const bad = await runCli(['status', '--bogus'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/Unknown option '--bogus'/);
    const unknown = await runCli(['statuz'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command "statuz"/);
    const u = new URL(tdb.url);
    u.pathname = '/postgres';
    const noDbos = await runCli(['status'], { ...env, DATABASE_URL: u.toString() });
    expect(noDbos.code).toBe(1);
    expect(noDbos.stderr).toMatch(/DBOS system schema "dbos" not found/);
  });
});
