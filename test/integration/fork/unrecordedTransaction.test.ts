import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { repairDepsFromRuntime } from '../../../shared/repair/deps.js';
import { repairOrphaned } from '../../../shared/repair/situations/orphaned.js';
import { recoverExecutor } from '../../../shared/recovery/recoverExecutor.js';
import { waitFor } from '../../helpers/db.js';
import { startExecutor } from '../../helpers/executor.js';
import { testRuntime } from '../../helpers/runtime.js';
import { repairFixture } from '../../helpers/repair.js';
import { enqueue, forksOf, QUEUES, waitStatus } from './helpers.js';

/**
 * A data-source transaction commits its checkpoint (dbos.transaction_completion, with the user's writes)
 * before DBOS records the step in dbos.operation_outputs. An executor that dies between the two leaves a
 * transaction that was applied but that the system database never saw, and afterlife's same-path repairs
 * cut right after the last recorded step: right on it. A fork there (a new ID the checkpoint does not know)
 * would apply it a second time; only a repair under the workflow's own ID is served the checkpoint.
 *
 * The window is held open with a real lock rather than timing: an uncommitted operation_outputs row at
 * step 2 of each chargingWorkflow (examples/agent-app/transactional.ts) makes exec-v1's own checkpoint
 * INSERT wait after charge-a committed; exec-v1 is then SIGKILLed in that wait. Its rows are re-enqueued
 * on v1 while only v2 runs, and ORPHANED_VERSION_POLICY=fork-to-latest repairs each one:
 *   wf-rewind  REPAIR_MODE=rewind: rewound under its own ID onto v2, served charge-a: charged once.
 *   wf-fork    REPAIR_MODE=fork: the fork is refused and the row left ENQUEUED for a repair under its ID.
 *   wf-blind   REPAIR_MODE=fork with the check blind: the fork is made and charge-a is applied twice,
 *              what the check exists to prevent.
 */
