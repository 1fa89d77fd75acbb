import { describe, expect, it } from 'vitest';
import { repairDepsFromRuntime } from '../../../shared/repair/deps.js';
import { repairDiverged } from '../../../shared/repair/situations/diverged.js';
import { waitFor } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';
import { divergeOnB, enqueue, startForkExecutor } from './helpers.js';
import { repairFixture } from '../../helpers/repair.js';

/**
 * The data-source safety check, with a real DBOS data source in real executors (examples/agent-app/
 * transactional.ts). A runs chargingWorkflow: plan, tool-a, the transaction charge-a (its checkpoint in
 * dbos.transaction_completion at step 2, with the row in public.charges), then is SIGKILLed in the slow
 * last step. The choice is flipped; B's replay diverges at step 1 before touching the data source, so
 * DBOS leaves the step-2 checkpoint in place. DBOSClient.rewindWorkflow cannot remove it.
 */
describe('repair of a diverged workflow with data-source transactions past the cut', () => {
  let unchecked: ReturnType<typeof testRuntime>;
  const ids = ['wf-ds', 'wf-ds-unchecked'];
  const f = repairFixture('app-ds', {
    setupTimeoutMs: 120_000,
    setup: async ({ tdb, rt, client, app, executors }) => {
      // The same deployment with the check blind (no schema holding the checkpoints): what a missing check does.
      unchecked = f.runtime({ env: { DATASOURCE_SCHEMAS: 'no_such_schema' } });
      const a = await startForkExecutor({ tdb, app, executors }, 'exec-A');
      for (const id of ids) await enqueue(client, 'chargingWorkflow', id, 'v1', { key: id, lastStepMs: 5_000 });
      await waitFor('the transactions checkpointed by the data source on A', async () => {
        const r = await tdb.sql.query(`SELECT 1 FROM dbos.transaction_completion WHERE workflow_id = ANY($1) AND function_num = 2`, [ids]);
        return r.rowCount === ids.length;
      });
      executors.push(await divergeOnB(rt, a, { databaseUrl: tdb.url, applicationName: app, choices: ids, waitError: ids, sql: tdb.sql }));
    },
  });

  const charges = async (id: string) =>
    (
      await f.tdb.sql.query<{ item: string; step: number }>(
        `SELECT item, step FROM public.charges WHERE workflow_id = $1 ORDER BY step, item`,
        [id],
      )
    ).rows;

  it('the diverged replay left the data-source checkpoint past the cut (DBOS removes it only for a run that used the data source)', async () => {
    const r = await f.tdb.sql.query(
      `SELECT workflow_id, function_num FROM dbos.transaction_completion WHERE workflow_id = ANY($1) ORDER BY 1`,
      [ids],
    );
    expect(r.rows).toEqual(ids.map((workflow_id) => ({ workflow_id, function_num: 2 })));
  });

  it('falls back to a fork, saying why; the repaired run applies its transaction exactly once', async () => {
    const res = await repairDiverged(repairDepsFromRuntime(f.rt), 'wf-ds');
    expect(res).toMatchObject({ outcome: 'forked', newWorkflowId: 'wf-ds-fork-1', startStep: 1, n: 1 });
    const why = f.rt.logger.lines.find((l) => l.event === 'repair_fork_fallback' && l.workflowId === 'wf-ds');
    expect(String(why?.why)).toMatch(/data-source checkpoints at or past the cut \(dbos\.transaction_completion: wf-ds step 2\)/);
    expect(await f.client.retrieveWorkflow<string[]>('wf-ds-fork-1').getResult()).toEqual([
      'plan@exec-A',
      'tool-b@exec-B',
      'charge-b@exec-B',
      'answer@exec-B',
    ]);
    expect(await charges('wf-ds-fork-1')).toEqual([{ item: 'charge-b', step: 2 }]);
    // The original keeps its ending (ERROR) and its one applied transaction, of the discarded path.
    expect(await charges('wf-ds')).toEqual([{ item: 'charge-a', step: 2 }]);
    expect((await f.tdb.sql.query(`SELECT 1 FROM afterlife.rewinds WHERE workflow_id = 'wf-ds'`)).rowCount).toBe(0);
  });

  it('without the check an outside rewind is served the discarded run’s transaction output: charge-b never runs', async () => {
    const res = await repairDiverged(repairDepsFromRuntime(unchecked), 'wf-ds-unchecked');
    expect(res).toMatchObject({ outcome: 'rewound', startStep: 1 });
    const out = await f.client.retrieveWorkflow<string[]>('wf-ds-unchecked').getResult();
    // Step 2 asked for charge-b; the data source found a checkpoint at step 2 and returned charge-a's.
    expect(out).toEqual(['plan@exec-A', 'tool-b@exec-B', 'charge-a@exec-A', 'answer@exec-B']);
    expect(await charges('wf-ds-unchecked')).toEqual([{ item: 'charge-a', step: 2 }]);
  });
});
