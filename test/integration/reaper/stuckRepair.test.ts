import { DBOSClient } from '@dbos-inc/dbos-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runReaper, type ReaperSummary } from '../../../shared/reaper/index.js';
import { type TestDatabase, waitFor } from '../../helpers/db.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';
import type { testRuntime } from '../../helpers/runtime.js';

/**
 * STUCK_POLICY=cancel-and-repair with a real executor: a workflow wedged in its last step on a live
 * executor (its activity clock backdated past STUCK_AFTER_MS instead of waiting an hour) is cancelled by
 * the reaper's conditional statement and rewound under its own ID from after its last checkpoint; the
 * live executor runs the rest, and the steps before the cut never run again.
 */
describe('reaper: cancel-and-repair rewinds a stuck workflow in place', () => {
  const fx = reaperFixture('app-stuckrepair', {
    env: { STUCK_AFTER_MS: '60000', STUCK_POLICY: 'cancel-and-repair', AFTERLIFE_ALLOW_BELOW_FLOOR: 'STUCK_AFTER_MS' },
  });
  let tdb: TestDatabase;
  let rt: ReturnType<typeof testRuntime>;
  let client: DBOSClient;
  const id = 'stuck-rewind';

  const tick = async (): Promise<ReaperSummary & { outcome: 'completed' }> => {
    const s = await runReaper(testReaperDeps(rt), { maxTicks: 1 });
    if (s.outcome !== 'completed') throw new Error(`reaper skipped: ${s.reason}`);
    return s;
  };
  const starts = async (step: number) =>
    (
      await tdb.sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM public.step_runs WHERE workflow_id = $1 AND step = $2 AND phase = 'start'`,
        [id, step],
      )
    ).rows[0]?.n;

  beforeAll(async () => {
    ({ tdb, rt } = fx);
    await fx.executor('exec-live', { beat: true });
    client = await DBOSClient.create({ systemDatabaseUrl: tdb.url, applicationName: fx.app, systemDatabasePoolSize: 2 });
    await client.enqueue(
      { queueName: '_dbos_internal_queue', workflowName: 'divergentWorkflow', workflowID: id, appVersion: 'v1' },
      { key: id, lastStepMs: 4_000 },
    );
    await waitFor('steps 0 and 1 checkpointed, step 2 running', async () => (await starts(2)) === 1);
    // An hour of silence, by data: claim time, status change and checkpoints all backdated.
    await tdb.sql.query(
      `UPDATE dbos.workflow_status SET started_at_epoch_ms = started_at_epoch_ms - 7200000, updated_at = updated_at - 7200000 WHERE workflow_uuid = $1`,
      [id],
    );
    await tdb.sql.query(
      `UPDATE dbos.operation_outputs SET started_at_epoch_ms = started_at_epoch_ms - 7200000, completed_at_epoch_ms = completed_at_epoch_ms - 7200000 WHERE workflow_uuid = $1`,
      [id],
    );
  });

  afterAll(async () => {
    await client?.destroy();
  });

  it('cancels, rewinds from step 2 under the same ID, and the workflow ends SUCCESS', async () => {
    const s = await tick();
    expect(s.passes.stuck).toMatchObject({ cancelled: 1, forked: 1 });
    const report = await tdb.sql.query(`SELECT action, forked_to FROM afterlife.stuck_workflows WHERE workflow_uuid = $1`, [id]);
    expect(report.rows).toEqual([{ action: 'rewound', forked_to: id }]);
    const ledger = await tdb.sql.query(`SELECT n, from_step, reason FROM afterlife.rewinds WHERE workflow_id = $1`, [id]);
    expect(ledger.rows).toEqual([{ n: 1, from_step: 2, reason: 'stuck' }]);
    expect(await client.retrieveWorkflow<string[]>(id).getResult()).toEqual(['plan@exec-live', 'tool-a@exec-live', 'answer@exec-live']);
    expect(await client.getWorkflow(id)).toMatchObject({ status: 'SUCCESS' });
    expect(await starts(0)).toBe(1);
    expect(await starts(1)).toBe(1);
    // The wedged run's step 2 and the repaired run's.
    expect(await starts(2)).toBe(2);
    const forks = await tdb.sql.query(`SELECT 1 FROM dbos.workflow_status WHERE forked_from = $1`, [id]);
    expect(forks.rowCount).toBe(0);
    // Nothing left for a later pass.
    expect((await tick()).passes.stuck).toMatchObject({ found: 0, cancelled: 0, forked: 0 });
  });
});
