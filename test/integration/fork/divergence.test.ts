import { describe, expect, it } from 'vitest';
import { parseDivergence } from '../../../packages/executor/src/dbos/divergence.js';
import { repairDepsFromRuntime } from '../../../shared/repair/deps.js';
import type { RepairDeps } from '../../../shared/repair/primitives/deps.js';
import { autoFork } from '../../../shared/repair/situations/divergedFork.js';
import { waitFor } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';
import { repairFixture } from '../../helpers/repair.js';
import {
  allForks,
  divergeOnB,
  enqueue,
  forksOf,
  hasCheckpoint,
  ledgerOf,
  reap,
  reaperTick,
  stepStarts,
  waitStatus,
  startForkExecutor,
} from './helpers.js';

/**
 * Real divergence, as in production: executor A runs workflows that pick their tool from a table row in
 * workflow code, records step 1 and is SIGKILLed during step 2; the rows are flipped; executor B (same
 * version string) recovers them and the replay diverges at function_id 1 (code 26). A parent awaiting such
 * a child fails with the child's error. An ordinary failing step ends ERROR too, and must never be forked.
 *
 * Repaired by autoFork, and separately by the real reaper (runReaper and its tick, whose diverged pass hands
 * workflows to shared/reaper/deps.ts); nested workflows; an ordinary ERROR left alone.
 */
