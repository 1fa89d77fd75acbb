import { describe, expect, it } from 'vitest';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { postEvent, pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { startExecutor } from '../../helpers/executor.js';
import { executorDeathFixture } from '../../helpers/executorDeath.js';

/**
 * Executor A dies by SIGKILL mid-run; a death notice posted to the served executorDeath
 * function re-enqueues exactly A's PENDING workflows and live executor B completes all 20.
 */
describe('executor death → recovery through the served function', () => {
  const f = executorDeathFixture('app-x');

  it('re-enqueues exactly the dead executor’s PENDING workflows and a live executor completes them', async () => {
    const queues = { agents: { concurrency: 2 } };
    const a = await startExecutor({
      databaseUrl: f.tdb.url,
      applicationName: f.app,
      applicationVersion: 'v1',
      executorId: 'exec-A',
      queues,
    });
    f.executors.push(a);
    const ids = Array.from({ length: 20 }, (_, i) => `wf-${i}`);
    for (const [i, id] of ids.entries()) await a.start(id, { steps: 5, stepMs: 400 }, i % 2 === 0 ? 'agents' : undefined);

    // Kill A once some steps are checkpointed.
    await waitFor('checkpoints on A', async () => {
      const r = await f.tdb.sql.query(`SELECT count(*)::int AS n FROM dbos.operation_outputs`);
      return (r.rows[0] as { n: number }).n >= 12;
    });
    a.kill('SIGKILL');
    await a.exited;
    const pendingOfA = (
      await f.tdb.sql.query<{ workflow_uuid: string }>(
        `SELECT workflow_uuid FROM dbos.workflow_status WHERE status = 'PENDING' AND executor_id = 'exec-A'`,
      )
    ).rows.map((r) => r.workflow_uuid);
    expect(pendingOfA.length).toBeGreaterThan(0);
    const enqueuedBefore = (await workflowRows(f.tdb.sql, ids)).filter((r) => r.status === 'ENQUEUED').map((r) => r.workflow_uuid);
    const checkpointsBefore = await f.tdb.sql.query<{ workflow_uuid: string; function_id: number; output: string }>(
      `SELECT workflow_uuid, function_id, output FROM dbos.operation_outputs ORDER BY 1, 2`,
    );

    const b = await startExecutor({
      databaseUrl: f.tdb.url,
      applicationName: f.app,
      applicationVersion: 'v1',
      executorId: 'exec-B',
      queues,
    });
    f.executors.push(b);
    // B's kit heartbeat, as the contract defines it (the kit itself is tested in its own suite).
    await f.rt.redis?.set(
      heartbeatKey(f.app, 'exec-B'),
      JSON.stringify({
        executorId: 'exec-B',
        applicationName: f.app,
        applicationVersion: 'v1',
        state: 'alive',
        startedAt: new Date().toISOString(),
        beatAt: new Date().toISOString(),
        inFlight: 0,
      }),
      'PX',
      60_000,
    );

    const notice = deathNotice({ executorId: 'exec-A', applicationName: f.app, reason: 'manual', detectedBy: 'test' });
    const res = await postEvent(f.server.url, pubsubCloudEvent(JSON.stringify(notice), { messageId: 'm-1' }));
    expect(res.status).toBeLessThan(300);

    const batches = await f.tdb.sql.query<{ workflow_ids: string[] }>(`SELECT workflow_ids FROM afterlife.recovery_batches`);
    const recovered = batches.rows.flatMap((r) => r.workflow_ids).sort();
    expect(recovered).toEqual([...pendingOfA].sort());

    const done = await waitFor(
      'all 20 SUCCESS',
      async () => {
        const rows = await workflowRows(f.tdb.sql, ids);
        return rows.every((r) => r.status === 'SUCCESS') ? rows : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(done).toHaveLength(20);
    // Queued workflows stayed on their queue.
    for (const r of done) expect(r.queue_name === 'agents').toBe(ids.indexOf(r.workflow_uuid) % 2 === 0);
    // Checkpointed steps did not run again: every checkpoint from before the kill is unchanged, and no step
    // that had ended before the kill started again.
    const after = await f.tdb.sql.query<{ workflow_uuid: string; function_id: number; output: string }>(
      `SELECT workflow_uuid, function_id, output FROM dbos.operation_outputs WHERE (workflow_uuid, function_id) IN (SELECT * FROM unnest($1::text[], $2::int[]))`,
      [checkpointsBefore.rows.map((r) => r.workflow_uuid), checkpointsBefore.rows.map((r) => r.function_id)],
    );
    const key = (r: { workflow_uuid: string; function_id: number }) => `${r.workflow_uuid}#${r.function_id}`;
    const outputsAfter = new Map(after.rows.map((r) => [key(r), r.output]));
    expect(checkpointsBefore.rows.filter((r) => outputsAfter.get(key(r)) !== r.output)).toEqual([]);
    // A step that was checkpointed before the kill started exactly once (the one in flight may re-run).
    const reruns = await f.tdb.sql.query(
      `SELECT s.workflow_id, s.step, count(*)::int AS runs FROM public.step_runs s
         JOIN unnest($1::text[], $2::int[]) AS c(wf, fid) ON c.wf = s.workflow_id AND c.fid = s.step
        WHERE s.phase = 'start' GROUP BY 1, 2 HAVING count(*) <> 1`,
      [checkpointsBefore.rows.map((r) => r.workflow_uuid), checkpointsBefore.rows.map((r) => r.function_id)],
    );
    expect(reruns.rows).toEqual([]);
    expect(checkpointsBefore.rows.length).toBeGreaterThanOrEqual(12);
    // The queue limit held: never more than 2 'agents' workflows running steps at once.
    const overlap = await f.tdb.sql.query<{ n: number }>(
      `WITH spans AS (
         SELECT s.workflow_id, min(s.at) AS t0, max(s.at) AS t1 FROM public.step_runs s
           JOIN dbos.workflow_status w ON w.workflow_uuid = s.workflow_id AND w.queue_name = 'agents'
          GROUP BY s.workflow_id, s.executor_id)
       SELECT max(c)::int AS n FROM (SELECT (SELECT count(*) FROM spans s2 WHERE s2.t0 <= s1.t0 AND s2.t1 > s1.t0) AS c FROM spans s1) x`,
    );
    expect(overlap.rows[0]?.n).toBeLessThanOrEqual(2);
    expect(enqueuedBefore.every((id) => !recovered.includes(id))).toBe(true);
  });
});
