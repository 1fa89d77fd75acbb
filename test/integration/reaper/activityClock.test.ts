import { beforeAll, describe, expect, it } from 'vitest';
import { runReaper, type ReaperSummary } from '../../../shared/reaper/index.js';
import { beat } from '../../helpers/agents.js';
import { workflowRows } from '../../helpers/db.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';

/**
 * The activity clock (shared/dbos/activity.ts) through the reaper's two passes that rest on it: the
 * stuck pass (owner alive, `quietSince` in the SELECT and the cancel) and the dead pass for executors
 * without the kit (`activityClock` per executor, then `quietSince` again as the recovery's guard). The
 * example app has no sleeping or parent/child workflows, so the rows are inserted the way DBOS 5.3 writes
 * them (dbos-system-database.md §4.2): a `DBOS.sleep` checkpoint written upfront with its wake-up deadline
 * as `completed_at_epoch_ms`, a child-start row with `child_workflow_id`, the child's `parent_workflow_id`.
 * Every row's own timestamps are backdated two hours, far past both thresholds (1 min); each scenario has a
 * control whose only difference is that the signal under test is old too, and that one is caught.
 */
const NOW = `(EXTRACT(EPOCH FROM now())*1000)::bigint`;
const TWO_HOURS = 7_200_000;

describe('reaper: the activity clock', () => {
  const fx = reaperFixture('app-clock', { env: { STUCK_AFTER_MS: '60000', UNKNOWN_EXECUTOR_GRACE_MS: '60000' } });

  const tick = async (): Promise<Extract<ReaperSummary, { outcome: 'completed' }>> => {
    const s = await runReaper(testReaperDeps(fx.rt), { maxTicks: 1 });
    if (s.outcome !== 'completed') throw new Error('skipped');
    return s;
  };
  /** A PENDING workflow_status row, claimed, created and last changed two hours ago. */
  const workflow = (id: string, executorId: string, parent?: string) =>
    fx.tdb.sql.query(
      `INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name,
                                         created_at, updated_at, started_at_epoch_ms, parent_workflow_id)
       VALUES ($1, 'PENDING', $2, $3, 'v1', $4, ${NOW} - $5::bigint, ${NOW} - $5::bigint, ${NOW} - $5::bigint, $6)`,
      [id, parent ? 'childWorkflow' : 'agentWorkflow', executorId, fx.app, TWO_HOURS, parent ?? null],
    );
  /** A checkpoint: started `startedAgoMs` ago, completed at now + `completedInMs` (negative: in the past). */
  const step = (id: string, functionId: number, name: string, startedAgoMs: number, completedInMs: number, child?: string) =>
    fx.tdb.sql.query(
      `INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, output, child_workflow_id,
                                           started_at_epoch_ms, completed_at_epoch_ms, application_name)
       VALUES ($1, $2, $3, $4, $5, ${NOW} - $6::bigint, ${NOW} + $7::bigint, $8)`,
      [
        id,
        functionId,
        name,
        child ? null : '{"json":null,"__dbos_serializer":"superjson"}',
        child ?? null,
        startedAgoMs,
        completedInMs,
        fx.app,
      ],
    );
  /** A workflow that ran one step two hours ago and then called DBOS.sleep, waking `wakeInMs` from now. */
  const sleeper = async (id: string, executorId: string, wakeInMs: number) => {
    await workflow(id, executorId);
    await step(id, 0, 'step-0', TWO_HOURS, -TWO_HOURS + 1_000);
    await step(id, 1, 'DBOS.sleep', TWO_HOURS - 1_000, wakeInMs);
  };
  /** A parent that started `child` two hours ago and awaits it; the child checkpointed `childStepAgoMs` ago. */
  const family = async (parent: string, parentExecutor: string, child: string, childExecutor: string, childStepAgoMs: number) => {
    await workflow(parent, parentExecutor);
    await step(parent, 0, 'childWorkflow', TWO_HOURS, -TWO_HOURS, child);
    await workflow(child, childExecutor, parent);
    await step(child, 0, 'step-0', childStepAgoMs + 1_000, -childStepAgoMs);
  };

  beforeAll(async () => {
    // The live owner: its heartbeat exactly as the kit writes it, so the stuck pass examines its rows.
    if (!fx.rt.redis) throw new Error('redis required');
    await beat(fx.rt.redis, fx.app, 'exec-live', 'v1', 600_000);
  });

  it('stuck: a workflow in a future DBOS.sleep is not stuck; the same workflow whose deadline passed is', async () => {
    await sleeper('sleeping', 'exec-live', 3_600_000); // wakes in an hour
    await sleeper('slept', 'exec-live', -TWO_HOURS + 2_000); // woke long ago, nothing since
    const s = await tick();
    expect(s.passes.stuck.examined).toBeGreaterThanOrEqual(1);
    expect(s.stuckWorkflows).toContain('slept');
    expect(s.stuckWorkflows).not.toContain('sleeping');
  });

  it('stuck: a parent whose child (or grandchild) checkpointed recently is not stuck; with a quiet child both are', async () => {
    await family('parent-busy', 'exec-live', 'child-busy', 'exec-live', 10_000);
    await family('parent-deep', 'exec-live', 'child-deep', 'exec-live', TWO_HOURS);
    await workflow('grandchild-deep', 'exec-live', 'child-deep');
    await step('grandchild-deep', 0, 'step-0', 11_000, -10_000);
    await family('parent-quiet', 'exec-live', 'child-quiet', 'exec-live', TWO_HOURS);
    const s = await tick();
    for (const busy of ['parent-busy', 'child-busy', 'parent-deep', 'child-deep', 'grandchild-deep'])
      expect(s.stuckWorkflows).not.toContain(busy);
    expect(s.stuckWorkflows).toEqual(expect.arrayContaining(['parent-quiet', 'child-quiet']));
  });

  it('dead: a no-kit executor whose workflow sleeps, or whose workflow’s child checkpointed recently, is not judged dead', async () => {
    // None of these executors ever connected (no session) or beat (no kit): only the activity clock decides.
    await sleeper('nk-sleeping', 'exec-sleeper', 3_600_000);
    // The child was enqueued and claimed by the live executor; the parent waits on the dead-looking one.
    await family('nk-parent', 'exec-parent', 'nk-child', 'exec-live', 10_000);
    await family('nk-quiet', 'exec-quiet', 'nk-quiet-child', 'exec-live', TWO_HOURS);
    const first = await tick(); // absent on one tick
    expect(first.declaredDead).toEqual([]);
    const second = await tick();
    expect(second.sessions).toBe('visible');
    expect(second.declaredDead).toEqual(['exec-quiet']);
    // Not even attempted: the clock kept them out of the recovery (its guard would also have refused).
    const attempts = await fx.tdb.sql.query<{ executor_id: string }>(`SELECT executor_id FROM afterlife.recoveries ORDER BY id`);
    expect(attempts.rows.map((r) => r.executor_id)).toEqual(['exec-quiet']);
    expect(second.passes.dead.activityResumed).toBe(0);
    const rows = await workflowRows(fx.tdb.sql, ['nk-sleeping', 'nk-parent', 'nk-quiet']);
    expect(rows.map((r) => [r.workflow_uuid, r.status, r.executor_id])).toEqual([
      ['nk-parent', 'PENDING', 'exec-parent'],
      ['nk-quiet', 'ENQUEUED', 'exec-quiet'],
      ['nk-sleeping', 'PENDING', 'exec-sleeper'],
    ]);
  });
});
