import { describe, expect, it } from 'vitest';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { recoverExecutor } from '../../../shared/recovery/recoverExecutor.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { startReaper, waitForLock } from '../../helpers/detection.js';
import type { ExecutorHandle } from '../../helpers/executor.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';

/**
 * Incarnations (issue 19): every process start is a new incarnation of its executor ID, so a fixed ID —
 * DBOS's own model, StatefulSets, systemd, a developer pressing Ctrl-C — can be used again. With real DBOS
 * executors and the kit, a new process with the same ID starts normally (registered alive under a new
 * incarnation, holding its lease, running new work, never fenced):
 *   1. after a clean drain (SIGTERM, nothing left: the registry said `dead`, reason sigterm);
 *   2. after a SIGKILL the reaper declared and recovered;
 *   3. while the old incarnation is still being recovered: afterlife's recovery of it races the new process's
 *      DBOS launch, whose own recovery of the ID is the same conditional statement. Each workflow finishes
 *      once, no step is checkpointed twice, and the old incarnation's death never lands on the new one.
 */
type Reg = { state: string; incarnation: string | null; reason: string | null };

describe('detection: an executor ID used again by a new process', () => {
  const fx = reaperFixture('app-reuse', { env: { REAPER_TICK_MS: '250', FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' } });
  const registry = async (id: string): Promise<Reg | undefined> => {
    const r = await fx.tdb.sql.query<Reg>(
      `SELECT state, incarnation, reason FROM afterlife.executors WHERE application_name = $1 AND executor_id = $2`,
      [fx.app, id],
    );
    return r.rows[0];
  };
  const inFirstStep = (executorId: string, ids: string[]) =>
    waitFor(`${ids.join(', ')} in a step on ${executorId}`, async () => {
      const r = await fx.tdb.sql.query<{ n: number }>(
        `SELECT count(DISTINCT workflow_id)::int AS n FROM public.step_runs WHERE phase = 'start' AND executor_id = $1 AND workflow_id = ANY($2)`,
        [executorId, ids],
      );
      return r.rows[0]?.n === ids.length;
    });
  const allSuccess = (ids: string[], timeoutMs = 60_000) =>
    waitFor(
      `${ids.join(', ')} SUCCESS`,
      async () => (await workflowRows(fx.tdb.sql, ids)).every((r) => r.status === 'SUCCESS') && ids.length > 0,
      { timeoutMs },
    );
  const checkpointedTwice = async (ids: string[]) =>
    (
      await fx.tdb.sql.query(
        `SELECT workflow_uuid, function_id FROM dbos.operation_outputs WHERE workflow_uuid = ANY($1) GROUP BY 1, 2 HAVING count(*) > 1`,
        [ids],
      )
    ).rows;

  /** The new process runs like any other: registered alive under its own incarnation, holding its lease, running work, not fenced. */
  const startsNormally = async (e: ExecutorHandle, id: string, old: string | null | undefined, wf: string) => {
    const reg = await waitFor(`${id} registered under a new incarnation`, async () => {
      const r = await registry(id);
      return r && r.state === 'alive' && r.incarnation && r.incarnation !== old ? r : undefined;
    });
    const holder = await waitForLock(fx.tdb.sql, fx.app, id);
    expect(holder.applicationName).toBe(`afterlife_live_${id}@${reg.incarnation}`);
    await e.start(wf, { steps: 2, stepMs: 200 });
    await allSuccess([wf]);
    expect((await workflowRows(fx.tdb.sql, [wf]))[0]?.executor_id).toBe(id);
    // Asked its fence question a few times by now, and still here.
    await waitFor('a few fence checks', async () => true, { timeoutMs: 100 });
    expect(e.child.exitCode).toBeNull();
    expect(e.output.join('')).not.toContain('executor_fenced');
    expect((await registry(id))?.state).toBe('alive');
  };

  it('1: after a clean drain', { timeout: 90_000 }, async () => {
    const first = await fx.executor('fixed-drain', { beat: true });
    await waitForLock(fx.tdb.sql, fx.app, 'fixed-drain');
    const old = (await registry('fixed-drain'))?.incarnation;
    await first.start('drain-1', { steps: 1, stepMs: 300 });
    await allSuccess(['drain-1']);
    first.kill('SIGTERM');
    const { code } = await first.exited;
    expect(code).toBe(0);
    expect(first.output.join('')).toContain('nothing left PENDING');
    expect(await registry('fixed-drain')).toMatchObject({ state: 'dead', reason: 'sigterm', incarnation: old });

    const second = await fx.executor('fixed-drain', { beat: true });
    await startsNormally(second, 'fixed-drain', old, 'drain-2');
  });

  it('2: after a SIGKILL that was recovered', { timeout: 120_000 }, async () => {
    const first = await fx.executor('fixed-kill', { beat: true });
    await fx.executor('heir-kill', { beat: true });
    await waitForLock(fx.tdb.sql, fx.app, 'fixed-kill');
    const old = (await registry('fixed-kill'))?.incarnation;
    const ids = ['kill-1', 'kill-2'];
    for (const id of ids) await first.start(id, { steps: 2, stepMs: 3_000 });
    await inFirstStep('fixed-kill', ids);
    const reaper = startReaper(testReaperDeps(fx.rt));
    try {
      first.kill('SIGKILL');
      await first.exited;
      await waitFor('the reaper declares it dead', async () => (await registry('fixed-kill'))?.state === 'dead', { timeoutMs: 30_000 });
      await allSuccess(ids);
    } finally {
      await reaper.stop().catch(() => undefined);
    }
    // Finished by a live executor of the version (any of this file's), never by the dead process.
    expect((await workflowRows(fx.tdb.sql, ids)).filter((r) => r.executor_id === 'fixed-kill')).toEqual([]);
    const audit = await fx.tdb.sql.query<{ incarnation: string | null }>(
      `SELECT incarnation FROM afterlife.recoveries WHERE executor_id = 'fixed-kill'`,
    );
    expect(audit.rows.map((r) => r.incarnation)).toEqual([old]);

    const second = await fx.executor('fixed-kill', { beat: true });
    await startsNormally(second, 'fixed-kill', old, 'kill-3');
    expect(await checkpointedTwice(ids)).toEqual([]);
  });

  it(
    '3: while the old incarnation is still being recovered (DBOS launch recovery and afterlife recovery race)',
    { timeout: 120_000 },
    async () => {
      const first = await fx.executor('fixed-race', { beat: true });
      await fx.executor('heir-race', { beat: true });
      await waitForLock(fx.tdb.sql, fx.app, 'fixed-race');
      const old = (await registry('fixed-race'))?.incarnation ?? undefined;
      expect(old).toBeDefined();
      const ids = Array.from({ length: 6 }, (_, i) => `race-${i}`);
      for (const id of ids) await first.start(id, { steps: 2, stepMs: 2_000 });
      await inFirstStep('fixed-race', ids);
      first.kill('SIGKILL');
      await first.exited;
      await waitFor(
        'its lock is free',
        async () =>
          (await fx.tdb.sql.query(`SELECT 1 FROM pg_stat_activity WHERE application_name LIKE 'afterlife_live_fixed-race@%'`)).rowCount ===
          0,
      );

      // Both at once: afterlife's recovery of the old incarnation, and a new process with the ID whose DBOS
      // launch re-enqueues the same PENDING rows with the same statement.
      const { rt } = fx;
      const [summary, second] = await Promise.all([
        recoverExecutor(
          {
            db: rt.db,
            redis: rt.redis,
            lock: rt.lock,
            logger: rt.logger,
            batchSize: 2,
            lockTtlMs: rt.config.recovery.lockTtlMs,
            clock: Date.now,
            recoveredBy: 'test@race',
          },
          deathNotice({
            executorId: 'fixed-race',
            applicationName: fx.app,
            reason: 'manual',
            detectedBy: 'test',
            ...(old ? { incarnation: old } : {}),
          }),
        ),
        fx.executor('fixed-race', { beat: true }),
      ]);
      await allSuccess(ids);
      const moved = summary.outcome === 'false-alarm' ? 0 : summary.reenqueued;
      const finals = await workflowRows(fx.tdb.sql, ids);
      console.log(
        `[detection:reuse-race] afterlife re-enqueued ${moved} of ${ids.length}; finished on ${JSON.stringify(finals.map((r) => r.executor_id))}`,
      );
      expect(await checkpointedTwice(ids)).toEqual([]);
      // The old incarnation's death did not land on the new one, which runs on.
      await startsNormally(second, 'fixed-race', old, 'race-new');
    },
  );
});
