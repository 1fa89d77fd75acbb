import { describe, expect, it } from 'vitest';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { repairDepsFromRuntime } from '../../../shared/repair/deps.js';
import { getResultWithAutoFork } from '../../../packages/executor/src/repair/index.js';
import { repairOrphaned } from '../../../shared/repair/situations/orphaned.js';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { postEvent, pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { waitFor } from '../../helpers/db.js';
import { runReaper } from '../../../shared/reaper/index.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { testReaperDeps } from '../../helpers/reaper.js';
import { enqueue, forksOf, hasCheckpoint, stepStarts, waitStatus, startForkExecutor } from './helpers.js';
import { repairFixture } from '../../helpers/repair.js';

/**
 * ORPHANED_VERSION_POLICY=fork-to-latest. A v1 executor dies with work in flight (three agent
 * workflows and a parent awaiting its child) while only a v2 executor is alive. The death notice, through
 * the served executorDeath function, re-enqueues the v1 rows (which v2 would never claim), forks each onto
 * v2 from after its last checkpoint, cancels the originals, and everything completes on v2. A crash in
 * fork-to-latest (named fault points) leaves work the reaper's next pass finishes.
 */
describe('fork-to-latest for a version no live executor runs', () => {
  const f = repairFixture('app-orphan', {
    env: { ORPHANED_VERSION_POLICY: 'fork-to-latest', REPAIR_MODE: 'fork' },
    divergentChoice: false,
    serve: true,
  });
  const agents = ['agent-0', 'agent-1', 'agent-2'];

  it('forks the v1 orphans onto v2, cancels the originals, and all complete', { timeout: 120_000 }, async () => {
    const v1 = await startForkExecutor(f, 'exec-v1');
    for (const id of agents) await enqueue(f.client, 'agentWorkflow', id, 'v1', { steps: 4, stepMs: 700 });
    await enqueue(f.client, 'parentWorkflow', 'parent', 'v1', { key: 'parent', lastStepMs: 4_000 });
    await waitFor('checkpoints on v1', async () =>
      (await Promise.all([...agents.map((id) => hasCheckpoint(f.tdb.sql, id, 0)), hasCheckpoint(f.tdb.sql, 'parent-1', 1)])).every(Boolean),
    );
    v1.kill('SIGKILL');
    await v1.exited;
    const orphans = (
      await f.tdb.sql.query<{ workflow_uuid: string }>(`SELECT workflow_uuid FROM dbos.workflow_status WHERE status = 'PENDING' ORDER BY 1`)
    ).rows.map((r) => r.workflow_uuid);
    expect(orphans).toEqual([...agents, 'parent', 'parent-1'].sort());
    const checkpointed = await f.tdb.sql.query<{ workflow_uuid: string; function_id: number }>(
      `SELECT workflow_uuid, function_id FROM dbos.operation_outputs o JOIN public.step_runs s ON s.workflow_id = o.workflow_uuid AND s.step = o.function_id AND s.phase = 'end'`,
    );

    await startForkExecutor(f, 'exec-v2', 'v2');
    const beat = {
      executorId: 'exec-v2',
      applicationName: f.app,
      applicationVersion: 'v2',
      state: 'alive',
      startedAt: new Date().toISOString(),
      beatAt: new Date().toISOString(),
      inFlight: 0,
    };
    await f.rt.redis?.set(heartbeatKey(f.app, 'exec-v2'), JSON.stringify(beat), 'PX', 120_000);

    const notice = deathNotice({ executorId: 'exec-v1', applicationName: f.app, reason: 'manual', detectedBy: 'test' });
    const res = await postEvent(f.server.url, pubsubCloudEvent(JSON.stringify(notice), { messageId: 'orphan-1' }));
    expect(res.status).toBeLessThan(300);

    // The warning says what happens: the hook forks them now, not after ORPHANED_VERSION_GRACE_MS.
    expect(f.rt.logger.lines.filter((l) => l.event === 'orphaned_version')).toEqual([
      expect.objectContaining({ applicationVersion: 'v1', policy: 'fork-to-latest', policyActsAfterMs: 0 }),
    ]);
    for (const id of orphans) {
      await waitStatus(f.tdb.sql, `${id}-fork-1`, 'SUCCESS', 60_000);
      expect(await f.client.getWorkflow(id)).toMatchObject({ status: 'CANCELLED', wasForkedFrom: true });
      expect(await f.client.getWorkflow(`${id}-fork-1`)).toMatchObject({
        applicationVersion: 'v2',
        executorId: 'exec-v2',
        forkedFrom: id,
        // Queued workflows stay on their queue (and its limits); direct starts go to DBOS's internal queue.
        queueName: agents.includes(id) || id === 'parent' ? 'forktest' : '_dbos_internal_queue',
      });
    }
    // The parent's fork awaited its child's fork (the copied child-start row was remapped), not the cancelled child.
    const parentSteps = await f.client.listWorkflowSteps('parent-fork-1');
    expect(parentSteps?.find((s) => s.functionID === 1)?.childWorkflowID).toBe('parent-1-fork-1');
    expect(await f.client.retrieveWorkflow<string[]>('parent-fork-1').getResult()).toEqual([
      'prepare@exec-v1',
      'plan@exec-v1',
      'tool-a@exec-v1',
      'answer@exec-v2',
      'summarize@exec-v2',
    ]);
    // App code awaiting an original follows it to its fork.
    expect(await getResultWithAutoFork<string[]>(f.client, 'agent-0')).toHaveLength(4);
    // Nothing checkpointed on v1 ran again on v2.
    for (const { workflow_uuid, function_id } of checkpointed.rows) {
      expect(await stepStarts(f.tdb.sql, `${workflow_uuid}-fork-1`, function_id)).toBe(0);
    }
    const ledger = await f.tdb.sql.query(
      `SELECT source_workflow_id, reason, application_version, original_cancelled_at IS NOT NULL AS cancelled, awaited_by FROM afterlife.forks ORDER BY 1`,
    );
    expect(ledger.rows).toEqual(
      orphans.map((id) => ({
        source_workflow_id: id,
        reason: 'orphaned-version',
        application_version: 'v2',
        cancelled: true,
        awaited_by: id === 'parent-1' ? 'parent-fork-1' : null,
      })),
    );
    // The originals never ran again: v1 is gone and they are cancelled.
    const originals = await f.tdb.sql.query(
      `SELECT count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) AND status <> 'CANCELLED'`,
      [orphans],
    );
    expect(originals.rows[0]).toEqual({ n: 0 });
  });

  it('a crash after the fork, or between the ledger row and the fork, leaves work the next reaper pass finishes: the original cancelled, the fork run', async () => {
    // After the test above v2 is the latest version and only its executor lives: v1 rows wait forever.
    for (const id of ['crash-after-fork', 'crash-before-fork'])
      await enqueue(f.client, 'agentWorkflow', id, 'v1', { steps: 2, stepMs: 50 });
    const faults = new FaultInjector()
      .on('fork.afterFork', (ctx) => {
        if (ctx.workflowId === 'crash-after-fork') throw new Error('crash after the fork');
      })
      .on('fork.beforeFork', (ctx) => {
        if (ctx.workflowId === 'crash-before-fork') throw new Error('crash before the fork');
      });
    const out = await repairOrphaned(repairDepsFromRuntime(f.rt, { faults }), {
      applicationName: f.app,
      executorId: 'exec-v1',
      applicationVersion: 'v1',
      workflowIds: ['crash-after-fork', 'crash-before-fork'],
    });
    expect(out.map((o) => o.outcome)).toEqual(['failed', 'failed']);
    // The crash windows: one fork runs while its original still waits ENQUEUED; the other was never made.
    // Either way the ledger row is there, its original not cancelled.
    expect(await f.client.getWorkflow('crash-after-fork')).toMatchObject({ status: 'ENQUEUED', applicationVersion: 'v1' });
    expect(await f.client.getWorkflow('crash-after-fork-fork-1')).toMatchObject({
      forkedFrom: 'crash-after-fork',
      applicationVersion: 'v2',
    });
    expect(await f.client.getWorkflow('crash-before-fork')).toMatchObject({ status: 'ENQUEUED', applicationVersion: 'v1' });
    expect(await f.client.getWorkflow('crash-before-fork-fork-1')).toBeUndefined();
    const pending = await f.tdb.sql.query(
      `SELECT source_workflow_id FROM afterlife.forks WHERE source_workflow_id LIKE 'crash-%' AND original_cancelled_at IS NULL ORDER BY 1`,
    );
    expect(pending.rows).toEqual([{ source_workflow_id: 'crash-after-fork' }, { source_workflow_id: 'crash-before-fork' }]);

    // The real reaper's next invocation (its orphaned-versions pass) finishes both.
    const s = await runReaper(testReaperDeps(f.rt), { maxTicks: 1 });
    expect(s).toMatchObject({ outcome: 'completed', errors: [] });
    for (const id of ['crash-after-fork', 'crash-before-fork']) {
      expect(await f.client.getWorkflow(id)).toMatchObject({ status: 'CANCELLED' });
      await waitStatus(f.tdb.sql, `${id}-fork-1`, 'SUCCESS');
      expect(await f.client.getWorkflow(`${id}-fork-1`)).toMatchObject({
        forkedFrom: id,
        applicationVersion: 'v2',
        executorId: 'exec-v2',
        queueName: 'forktest',
      });
    }
    const done = await f.tdb.sql.query(
      `SELECT count(*)::int AS n FROM afterlife.forks WHERE source_workflow_id LIKE 'crash-%' AND original_cancelled_at IS NOT NULL`,
    );
    expect(done.rows[0]).toEqual({ n: 2 });
    // Once finished, a further pass has nothing to do: no second fork, nothing to cancel.
    await runReaper(testReaperDeps(f.rt), { maxTicks: 1 });
    expect(await forksOf(f.tdb.sql, 'crash-after-fork')).toEqual(['crash-after-fork-fork-1']);
  });

  it('never forks a row that an executor of its version has claimed meanwhile (live work), nor one re-stamped', async () => {
    // After the test above, v2 is the latest version. A v1 row that is PENDING again belongs to a live run.
    await f.tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, queue_name)
       VALUES ('claimed-1', 'PENDING', 'agentWorkflow', 'exec-v1b', 'v1', $1, NULL),
              ('restamped-1', 'ENQUEUED', 'agentWorkflow', NULL, 'v2', $1, '_dbos_internal_queue')`,
      [f.app],
    );
    const out = await repairOrphaned(repairDepsFromRuntime(f.rt), {
      applicationName: f.app,
      executorId: 'exec-v1b',
      applicationVersion: 'v1',
      workflowIds: ['claimed-1', 'restamped-1'],
    });
    expect(out).toEqual([
      { workflowId: 'claimed-1', outcome: 'skipped', why: 'status PENDING' },
      { workflowId: 'restamped-1', outcome: 'skipped', why: 'now on version v2' },
    ]);
    const forks = await f.tdb.sql.query(`SELECT 1 FROM dbos.workflow_status WHERE forked_from IN ('claimed-1', 'restamped-1')`);
    expect(forks.rowCount).toBe(0);
    const rows = await f.tdb.sql.query(
      `SELECT workflow_uuid, status FROM dbos.workflow_status WHERE workflow_uuid IN ('claimed-1', 'restamped-1') ORDER BY 1`,
    );
    expect(rows.rows).toEqual([
      { workflow_uuid: 'claimed-1', status: 'PENDING' },
      { workflow_uuid: 'restamped-1', status: 'ENQUEUED' },
    ]);
  });
});
