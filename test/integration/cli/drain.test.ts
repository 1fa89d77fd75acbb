import { describe, expect, it } from 'vitest';
import { DrainOutput, ErrorOutput } from '../../../cli/schemas.js';
import { cliFixture, parseJson, runCli } from '../../helpers/cli.js';
import { waitFor } from '../../helpers/db.js';
import { statuses } from '../../helpers/kit.js';

/**
 * `afterlife-plane drain --version V --wait` against real services: a real DBOS executor with the kit holds
 * work; the CLI writes the drain request, the kit picks it up on its next beat, finishes what it holds and
 * reports drained; --wait follows that on stderr and ends with done. Another version is untouched.
 */
describe('afterlife-plane drain', () => {
  const f = cliFixture('cli-drain');

  it('--wait follows the drain to done; --json validates against DrainOutput', async () => {
    const { tdb, env, app } = f;
    const v1 = await f.executor('exec-v1', 'v1', { kit: true });
    await f.executor('exec-v2', 'v2', { kit: true });
    const held = ['dr-0', 'dr-1'];
    // Long enough that the drain is seen in progress (the CLI polls every second) before the work ends.
    for (const id of held) await v1.start(id, { steps: 3, stepMs: 1_500 });
    await waitFor(
      'v1 registered',
      async () => (await tdb.sql.query(`SELECT 1 FROM afterlife.executors WHERE executor_id = 'exec-v1'`)).rowCount === 1,
    );

    const run = await runCli(['drain', '--version', 'v1', '--wait', '--timeout-s', '40', '--json'], env, 60_000);
    expect(run.code, run.stderr).toBe(0);
    const out = parseJson(run, DrainOutput);
    expect(out).toMatchObject({ applicationVersion: 'v1', waited: true, timedOut: false, done: true, pending: 0, enqueued: 0 });
    expect(out.requestIds).toHaveLength(1);
    expect(out.executors).toMatchObject([{ executorId: 'exec-v1', state: 'drained', pending: 0 }]);
    // Progress went to stderr, from requested through draining to drained.
    expect(run.stderr).toMatch(/drain of v1 requested for 1 executor\(s\)/);
    expect(run.stderr).toMatch(/1 executor\(s\) \(1 draining\), [1-9]\d* PENDING/);
    expect(run.stderr).toMatch(/1 executor\(s\) \(1 drained\), 0 PENDING/);
    expect(await statuses(tdb.sql, held)).toEqual({ SUCCESS: 2 });
    const reg = await tdb.sql.query(`SELECT executor_id, state FROM afterlife.executors WHERE application_name = $1 ORDER BY 1`, [app]);
    expect(reg.rows).toEqual([
      { executor_id: 'exec-v1', state: 'drained' },
      { executor_id: 'exec-v2', state: 'alive' },
    ]);

    // Without --wait: the request and a table, nothing waited for.
    const text = await runCli(['drain', '--version', 'v2'], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^drain of v2 requested \(1 request\(s\)\)/);
    expect(text.stdout).toMatch(/^EXECUTOR\s+STATE\s+VERSION\s+HEARTBEAT\s+IN-FLIGHT\s+PENDING$/m);
    // The kit hears the request on its liveness session as it commits, so the table may already say draining.
    expect(text.stdout).toMatch(/^exec-v2\s+(alive|draining)\s+v2\s+/m);
  });

  it('a wait that times out exits 1 with the progress; usage errors exit 2', async () => {
    const { tdb, env, app } = f;
    // exec-gone never beats and is not in the registry: its PENDING row keeps the version from being done.
    await tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name) VALUES ('stuck-1', 'PENDING', 'agentWorkflow', 'exec-gone', 'v9', $1)`,
      [app],
    );
    const run = await runCli(['drain', '--version', 'v9', '--wait', '--timeout-s', '1', '--json'], env);
    expect(run.code).toBe(1);
    expect(parseJson(run, DrainOutput)).toMatchObject({ done: false, timedOut: true, pending: 1 });

    const missing = await runCli(['drain', '--json'], env);
    expect(missing.code).toBe(2);
    expect(parseJson(missing, ErrorOutput).error).toMatchObject({ code: 'usage', message: 'drain needs --version V' });
    expect((await runCli(['drain', '--version', 'v1', '--timeout-s', 'soon'], env)).code).toBe(2);
  });
});
