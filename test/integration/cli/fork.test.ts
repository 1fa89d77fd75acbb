import { DBOSClient } from '@dbos-inc/dbos-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorOutput, ForkOutput } from '../../../cli/schemas.js';
import { parseJson, runCli } from '../../helpers/cli.js';
import { createTestDatabase, type TestDatabase, uniqueName, waitFor } from '../../helpers/db.js';
import { type ExecutorHandle, startExecutor } from '../../helpers/executor.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * `afterlife-plane fork` against real services: a real DBOS executor runs workflows that really end in
 * DBOSUnexpectedStepError (code 26); the CLI forks one from its divergent step, then a fork of that fork,
 * then hits the lineage bound (dead letter). --from-step past the divergent step, an ordinary ERROR and a
 * missing workflow are refused with exit 1; a bad --from-step is a usage error.
 */
describe('afterlife-plane fork', () => {
  let tdb: TestDatabase;
  let executor: ExecutorHandle | undefined;
  let client: DBOSClient | undefined;
  const app = uniqueName('cli-fork');
  let env: Record<string, string>;

  const status = async (id: string) =>
    (await tdb.sql.query<{ status: string }>(`SELECT status FROM dbos.workflow_status WHERE workflow_uuid = $1`, [id])).rows[0]?.status;
  const waitError = (id: string) => waitFor(`${id} ERROR`, async () => (await status(id)) === 'ERROR', { timeoutMs: 30_000 });

  beforeAll(async () => {
    tdb = await createTestDatabase();
    // MAX_FORKS, the deprecated name of MAX_REPAIRS, on purpose: the CLI driven from outside still honours it.
    env = { DATABASE_URL: tdb.url, DBOS_APPLICATION_NAME: app, REDIS_URL: TEST_REDIS_URL, MAX_FORKS: '2', FORK_TARGET_VERSION: 'original' };
    executor = await startExecutor({
      databaseUrl: tdb.url,
      applicationName: app,
      applicationVersion: 'v1',
      executorId: 'exec-1',
      queues: { forks: {} },
    });
    client = await DBOSClient.create({ systemDatabaseUrl: tdb.url, applicationName: app, systemDatabasePoolSize: 2 });
    for (const id of ['div-1', 'div-2'])
      await client.enqueue({ queueName: 'forks', workflowName: 'alwaysDivergentWorkflow', workflowID: id, appVersion: 'v1' });
    await client.enqueue({ queueName: 'forks', workflowName: 'failingWorkflow', workflowID: 'plain', appVersion: 'v1' });
    for (const id of ['div-1', 'div-2', 'plain']) await waitError(id);
  });
  afterAll(async () => {
    await client?.destroy();
    await executor?.stop();
    await tdb?.drop();
  });

  it('forks a diverged workflow from its divergent step, then its fork, then dead-letters the lineage', async () => {
    const first = await runCli(['fork', 'div-1', '--json'], env, 60_000);
    expect(first.code, first.stderr).toBe(0);
    expect(parseJson(first, ForkOutput)).toMatchObject({
      outcome: 'forked',
      newWorkflowId: 'div-1-fork-1',
      root: 'div-1',
      n: 1,
      startStep: 1,
      reason: 'diverged',
    });
    // The fork runs (on the queue of the original) and, this workflow being what it is, diverges again.
    await waitError('div-1-fork-1');
    const forked = await tdb.sql.query(`SELECT forked_from, queue_name FROM dbos.workflow_status WHERE workflow_uuid = 'div-1-fork-1'`);
    expect(forked.rows[0]).toEqual({ forked_from: 'div-1', queue_name: 'forks' });

    // Again on the original: the deterministic ID exists, so nothing new.
    const again = await runCli(['fork', 'div-1'], env, 60_000);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe('div-1 was already forked as div-1-fork-1 (fork 1 of lineage div-1); nothing new.\n');

    const second = await runCli(['fork', 'div-1-fork-1', '--from-step', '0', '--json'], env, 60_000);
    expect(second.code, second.stderr).toBe(0);
    expect(parseJson(second, ForkOutput)).toMatchObject({
      outcome: 'forked',
      newWorkflowId: 'div-1-fork-2',
      root: 'div-1',
      n: 2,
      startStep: 0,
    });
    await waitError('div-1-fork-2');

    const third = await runCli(['fork', 'div-1-fork-2', '--json'], env, 60_000);
    expect(third.code).toBe(1);
    expect(parseJson(third, ForkOutput)).toMatchObject({ outcome: 'dead-lettered', root: 'div-1', forks: 2 });

    const ledger = await tdb.sql.query(`SELECT root_workflow_id, n, from_step, new_workflow_id, forked_by FROM afterlife.forks ORDER BY n`);
    expect(
      ledger.rows.map((r: { n: number; from_step: number; new_workflow_id: string }) => [r.n, r.from_step, r.new_workflow_id]),
    ).toEqual([
      [1, 1, 'div-1-fork-1'],
      [2, 0, 'div-1-fork-2'],
    ]);
    expect((await tdb.sql.query(`SELECT 1 FROM afterlife.dead_letters WHERE root_workflow_id = 'div-1'`)).rowCount).toBe(1);
  });

  it('refuses what it must not fork, with exit 1; bad arguments exit 2', async () => {
    const past = await runCli(['fork', 'div-2', '--from-step', '2', '--json'], env, 60_000);
    expect(past.code).toBe(1);
    expect(parseJson(past, ErrorOutput).error.message).toMatch(/--from-step 2 is past the first divergent step 1 of div-2/);

    const plain = await runCli(['fork', 'plain', '--json'], env, 60_000);
    expect(plain.code).toBe(1);
    expect(parseJson(plain, ForkOutput)).toMatchObject({ outcome: 'skipped', skippedBecause: 'not-diverged', status: 'ERROR' });
    const missing = await runCli(['fork', 'no-such-workflow'], env, 60_000);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(/does not exist/);
    expect((await tdb.sql.query(`SELECT 1 FROM dbos.workflow_status WHERE forked_from IN ('div-2', 'plain')`)).rowCount).toBe(0);

    expect((await runCli(['fork'], env)).code).toBe(2);
    expect((await runCli(['fork', 'div-2', '--from-step', 'two'], env)).code).toBe(2);
  });
});
