import { beforeAll, describe, expect, it } from 'vitest';
import { runReaper, type ReaperSummary } from '../../../shared/reaper/index.js';
import { runTick } from '../../../shared/reaper/tick.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { type TestDatabase, waitFor, workflowRows } from '../../helpers/db.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';
import type { testRuntime } from '../../helpers/runtime.js';

/**
 * cancel-and-fork across a crash: the reaper cancels a stuck workflow and dies before forking it. The
 * cancel and the report's 'cancelled' are one statement, so a later stuck pass finds the leftover and
 * forks it under the same deterministic ID — the lineage is not lost to a CANCELLED row nobody looks at.
 */
describe('reaper: a stuck workflow cancelled by a reaper that died before forking it', () => {
  const faults = new FaultInjector();
  const fx = reaperFixture('app-stuckfork', {
    faults,
    env: { STUCK_AFTER_MS: '60000', STUCK_POLICY: 'cancel-and-fork', AFTERLIFE_ALLOW_BELOW_FLOOR: 'STUCK_AFTER_MS' },
  });
  let tdb: TestDatabase;
  let rt: ReturnType<typeof testRuntime>;
  const id = 'stuck-crash';

  const tick = async (): Promise<ReaperSummary & { outcome: 'completed' }> => {
    const s = await runReaper(testReaperDeps(rt), { maxTicks: 1 });
    if (s.outcome !== 'completed') throw new Error(`reaper skipped: ${s.reason}`);
    return s;
  };

  beforeAll(async () => {
    ({ tdb, rt } = fx);
    await fx.executor('exec-live', { beat: true });
    // A workflow whose function the live executor lacks: it claims it and it never progresses.
    await tdb.sql.query(
      `SELECT dbos.enqueue_workflow(workflow_name => 'noSuchWorkflow', queue_name => '_dbos_internal_queue',
                                    workflow_id => $1, app_version => 'v1', application_name => $2)`,
      [id, fx.app],
    );
    await waitFor('claimed by exec-live', async () => (await workflowRows(tdb.sql, [id]))[0]?.executor_id === 'exec-live');
    await tdb.sql.query(
      `UPDATE dbos.workflow_status SET started_at_epoch_ms = started_at_epoch_ms - 7200000, updated_at = updated_at - 7200000 WHERE workflow_uuid = $1`,
      [id],
    );
  });

  it('is forked by a later pass; a fresh leftover waits, and nothing is forked twice', async () => {
    faults.on('reaper.beforeForkStuck', () => {
      throw new Error('process died between the cancel and the fork');
    });
    await tick().catch(() => undefined); // however the crashed pass surfaces, the cancel has committed
    faults.off('reaper.beforeForkStuck');
    expect((await workflowRows(tdb.sql, [id]))[0]?.status).toBe('CANCELLED');
    const report = async () =>
      (await tdb.sql.query(`SELECT action, forked_to FROM afterlife.stuck_workflows WHERE workflow_uuid = $1`, [id])).rows;
    expect(await report()).toEqual([{ action: 'cancelled', forked_to: null }]);
    const forks = async () => (await tdb.sql.query(`SELECT workflow_uuid FROM dbos.workflow_status WHERE forked_from = $1`, [id])).rows;
    expect(await forks()).toEqual([]);

    // Within a minute it may still be a running tick's own work: left alone.
    expect((await tick()).passes.stuck.forked).toBe(0);
    expect(await forks()).toEqual([]);

    // Resumed and cancelled again by an operator (another completed_at): no longer the reaper's cancel.
    await tdb.sql.query(`UPDATE afterlife.stuck_workflows SET action_at = action_at - interval '2 minutes' WHERE workflow_uuid = $1`, [id]);
    await tdb.sql.query(`UPDATE dbos.workflow_status SET completed_at = completed_at + 5000 WHERE workflow_uuid = $1`, [id]);
    expect((await tick()).passes.stuck.forked).toBe(0);
    expect(await forks()).toEqual([]);
    await tdb.sql.query(`UPDATE dbos.workflow_status SET completed_at = completed_at - 5000 WHERE workflow_uuid = $1`, [id]);

    // A tick whose budget is spent (the lease running short) leaves it for the next tick.
    const spent = { deadline: 0, remaining: () => 0, expired: () => true };
    const late = await runTick(testReaperDeps(rt), { tick: 1, dryRun: false, planned: [], budget: spent });
    expect(late.stuck).toMatchObject({ forked: 0 });
    expect(await forks()).toEqual([]);

    // Older than a minute and still the reaper's own cancel: a dead reaper's leftover, forked from after
    // its last checkpoint.
    expect((await tick()).passes.stuck.forked).toBe(1);
    expect(await forks()).toEqual([{ workflow_uuid: `${id}-fork-1` }]);
    expect(await report()).toEqual([{ action: 'forked', forked_to: `${id}-fork-1` }]);
    const ledger = await tdb.sql.query(`SELECT new_workflow_id, reason FROM afterlife.forks WHERE root_workflow_id = $1`, [id]);
    expect(ledger.rows).toEqual([{ new_workflow_id: `${id}-fork-1`, reason: 'stuck' }]);

    expect((await tick()).passes.stuck.forked).toBe(0);
    expect(await forks()).toHaveLength(1);
  });
});