describe('repair of an orphan whose last transaction committed but was never recorded as a step', () => {
  let forkRt: ReturnType<typeof testRuntime>;
  let blindRt: ReturnType<typeof testRuntime>;
  let blocker: pg.Client | undefined;
  const ids = ['wf-rewind', 'wf-fork', 'wf-blind'];
  const orphanOf = (id: string) => ({ applicationName: f.app, executorId: 'exec-v1', applicationVersion: 'v1', workflowIds: [id] });

  const charges = async (like: string) =>
    (
      await f.tdb.sql.query<{ workflow_id: string; item: string; executor_id: string }>(
        `SELECT workflow_id, item, executor_id FROM public.charges WHERE workflow_id LIKE $1 ORDER BY workflow_id`,
        [like],
      )
    ).rows;
  const recordedSteps = async (id: string) =>
    (
      await f.tdb.sql.query<{ function_id: number }>(`SELECT function_id FROM dbos.operation_outputs WHERE workflow_uuid = $1 ORDER BY 1`, [
        id,
      ])
    ).rows.map((r) => r.function_id);

  const f = repairFixture('app-unrec', {
    env: { ORPHANED_VERSION_POLICY: 'fork-to-latest' },
    setupTimeoutMs: 120_000,
    setup: async ({ tdb, rt, client, app, executors }) => {
      f.onClose(() => blocker?.end().catch(() => undefined));
      const env = { ORPHANED_VERSION_POLICY: 'fork-to-latest' };
      forkRt = f.runtime({ env: { ...env, REPAIR_MODE: 'fork' } });
      // The same deployment with the check blind (no schema holding the checkpoints): what a missing check does.
      blindRt = f.runtime({ env: { ...env, REPAIR_MODE: 'fork', DATASOURCE_SCHEMAS: 'no_such_schema' } });

      // Enqueued before any v1 executor runs, so the fault is in place before the first step.
      // v1 never gets past step 2, so the last step's duration is v2's alone.
      for (const id of ids) await enqueue(client, 'chargingWorkflow', id, 'v1', { key: id, lastStepMs: 1_000 });
      blocker = new pg.Client({ connectionString: tdb.url, application_name: 'fault-unrecorded-step' });
      await blocker.connect();
      await blocker.query('BEGIN');
      await blocker.query(
        `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name) SELECT unnest($1::text[]), 2, 'charge-a'`,
        [ids],
      );
      const blockerPid = (await blocker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
      const waiting = async () =>
        (
          await tdb.sql.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND $1 = ANY(pg_blocking_pids(pid))`,
            [blockerPid],
          )
        ).rows.map((r) => r.pid);

      const v1 = await startExecutor({
        databaseUrl: tdb.url,
        applicationName: app,
        applicationVersion: 'v1',
        executorId: 'exec-v1',
        queues: QUEUES,
      });
      executors.push(v1);
      await waitFor('charge-a committed by the data source, and exec-v1 waiting to record it', async () => {
        const tc = await tdb.sql.query(`SELECT 1 FROM dbos.transaction_completion WHERE workflow_id = ANY($1) AND function_num = 2`, [ids]);
        return tc.rowCount === ids.length && (await waiting()).length >= ids.length;
      });
      v1.kill('SIGKILL');
      await v1.exited;
      // A backend waiting on a lock never reads its socket, so it outlives its dead client and would write
      // the checkpoint once the lock is released: ended as the server would on noticing the disconnect.
      const stranded = await waiting();
      await tdb.sql.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS t(pid)', [stranded]);
      await waitFor(
        'the dead executor’s backends gone',
        async () => (await tdb.sql.query(`SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1)`, [stranded])).rowCount === 0,
      );
      await blocker.query('ROLLBACK');
      await blocker.end();
      blocker = undefined;

      executors.push(
        await startExecutor({
          databaseUrl: tdb.url,
          applicationName: app,
          applicationVersion: 'v2',
          executorId: 'exec-v2',
          queues: QUEUES,
        }),
      );
      // The recovery alone, without its orphaned-version hook: each row is repaired below by its own runtime.
      const recovered = await recoverExecutor(
        { db: rt.db, redis: undefined, lock: undefined, logger: rt.logger, batchSize: 100, lockTtlMs: 5_000, clock: Date.now },
        deathNotice({ executorId: 'exec-v1', applicationName: app, reason: 'manual', detectedBy: 'test' }),
      );
      expect(recovered).toMatchObject({ outcome: 'completed', reenqueued: ids.length });
    },
  });

  it('the premise: charge-a applied and checkpointed by the data source, step 2 never recorded, the rows ENQUEUED on v1', async () => {
    for (const id of ids) {
      expect(await recordedSteps(id)).toEqual([0, 1]);
      const tc = await f.tdb.sql.query(`SELECT function_num FROM dbos.transaction_completion WHERE workflow_id = $1`, [id]);
      expect(tc.rows).toEqual([{ function_num: 2 }]);
      expect(await charges(id)).toEqual([{ workflow_id: id, item: 'charge-a', executor_id: 'exec-v1' }]);
      expect(await f.client.getWorkflow(id)).toMatchObject({ status: 'ENQUEUED', applicationVersion: 'v1' });
    }
  });

  it(
    'REPAIR_MODE=rewind rewinds it under its own ID onto v2; the replay is served charge-a: charged once',
    { timeout: 60_000 },
    async () => {
      const out = await repairOrphaned(repairDepsFromRuntime(f.rt), orphanOf('wf-rewind'));
      expect(out).toEqual([{ workflowId: 'wf-rewind', outcome: 'rewound' }]);
      const served = f.rt.logger.lines.find((l) => l.event === 'repair_rewind_serves_transaction' && l.workflowId === 'wf-rewind');
      expect(served?.steps).toEqual(['dbos.transaction_completion: step 2']);
      await waitStatus(f.tdb.sql, 'wf-rewind', 'SUCCESS');
      expect(await f.client.retrieveWorkflow<string[]>('wf-rewind').getResult()).toEqual([
        'plan@exec-v1',
        'tool-a@exec-v1',
        'charge-a@exec-v1',
        'answer@exec-v2',
      ]);
      expect(await f.client.getWorkflow('wf-rewind')).toMatchObject({ applicationVersion: 'v2', executorId: 'exec-v2' });
      expect(await charges('wf-rewind%')).toEqual([{ workflow_id: 'wf-rewind', item: 'charge-a', executor_id: 'exec-v1' }]);
      expect(await forksOf(f.tdb.sql, 'wf-rewind')).toEqual([]);
      const ledger = await f.tdb.sql.query(
        `SELECT from_step, reason, application_version, rewound_at IS NOT NULL AS done FROM afterlife.rewinds WHERE workflow_id = 'wf-rewind'`,
      );
      expect(ledger.rows).toEqual([{ from_step: 2, reason: 'orphaned-version', application_version: 'v2', done: true }]);
    },
  );

  it(
    'REPAIR_MODE=fork refuses the fork, naming the checkpoint; the row waits for a repair under its own ID, which charges once',
    { timeout: 60_000 },
    async () => {
      const out = await repairOrphaned(repairDepsFromRuntime(forkRt), orphanOf('wf-fork'));
      expect(out).toEqual([
        { workflowId: 'wf-fork', outcome: 'skipped', why: expect.stringMatching(/dbos\.transaction_completion holds step 2 of wf-fork/) },
      ]);
      expect(forkRt.logger.lines.some((l) => l.event === 'repair_refused' && l.workflowId === 'wf-fork')).toBe(true);
      expect(await f.client.getWorkflow('wf-fork')).toMatchObject({ status: 'ENQUEUED', applicationVersion: 'v1' });
      expect(await forksOf(f.tdb.sql, 'wf-fork')).toEqual([]);
      expect(await charges('wf-fork%')).toEqual([{ workflow_id: 'wf-fork', item: 'charge-a', executor_id: 'exec-v1' }]);

      // Left as it was, it is still the orphan a rewind repairs: the refusal lost nothing.
      expect(await repairOrphaned(repairDepsFromRuntime(f.rt), orphanOf('wf-fork'))).toEqual([
        { workflowId: 'wf-fork', outcome: 'rewound' },
      ]);
      await waitStatus(f.tdb.sql, 'wf-fork', 'SUCCESS');
      expect(await f.client.retrieveWorkflow<string[]>('wf-fork').getResult()).toEqual([
        'plan@exec-v1',
        'tool-a@exec-v1',
        'charge-a@exec-v1',
        'answer@exec-v2',
      ]);
      expect(await charges('wf-fork%')).toEqual([{ workflow_id: 'wf-fork', item: 'charge-a', executor_id: 'exec-v1' }]);
    },
  );

  it('without the check the fork is made, and its replay applies charge-a a second time', { timeout: 60_000 }, async () => {
    const out = await repairOrphaned(repairDepsFromRuntime(blindRt), orphanOf('wf-blind'));
    expect(out).toEqual([{ workflowId: 'wf-blind', outcome: 'forked', newWorkflowId: 'wf-blind-fork-1', cancelled: true }]);
    await waitStatus(f.tdb.sql, 'wf-blind-fork-1', 'SUCCESS');
    expect(await f.client.retrieveWorkflow<string[]>('wf-blind-fork-1').getResult()).toEqual([
      'plan@exec-v1',
      'tool-a@exec-v1',
      'charge-a@exec-v2',
      'answer@exec-v2',
    ]);
    expect(await charges('wf-blind%')).toEqual([
      { workflow_id: 'wf-blind', item: 'charge-a', executor_id: 'exec-v1' },
      { workflow_id: 'wf-blind-fork-1', item: 'charge-a', executor_id: 'exec-v2' },
    ]);
  });
});