describe('auto-fork of real replay divergence', () => {
  const spec = (key: string) => ({ key, lastStepMs: 3_000 });
  let deps: RepairDeps;
  const f = repairFixture('app-div', {
    env: { REPAIR_MODE: 'fork' },
    setupTimeoutMs: 120_000,
    setup: async ({ tdb, rt, client, app, executors }) => {
      deps = repairDepsFromRuntime(rt);
      const a = await startForkExecutor({ tdb, app, executors }, 'exec-A');
      await enqueue(client, 'divergentWorkflow', 'wf-a', 'v1', spec('wf-a'));
      await enqueue(client, 'divergentWorkflow', 'wf-reaper', 'v1', spec('wf-reaper'));
      await enqueue(client, 'parentWorkflow', 'parent', 'v1', spec('parent'));
      await enqueue(client, 'parentWorkflow', 'parent-x', 'v1', { ...spec('parent-x'), childId: 'explicit-child' });
      await enqueue(client, 'failingWorkflow', 'plain-error', 'v1');
      await waitStatus(tdb.sql, 'plain-error', 'ERROR');
      // Step 1 (the tool) is checkpointed everywhere, step 2 is in flight: flip the choice and kill A.
      await waitFor('tool steps checkpointed on A', async () =>
        (await Promise.all(['wf-a', 'wf-reaper', 'parent-1', 'explicit-child'].map((id) => hasCheckpoint(tdb.sql, id, 1)))).every(Boolean),
      );
      executors.push(
        await divergeOnB(rt, a, {
          databaseUrl: tdb.url,
          applicationName: app,
          choices: ['wf-a', 'wf-reaper', 'parent', 'parent-x'],
          waitError: ['wf-a', 'wf-reaper', 'parent-1', 'parent', 'explicit-child', 'parent-x'],
          sql: tdb.sql,
        }),
      );
    },
  });

  it('detects code 26 in workflow_output.error, with the step and the workflow it names', async () => {
    const errors = await f.tdb.sql.query<{ workflow_uuid: string; error: string }>(
      `SELECT workflow_uuid, error FROM dbos.workflow_output WHERE workflow_uuid = ANY($1) ORDER BY 1`,
      [['wf-a', 'parent', 'plain-error']],
    );
    const byId = new Map(errors.rows.map((r) => [r.workflow_uuid, parseDivergence(r.error)]));
    expect(byId.get('wf-a')).toMatchObject({ workflowId: 'wf-a', stepId: 1 });
    // The parent carries its child's error: the ID named is the child's.
    expect(byId.get('parent')).toMatchObject({ workflowId: 'parent-1', stepId: 1 });
    expect(byId.get('plain-error')).toBeUndefined();
  });

  it('autoFork forks from the divergent step; steps before it are not re-run; the fork ends SUCCESS', async () => {
    const res = await autoFork(deps, 'wf-a');
    expect(res).toMatchObject({ outcome: 'forked', newWorkflowId: 'wf-a-fork-1', root: 'wf-a', n: 1, startStep: 1, reason: 'diverged' });
    await waitStatus(f.tdb.sql, 'wf-a-fork-1', 'SUCCESS');
    expect(await f.client.getWorkflow('wf-a-fork-1')).toMatchObject({
      forkedFrom: 'wf-a',
      queueName: 'forktest',
      applicationVersion: 'v1',
    });
    expect(await stepStarts(f.tdb.sql, 'wf-a', 0)).toBe(1);
    expect(await stepStarts(f.tdb.sql, 'wf-a-fork-1', 0)).toBe(0); // step 0 copied, not run
    expect(await stepStarts(f.tdb.sql, 'wf-a-fork-1', 1)).toBe(1);
    const out = await f.client.retrieveWorkflow<string[]>('wf-a-fork-1').getResult();
    expect(out).toEqual(['plan@exec-A', 'tool-b@exec-B', 'answer@exec-B']);
    // Asked again: already forked, same ID, still one fork and one ledger row.
    expect(await autoFork(deps, 'wf-a')).toMatchObject({ outcome: 'already-forked', newWorkflowId: 'wf-a-fork-1' });
    expect(await forksOf(f.tdb.sql, 'wf-a')).toEqual(['wf-a-fork-1']);
    const ledger = await f.tdb.sql.query(
      `SELECT root_workflow_id, n, from_step, new_workflow_id, reason FROM afterlife.forks WHERE root_workflow_id = 'wf-a'`,
    );
    expect(ledger.rows).toEqual([{ root_workflow_id: 'wf-a', n: 1, from_step: 1, new_workflow_id: 'wf-a-fork-1', reason: 'diverged' }]);
  });

  it('the real reaper (an invocation, and a second reaper ticking past its lease) forks the diverged workflow and the parent from its child-start step, never the plain ERROR', async () => {
    const rt2 = testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app, env: { REPAIR_MODE: 'fork' } });
    const [first, tick2] = await Promise.all([reap(f.rt), reaperTick(rt2, {})]).finally(() => rt2.close());
    expect(first.errors).toEqual([]);
    expect(tick2.diverged).not.toHaveProperty('error');
    expect(first.passes.diverged).toMatchObject({ runs: 1, failed: 0 });
    // Everything forked in this file: wf-a by the test above; wf-reaper, parent and parent-x (with its app-named
    // child afresh) once each, by whichever reaper got there first. The child parent-1 is left to its parent,
    // plain-error is no divergence, wf-a was forked already.
    expect(await allForks(f.tdb.sql)).toEqual([
      'parent-fork-1 <- parent',
      'parent-x-fork-1 <- parent-x',
      'parent-x-fork-1-child-1 <- explicit-child',
      'wf-a-fork-1 <- wf-a',
      'wf-reaper-fork-1 <- wf-reaper',
    ]);
    expect(await ledgerOf(f.tdb.sql, 'parent')).toEqual([
      { n: 1, source: 'parent', fork: 'parent-fork-1', from_step: 1, reason: 'child-diverged', child_fork_id: null },
    ]);
    expect(await ledgerOf(f.tdb.sql, 'wf-reaper')).toEqual([
      { n: 1, source: 'wf-reaper', fork: 'wf-reaper-fork-1', from_step: 1, reason: 'diverged', child_fork_id: null },
    ]);

    await waitStatus(f.tdb.sql, 'wf-reaper-fork-1', 'SUCCESS');
    await waitStatus(f.tdb.sql, 'parent-fork-1', 'SUCCESS');
    // Nested: the child started afresh under the fork's default child ID, and ran all its steps again.
    const child = await f.client.getWorkflow('parent-fork-1-1');
    expect(child).toMatchObject({ status: 'SUCCESS', parentWorkflowID: 'parent-fork-1' });
    expect(await f.client.retrieveWorkflow<string[]>('parent-fork-1').getResult()).toEqual([
      'prepare@exec-A',
      'plan@exec-B',
      'tool-b@exec-B',
      'answer@exec-B',
      'summarize@exec-B',
    ]);
    expect(await stepStarts(f.tdb.sql, 'parent', 0)).toBe(1);
    expect(await stepStarts(f.tdb.sql, 'parent-fork-1', 0)).toBe(0);
    expect(await stepStarts(f.tdb.sql, 'wf-reaper-fork-1', 0)).toBe(0);

    // C with a child the app named: a fork from the start step would re-attach to the failed child, so the
    // child is forked afresh and the parent forked past its start row, remapped to the fresh child.
    expect(await ledgerOf(f.tdb.sql, 'parent-x')).toEqual([
      {
        n: 1,
        source: 'parent-x',
        fork: 'parent-x-fork-1',
        from_step: 2,
        reason: 'child-diverged',
        child_fork_id: 'parent-x-fork-1-child-1',
      },
    ]);
    await waitStatus(f.tdb.sql, 'parent-x-fork-1', 'SUCCESS');
    expect(await f.client.getWorkflow('parent-x-fork-1-child-1')).toMatchObject({ status: 'SUCCESS', forkedFrom: 'explicit-child' });
    expect((await f.client.listWorkflowSteps('parent-x-fork-1'))?.find((s) => s.functionID === 1)?.childWorkflowID).toBe(
      'parent-x-fork-1-child-1',
    );
    expect(await stepStarts(f.tdb.sql, 'parent-x', 0)).toBe(1);
    expect(await stepStarts(f.tdb.sql, 'parent-x-fork-1-child-1', 0)).toBe(1); // the child started afresh

    // The ordinary ERROR is never forked, directly or by the reaper.
    expect(await autoFork(deps, 'plain-error')).toMatchObject({ outcome: 'skipped', why: 'not-diverged' });
    expect(await forksOf(f.tdb.sql, 'plain-error')).toEqual([]);
    const ledger = await f.tdb.sql.query(`SELECT count(*)::int AS n FROM afterlife.forks WHERE source_workflow_id = 'plain-error'`);
    expect(ledger.rows[0]).toEqual({ n: 0 });
    // A further invocation finds nothing left to do.
    const again = await reap(f.rt);
    expect(again.passes.diverged).toMatchObject({ runs: 1, found: 0, handed: 0 });
    expect(await allForks(f.tdb.sql)).toHaveLength(5);
  });
});
