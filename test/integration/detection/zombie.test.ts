import { describe, expect, it } from 'vitest';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { FENCED_EXIT_CODE } from '../../../packages/executor/src/runtime/fence.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS } from '../../../packages/executor/src/runtime/heartbeat.js';
import { recoverExecutor } from '../../../shared/recovery/recoverExecutor.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { judgedAlive, livenessHolder, startReaper, waitForLock } from '../../helpers/detection.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';

/**
 * The zombie: a live executor with the kit, mid-step, is declared dead by a forced recovery (what
 * `afterlife-plane recover --force` runs: a `manual` notice, the registry marked dead first, announced on the
 * fence channel) while a second executor of the same version lives. The first hears it on its liveness
 * connection and exits with FENCED_EXIT_CODE within about one beat of the registry write, before its
 * in-flight steps end, so it never starts another step body (step_runs counts every start); the
 * re-enqueued workflows finish on the survivor. Without the fence it would run its next steps beside
 * the survivor — which this test would count.
 */
const STEP_MS = 3_000;
/** One beat is 250 ms; on a loaded 2-core machine the exit is allowed a second. */
const EXIT_BOUND_MS = 1_000;

describe('detection: a live executor declared dead fences itself', () => {
  const fx = reaperFixture('app-zombie');

  it(
    'exits with the fence code within a beat of the registry write and runs no further step body; its work finishes on the survivor',
    { timeout: 90_000 },
    async () => {
      const { tdb, app, rt } = fx;
      const zombie = await fx.executor('zombie', { beat: true });
      await fx.executor('heir', { beat: true });
      await waitForLock(tdb.sql, app, 'zombie');
      let exitAt = 0;
      const exit = zombie.exited.then((x) => ((exitAt = Date.now()), x));
      const ids = ['z-1', 'z-2', 'z-3'];
      for (const id of ids) await zombie.start(id, { steps: 3, stepMs: STEP_MS });
      await waitFor('every workflow in its first step on the zombie', async () => {
        const r = await tdb.sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM public.step_runs WHERE phase = 'start' AND executor_id = 'zombie' AND workflow_id = ANY($1)`,
          [ids],
        );
        return r.rows[0]?.n === ids.length;
      });

      const summary = await recoverExecutor(
        {
          db: rt.db,
          redis: rt.redis,
          lock: rt.lock,
          logger: rt.logger,
          batchSize: rt.config.recovery.batchSize,
          lockTtlMs: rt.config.recovery.lockTtlMs,
          clock: Date.now,
          recoveredBy: 'cli:test@zombie',
        },
        deathNotice({ executorId: 'zombie', applicationName: app, reason: 'manual', detectedBy: 'afterlife-cli' }),
      );
      expect(summary.outcome).toBe('completed');
      const { code, signal } = await Promise.race([
        exit,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`the zombie did not exit:\n${zombie.output.join('').slice(-3_000)}`)), 10_000),
        ),
      ]);
      const reg = await tdb.sql.query<{ state: string; at: Date }>(
        `SELECT state, state_changed_at AS at FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'zombie'`,
        [app],
      );
      const declaredAt = reg.rows[0]?.at.getTime() ?? NaN;
      const exitMs = exitAt - declaredAt;
      console.log(
        `[detection:zombie] exit code ${code} ${exitMs} ms after the registry write (beat ${DEFAULT_HEARTBEAT_INTERVAL_MS} ms, bound ${EXIT_BOUND_MS} ms); ${summary.reenqueued} re-enqueued`,
      );
      expect(reg.rows[0]?.state).toBe('dead');
      expect({ code, signal }).toEqual({ code: FENCED_EXIT_CODE, signal: null });
      expect(zombie.output.join('')).toContain('executor_fenced');
      expect(exitMs).toBeGreaterThanOrEqual(0);
      expect(exitMs).toBeLessThanOrEqual(EXIT_BOUND_MS);
      expect(await livenessHolder(tdb.sql, app, 'zombie')).toBeUndefined();

      await waitFor(
        'every workflow finishes on the survivor',
        async () => (await workflowRows(tdb.sql, ids)).every((r) => r.status === 'SUCCESS' && r.executor_id === 'heir'),
        { timeoutMs: 45_000 },
      );
      // No step body on the zombie after its declaration: its steps in flight died with it, the survivor ran
      // them again (they were never checkpointed), and every later step ran on the survivor alone.
      const after = await tdb.sql.query(
        `SELECT workflow_id, step, at FROM public.step_runs WHERE executor_id = 'zombie' AND phase = 'start' AND at >= $1`,
        [new Date(declaredAt)],
      );
      expect(after.rows).toEqual([]);
      const starts = await tdb.sql.query<{ executor_id: string; n: number }>(
        `SELECT executor_id, count(*)::int AS n FROM public.step_runs WHERE phase = 'start' AND workflow_id = ANY($1) GROUP BY 1 ORDER BY 1`,
        [ids],
      );
      expect(starts.rows).toEqual([
        { executor_id: 'heir', n: 3 * ids.length },
        { executor_id: 'zombie', n: ids.length },
      ]);
      const ends = await tdb.sql.query(
        `SELECT 1 FROM public.step_runs WHERE executor_id = 'zombie' AND phase = 'end' AND workflow_id = ANY($1)`,
        [ids],
      );
      expect(ends.rowCount).toBe(0);
    },
  );
});

/**
 * The zombie that comes back: its event loop blocked (AgentSpec.blockMs) while its liveness session was
 * ended (as a partition the server gave up on, or a failover, would), so both witnesses are really gone
 * and the reaper rightly declares it dead and hands its workflow to the heir. When the loop unblocks, the
 * step in flight finishes, and then no further step body may start on it: DBOS 5.3's owner check refuses
 * to record the step of a workflow that was handed off, and the kit re-connects, asks the fence question
 * and exits. Whichever acts first, step_runs must show no start by the sleeper after its declaration.
 */
describe('detection: a zombie back from a stall fences itself before its next step', () => {
  const fx = reaperFixture('app-stall', { env: { REAPER_TICK_MS: '250', FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' } });

  it(
    'its liveness session ended while its event loop was blocked: declared dead, it starts no step body afterwards',
    { timeout: 90_000 },
    async () => {
      const { tdb, app, rt } = fx;
      const sleeper = await fx.executor('sleeper', { beat: true });
      await fx.executor('heir', { beat: true });
      const before = await waitForLock(tdb.sql, app, 'sleeper');
      const reaper = startReaper(testReaperDeps(rt));
      try {
        await waitFor('the reaper judges both alive', async () =>
          reaper.fullEvidenceTicksSince(0).some((t) => judgedAlive(t, ['sleeper', 'heir'])),
        );
        await sleeper.start('s-1', { steps: 3, stepMs: 0, blockMs: 4_000 });
        await waitFor(
          'the first step begins (and blocks)',
          async () => (await tdb.sql.query(`SELECT 1 FROM public.step_runs WHERE workflow_id = 's-1' AND phase = 'start'`)).rowCount === 1,
        );
        // While its loop is blocked, its session is ended (a partition the server gave up on, a failover).
        await tdb.sql.query(`SELECT pg_terminate_backend($1)`, [before.pid]);
        const declaredAt = await waitFor(
          'the sleeper is declared dead (lock free, beat stale)',
          async () => {
            const r = await tdb.sql.query<{ at: Date }>(
              `SELECT state_changed_at AS at FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'sleeper' AND state = 'dead'`,
              [app],
            );
            return r.rows[0]?.at.getTime();
          },
          { timeoutMs: 20_000 },
        );
        const { code } = await Promise.race([
          sleeper.exited,
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the sleeper did not exit')), 30_000)),
        ]);
        const exitAt = Date.now();
        const after = await tdb.sql.query(
          `SELECT workflow_id, step, at FROM public.step_runs WHERE executor_id = 'sleeper' AND phase = 'start' AND at >= $1`,
          [new Date(declaredAt)],
        );
        console.log(
          `[detection:stall-zombie] declared dead while blocked; exit ${code} ${exitAt - declaredAt} ms after the declaration (the block lasts 4000 ms); step bodies started by the sleeper after its declaration: ${JSON.stringify(after.rows)}`,
        );
        expect(code).toBe(FENCED_EXIT_CODE);
        expect(after.rows).toEqual([]);
      } finally {
        await reaper.stop().catch(() => undefined);
      }
    },
  );
});
