import { afterAll, describe, expect, it } from 'vitest';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { DEFAULT_LIVENESS_LEASE_MS } from '../../../packages/executor/src/contract/lease.js';
import { FENCED_EXIT_CODE } from '../../../packages/executor/src/runtime/fence.js';
import { waitFor } from '../../helpers/db.js';
import { expectUntouched, finishedOnOwners, judgedAlive, livenessHolder, startReaper, waitForLock } from '../../helpers/detection.js';
import { kitEnv } from '../../helpers/kit.js';
import { type PythonExecutor, pythonSkip, startPythonExecutor } from '../../helpers/pythonExecutor.js';
import { reaperFixture, TEST_TTL_MS, testReaperDeps } from '../../helpers/reaper.js';

/**
 * A frozen Python executor (DBOS for Python 2.30.0 with the kit at its defaults: lease 8 s, the lease renewed
 * every second, the fence question every fourth renewal), with a real reaper ticking every 250 ms — the
 * Python side of test/integration/detection/frozen.test.ts:
 *   - SIGSTOPped for 5 s, shorter than the lease: its key expires, its session keeps the liveness lock, so it
 *     is never declared dead and finishes its work; a SIGKILLed control in the same reaper run is declared.
 *   - SIGSTOPped for longer than the lease: the server ends its session, it is declared dead and its work
 *     recovered; on SIGCONT it exits with FENCED_EXIT_CODE and starts no step body after the declaration.
 */
const noPython = pythonSkip('a frozen Python executor');
const FREEZE_MS = 5_000;
/** Past the lease by a margin the reaper's two observations and a loaded machine need. */
const LONG_FREEZE_MS = DEFAULT_LIVENESS_LEASE_MS + 5_000;

