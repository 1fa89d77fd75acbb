import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DrainOutput, RecoverOutput, ReapOutput, StatusOutput } from '../../../cli/schemas.js';
import { parseJson, runCli } from '../../helpers/cli.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { holdLiveness } from '../../helpers/liveness.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * What the CLI tells an operator (issue 27), each item a bug found by running it as a new user would:
 * a configuration error as clean lines, no pg DeprecationWarning from `fork`, a dry run that writes
 * nothing yet lists the death a real run would declare, `recover --dry-run` saying the real run would be
 * refused, executors that drained shown as drained, and `drain --wait` not counting dead executors.
 * One database and no executor process: rows and a held liveness lock stand in for them.
 */
describe('the CLI tells an operator the truth', () => {
  let tdb: TestDatabase;
  const app = uniqueName('cli-text');
  let env: Record<string, string>;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    env = { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app, REDIS_URL: TEST_REDIS_URL, UNKNOWN_EXECUTOR_GRACE_MS: '60000' };
  });
  afterAll(async () => {
    await tdb?.drop();
  });

  it('a configuration error is one clean line per problem, naming what to set', async () => {
    const run = await runCli(['status'], {});
    expect(run.code).toBe(2);
    expect(run.stderr).not.toContain('\\n');
    expect(run.stderr).not.toMatch(/Invalid input|received undefined/);
    expect(run.stderr).toMatch(/^afterlife: invalid configuration:\n {2}- DBOS_APPLICATION_NAME: not set; .*--app NAME/m);
    expect(run.stderr).toMatch(/^ {2}- DATABASE_URL: set DATABASE_URL/m);
  });

  it('fork of a missing workflow says so without a pg DeprecationWarning', async () => {
    const run = await runCli(['fork', 'nope-123'], env, 60_000);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain('does not exist');
    expect(run.stderr).not.toMatch(/DeprecationWarning|already executing a query/);
  });

  it('reap --dry-run writes no observation, and still lists the death two ticks show', async () => {
    // exec-ghost: no kit, no session, PENDING rows quiet for an hour: a real run declares it on its second tick.
    const hourAgo = Date.now() - 3_600_000;
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, created_at, updated_at)
       VALUES ('ghost-1', 'PENDING', 'agentWorkflow', 'exec-ghost', 'v1', $1, $2, $2)`,
      [app, hourAgo],
    );
    const run = await runCli(['reap', '--dry-run', '--ticks', '2', '--json'], env, 60_000);
    expect(run.code, run.stderr).toBe(0);
    const out = parseJson(run, ReapOutput);
    expect(out.planned.map((p) => [p.pass, p.executorId])).toContainEqual(['dead', 'exec-ghost']);
    const observed = await tdb.sql.query(`SELECT 1 FROM afterlife.executor_observations WHERE application_name = $1`, [app]);
    expect(observed.rowCount).toBe(0);
    const ticked = await tdb.sql.query(`SELECT last_tick_at FROM afterlife.leases WHERE name = $1`, [`reaper:${app}`]);
    expect(ticked.rows[0]?.last_tick_at ?? null).toBeNull();
    await tdb.sql.query(`DELETE FROM dbos.workflow_status WHERE workflow_uuid = 'ghost-1'`);
  });

  it('recover --dry-run on a live executor says the real run would be refused', async () => {
    const db = afterlifeDb(tdb.url);
    const held = await holdLiveness(db, tdb.url, { applicationName: app, executorId: 'exec-live', incarnation: 'inc-1' });
    try {
      expect(held.took[0]?.ok).toBe(true);
      const text = await runCli(['recover', 'exec-live', '--dry-run'], env);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toMatch(/nothing changed; the real run would be refused: exec-live holds its liveness lock/);
      const json = parseJson(await runCli(['recover', 'exec-live', '--dry-run', '--json'], env), RecoverOutput);
      expect(json.wouldRefuse).toMatch(/holds its liveness lock/);
    } finally {
      await held.session.end();
      await db.pool.end();
    }
  });

  it('an executor that drained shows as drained, and drain --wait leaves dead ones out of "requested"', async () => {
    // What the registry holds after a clean drain (the kit's own death notice marks it dead, reason
    // drained) and after a crash (declared by the reaper), both of version v9.
    await tdb.sql.query(
      `INSERT INTO afterlife.executors (application_name, executor_id, application_version, state, reason, detected_by)
       VALUES ($1, 'exec-drained', 'v9', 'dead', 'drained', 'executor'), ($1, 'exec-crashed', 'v9', 'dead', 'heartbeat-lapsed', 'reaper')`,
      [app],
    );
    const status = parseJson(await runCli(['status', '--json'], env), StatusOutput);
    const state = (id: string) => status.executors.find((e) => e.executorId === id)?.state;
    expect(state('exec-drained')).toBe('drained');
    expect(state('exec-crashed')).toBe('dead');

    const run = await runCli(['drain', '--version', 'v9', '--wait', '--timeout-s', '10', '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/requested for 0 executor\(s\).*2 dead one\(s\) of the version left out/);
    const out = parseJson(run, DrainOutput);
    expect(out.done).toBe(true);
    expect(out.executors).toEqual([]);
  });

  it('kits under an application no plane guards: the reaper logs unguarded_application, status shows them', async () => {
    const other = `${app}-other`;
    const db = afterlifeDb(tdb.url);
    const held = await holdLiveness(db, tdb.url, { applicationName: other, executorId: 'exec-elsewhere', incarnation: 'inc-2' });
    try {
      // Registered a moment ago: a plane starting for it gets its grace, so no warning yet (a fresh start
      // of the local stack, which starts one per application as its kits appear, must log no false one).
      const early = await runCli(['reap', '--ticks', '1', '--verbose'], env, 60_000);
      expect(early.code, early.stderr).toBe(0);
      expect(early.stderr).not.toContain('unguarded_application');
      await tdb.sql.query(
        `UPDATE afterlife.executors SET state_changed_at = now() - interval '1 minute' WHERE executor_id = 'exec-elsewhere'`,
      );
      const reap = await runCli(['reap', '--ticks', '1', '--verbose'], env, 60_000);
      expect(reap.code, reap.stderr).toBe(0);
      const line = reap.stderr.split('\n').find((l) => l.includes('unguarded_application'));
      expect(line, reap.stderr).toBeDefined();
      expect(line).toContain(other);
      expect(line).toContain('exec-elsewhere');
      const status = await runCli(['status'], env);
      expect(status.stdout).toMatch(new RegExp(`UNGUARDED: 1 live kit\\(s\\) under application ${other} \\(exec-elsewhere\\)`));
      expect(parseJson(await runCli(['status', '--json'], env), StatusOutput).unguarded).toEqual([
        { applicationName: other, kits: 1, executorIds: ['exec-elsewhere'] },
      ]);
      // A plane ticking for it (its lease recorded a tick): guarded, so no longer reported.
      await runCli(['reap', '--ticks', '1', '--app', other], env, 60_000);
      expect(parseJson(await runCli(['status', '--json'], env), StatusOutput).unguarded).toEqual([]);
    } finally {
      await held.session.end();
      await db.pool.end();
    }
  });
});