describe.skipIf(noPython)('the Python kit: a frozen executor', () => {
  const fx = reaperFixture('py-frozen', { env: { REAPER_TICK_MS: '250', FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' } });
  const started: PythonExecutor[] = [];
  afterAll(async () => {
    for (const e of started) e.kill('SIGCONT');
    await Promise.all(started.map((e) => e.stop()));
  });
  const py = async (executorId: string): Promise<PythonExecutor> => {
    const e = await startPythonExecutor({
      databaseUrl: fx.tdb.url,
      applicationName: fx.app,
      executorId,
      env: kitEnv({ ttlMs: TEST_TTL_MS }),
    });
    started.push(e);
    await waitForLock(fx.tdb.sql, fx.app, executorId);
    return e;
  };
  const hasKey = async (id: string) => (await fx.rt.redis?.exists(heartbeatKey(fx.app, id))) === 1;
  const inFirstStep = (ids: string[]) =>
    waitFor(`${ids.join(', ')} in a step`, async () => {
      const r = await fx.tdb.sql.query<{ n: number }>(
        `SELECT count(DISTINCT workflow_id)::int AS n FROM public.step_runs WHERE phase = 'start' AND workflow_id = ANY($1)`,
        [ids],
      );
      return r.rows[0]?.n === ids.length;
    });
  const declaredDeadAt = (id: string, timeoutMs: number) =>
    waitFor(
      `${id} is declared dead`,
      async () => {
        const r = await fx.tdb.sql.query<{ at: Date }>(
          `SELECT state_changed_at AS at FROM afterlife.executors WHERE application_name = $1 AND executor_id = $2 AND state = 'dead'`,
          [fx.app, id],
        );
        return r.rows[0]?.at.getTime();
      },
      { timeoutMs, intervalMs: 50 },
    );

  it('SIGSTOPped for 5 s (shorter than the lease), never declared dead; a SIGKILLed one is', { timeout: 120_000 }, async () => {
    const { tdb, app, rt } = fx;
    const frozen = await py('py-frozen');
    const killed = await py('py-killed');
    const owned = { 'py-frozen': ['py-stop-1', 'py-stop-2'] };
    for (const id of owned['py-frozen']) await frozen.start(id, { steps: 2, stepMs: 4_000 });
    await killed.start('py-kill-1', { steps: 2, stepMs: 4_000 });
    await inFirstStep([...owned['py-frozen'], 'py-kill-1']);
    const holder = await waitForLock(tdb.sql, app, 'py-frozen');
    const reaper = startReaper(testReaperDeps(rt));
    try {
      await waitFor('the reaper judges both alive on both witnesses', async () =>
        reaper.fullEvidenceTicksSince(0).some((t) => judgedAlive(t, ['py-frozen', 'py-killed'])),
      );
      frozen.kill('SIGSTOP');
      killed.kill('SIGKILL');
      const stoppedAt = Date.now();
      const expiredAt = await waitFor(
        'the frozen executor’s heartbeat key expires',
        async () => (!(await hasKey('py-frozen')) ? Date.now() : undefined),
        { timeoutMs: 2 * TEST_TTL_MS, intervalMs: 20 },
      );
      const declared = await declaredDeadAt('py-killed', 20_000);
      // The wait is the fault's length; what matters is checked on the reaper's own ticks.
      await waitFor('the freeze to last FREEZE_MS', async () => Date.now() - stoppedAt >= FREEZE_MS, { timeoutMs: FREEZE_MS + 5_000 });
      expect(await livenessHolder(tdb.sql, app, 'py-frozen')).toEqual(holder);
      const frozenTicks = reaper.fullEvidenceTicksSince(expiredAt);
      frozen.kill('SIGCONT');
      const contAt = Date.now();
      await waitFor('the frozen executor beats again', () => hasKey('py-frozen'), { intervalMs: 20 });
      await waitFor('4 ticks after SIGCONT', async () => reaper.fullEvidenceTicksSince(contAt).length >= 4);
      const summary = await reaper.stop();
      console.log(
        `[python:sigstop] frozen ${contAt - stoppedAt} ms (key expired ${expiredAt - stoppedAt} ms in); ${frozenTicks.length} ticks saw it ` +
          `without a key, all judged it alive by its lock; the SIGKILLed control was declared dead ${declared - stoppedAt} ms after the kill`,
      );
      expect(frozenTicks.length).toBeGreaterThanOrEqual(4);
      expect(frozenTicks.filter((t) => !judgedAlive(t, ['py-frozen'])).map((t) => t.r.tick)).toEqual([]);
      expect(summary.declaredDead).toEqual(['py-killed']);
      await expectUntouched(tdb.sql, owned);
      await finishedOnOwners(tdb.sql, owned);
    } finally {
      frozen.kill('SIGCONT');
      await reaper.stop().catch(() => undefined);
    }
  });

  it(
    'SIGSTOPped for longer than the lease: declared dead, exits 75 on SIGCONT, starts no step body after the declaration',
    { timeout: 120_000 },
    async () => {
      const { tdb, rt } = fx;
      const sleeper = await py('py-sleeper');
      await py('py-heir');
      const ids = ['py-long-1', 'py-long-2'];
      for (const id of ids) await sleeper.start(id, { steps: 3, stepMs: 3_000 });
      await inFirstStep(ids);
      const reaper = startReaper(testReaperDeps(rt));
      try {
        await waitFor('the reaper judges the sleeper alive on both witnesses', async () =>
          reaper.fullEvidenceTicksSince(0).some((t) => judgedAlive(t, ['py-sleeper'])),
        );
        let exitAt = 0;
        const exit = sleeper.exited.then((x) => ((exitAt = Date.now()), x));
        sleeper.kill('SIGSTOP');
        const stoppedAt = Date.now();
        const declaredAt = await declaredDeadAt('py-sleeper', LONG_FREEZE_MS + 10_000);
        await waitFor('the freeze to last LONG_FREEZE_MS', async () => Date.now() - stoppedAt >= LONG_FREEZE_MS, {
          timeoutMs: LONG_FREEZE_MS + 5_000,
        });
        sleeper.kill('SIGCONT');
        const contAt = Date.now();
        const { code } = await Promise.race([
          exit,
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the sleeper did not exit')), 15_000)),
        ]);
        await reaper.stop();
        await waitFor(
          'its workflows finish elsewhere',
          async () => {
            const r = await tdb.sql.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) AND status = 'SUCCESS' AND executor_id <> 'py-sleeper'`,
              [ids],
            );
            return r.rows[0]?.n === ids.length;
          },
          { timeoutMs: 60_000 },
        );
        const after = await tdb.sql.query(
          `SELECT workflow_id, step, at FROM public.step_runs WHERE executor_id = 'py-sleeper' AND phase = 'start' AND at >= $1`,
          [new Date(declaredAt)],
        );
        const checkpointedTwice = await tdb.sql.query(
          `SELECT workflow_uuid, function_id FROM dbos.operation_outputs WHERE workflow_uuid = ANY($1) GROUP BY 1, 2 HAVING count(*) > 1`,
          [ids],
        );
        console.log(
          `[python:long-freeze] SIGSTOP ${contAt - stoppedAt} ms (lease ${DEFAULT_LIVENESS_LEASE_MS} ms): declared dead ${declaredAt - stoppedAt} ms ` +
            `after the stop; exit ${code} ${exitAt - contAt} ms after SIGCONT; step bodies started by it after the declaration: ${JSON.stringify(after.rows)}`,
        );
        expect(declaredAt - stoppedAt).toBeGreaterThanOrEqual(DEFAULT_LIVENESS_LEASE_MS - 1_000);
        expect(declaredAt - stoppedAt).toBeLessThanOrEqual(DEFAULT_LIVENESS_LEASE_MS + 1_500);
        expect(code).toBe(FENCED_EXIT_CODE);
        expect(sleeper.output.join('')).toMatch(/was declared dead by reaper-test at \S+ \(reason: /);
        expect(after.rows).toEqual([]);
        expect(checkpointedTwice.rows).toEqual([]);
      } finally {
        sleeper.kill('SIGCONT');
        await reaper.stop().catch(() => undefined);
      }
    },
  );
});
