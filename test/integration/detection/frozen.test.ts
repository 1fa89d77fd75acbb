import { beforeAll, describe, expect, it } from 'vitest';
import { FENCED_EXIT_CODE } from '../../../packages/executor/src/runtime/fence.js';
import { DEFAULT_LIVENESS_LEASE_MS } from '../../../packages/executor/src/contract/lease.js';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { waitFor } from '../../helpers/db.js';
import { expectUntouched, finishedOnOwners, judgedAlive, livenessHolder, startReaper, waitForLock } from '../../helpers/detection.js';
import type { ExecutorHandle } from '../../helpers/executor.js';
import { reaperFixture, TEST_TTL_MS, testReaperDeps } from '../../helpers/reaper.js';

/**
 * Zero false deaths for a live executor whose heartbeat stops while its process lives, as long as the
 * freeze is shorter than the liveness lease (8 s, the default: the server ends a session silent that long),
 * with real DBOS executors and a real reaper ticking every 250 ms (HEARTBEAT_TTL_MS 3000, the default 250 ms beat):
 *   4. SIGSTOPped for 5 s, then SIGCONTed: its key expires, its session keeps the liveness lock (the lease
 *      has not run out), so it is never declared dead, and it finishes its work afterwards. The control, in
 *      the same reaper run: an executor SIGKILLed at the same moment IS declared dead (lock free, beat stale).
 *   4b. SIGSTOPped for longer than the lease: the server ends its session, it IS declared dead and its work
 *      recovered; on SIGCONT its own clock shows the stop and it exits with FENCED_EXIT_CODE at once, starting no
 *      step body after the recovery.
 *   5. a step that blocks the event loop for 5 s (AgentSpec.blockMs): the same as 4, from inside.
 *   6. its liveness connection killed with pg_terminate_backend: it re-takes the lock on a new session
 *      (pg_locks), nothing is recovered.
 * In 4, 5 and 6 its workflows stay on it and finish there, and no step body starts twice.
 */
const TTL_MS = TEST_TTL_MS;
/** The acceptance's figure (issue 19): a freeze or blocked loop of 5 s is never a death. */
const FREEZE_MS = 5_000;
const BLOCK_MS = 5_000;
/** Past the lease by a margin the reaper's two observations and a loaded machine need. */
const LONG_FREEZE_MS = DEFAULT_LIVENESS_LEASE_MS + 5_000;

describe('detection: no false death for a frozen, blocked or disconnected live executor', () => {
  const fx = reaperFixture('app-frozen', { env: { REAPER_TICK_MS: '250', FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' } });
  const ex: Record<string, ExecutorHandle> = {};
  const hasKey = async (id: string) => (await fx.rt.redis?.exists(heartbeatKey(fx.app, id))) === 1;
  const inFirstStep = (ids: string[]) =>
    waitFor(`${ids.join(', ')} in a step`, async () => {
      const r = await fx.tdb.sql.query<{ n: number }>(
        `SELECT count(DISTINCT workflow_id)::int AS n FROM public.step_runs WHERE phase = 'start' AND workflow_id = ANY($1)`,
        [ids],
      );
      return r.rows[0]?.n === ids.length;
    });
  const aliveOnBoth = (reaper: ReturnType<typeof startReaper>, ids: string[]) =>
    waitFor(`the reaper judges ${ids.join(', ')} alive on both witnesses`, async () =>
      reaper.fullEvidenceTicksSince(0).some((t) => judgedAlive(t, ids)),
    );

  beforeAll(async () => {
    for (const id of ['frozen', 'killed', 'blocker', 'cut', 'sleeper']) {
      ex[id] = await fx.executor(id, { beat: true });
      await waitForLock(fx.tdb.sql, fx.app, id);
    }
  }, 120_000);

  it(
    '4: SIGSTOPped for 5 s (shorter than the lease), never declared dead while its session holds the lock; a SIGKILLed one is',
    { timeout: 60_000 },
    async () => {
      const { tdb, app, rt } = fx;
      const owned = { frozen: ['stop-1', 'stop-2'] };
      for (const id of owned.frozen) await ex.frozen?.start(id, { steps: 2, stepMs: 4_000 });
      await ex.killed?.start('kill-1', { steps: 2, stepMs: 4_000 });
      await inFirstStep([...owned.frozen, 'kill-1']);
      const holder = await waitForLock(tdb.sql, app, 'frozen');

      const reaper = startReaper(testReaperDeps(rt));
      try {
        await aliveOnBoth(reaper, ['frozen', 'killed']);
        ex.frozen?.kill('SIGSTOP');
        ex.killed?.kill('SIGKILL');
        const stoppedAt = Date.now();
        const expiredAt = await waitFor(
          'the frozen executor’s heartbeat key expires',
          async () => (!(await hasKey('frozen')) ? Date.now() : undefined),
          { timeoutMs: 2 * TTL_MS, intervalMs: 20 },
        );
        // When the registry says dead (same host, same clock), not when this sequential wait noticed it.
        const declared = await waitFor(
          'the SIGKILLed executor is declared dead',
          async () => {
            const r = await tdb.sql.query<{ at: Date }>(
              `SELECT state_changed_at AS at FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'killed' AND state = 'dead'`,
              [app],
            );
            return r.rows[0]?.at.getTime();
          },
          { timeoutMs: 20_000 },
        );
        // The wait is the fault's length; what matters is checked on the reaper's own ticks.
        await waitFor('the freeze to last FREEZE_MS', async () => Date.now() - stoppedAt >= FREEZE_MS, { timeoutMs: FREEZE_MS + 5_000 });
        expect(await livenessHolder(tdb.sql, app, 'frozen')).toEqual(holder);
        const frozenTicks = reaper.fullEvidenceTicksSince(expiredAt);
        ex.frozen?.kill('SIGCONT');
        const contAt = Date.now();
        await waitFor('the frozen executor beats again', () => hasKey('frozen'), { intervalMs: 20 });
        await waitFor('4 ticks after SIGCONT', async () => reaper.fullEvidenceTicksSince(contAt).length >= 4);
        const summary = await reaper.stop();

        console.log(
          `[detection:sigstop] frozen ${contAt - stoppedAt} ms (key expired ${expiredAt - stoppedAt} ms in); ${frozenTicks.length} ticks saw it without a key, ` +
            `all judged it alive by its lock; the SIGKILLed control was declared dead ${declared - stoppedAt} ms after the kill`,
        );
        expect(frozenTicks.length).toBeGreaterThanOrEqual(4);
        expect(frozenTicks.filter((t) => !judgedAlive(t, ['frozen'])).map((t) => t.r.tick)).toEqual([]);
        expect(summary.declaredDead).toEqual(['killed']);
        await expectUntouched(tdb.sql, owned);
        await finishedOnOwners(tdb.sql, owned);
      } finally {
        ex.frozen?.kill('SIGCONT');
        await reaper.stop().catch(() => undefined);
      }
    },
  );

  it(
    '4b: SIGSTOPped for longer than the lease: declared dead, exits 75 on SIGCONT, starts no step body after the recovery',
    { timeout: 90_000 },
    async () => {
      const { tdb, app, rt } = fx;
      const ids = ['long-1', 'long-2'];
      for (const id of ids) await ex.sleeper?.start(id, { steps: 3, stepMs: 3_000 });
      await inFirstStep(ids);
      const reaper = startReaper(testReaperDeps(rt));
      try {
        await aliveOnBoth(reaper, ['sleeper']);
        let exitAt = 0;
        const exit = ex.sleeper?.exited.then((x) => ((exitAt = Date.now()), x));
        ex.sleeper?.kill('SIGSTOP');
        const stoppedAt = Date.now();
        const declaredAt = await waitFor(
          'the sleeper is declared dead (its lease ran out, its beat is stale)',
          async () => {
            const r = await tdb.sql.query<{ at: Date }>(
              `SELECT state_changed_at AS at FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'sleeper' AND state = 'dead'`,
              [app],
            );
            return r.rows[0]?.at.getTime();
          },
          { timeoutMs: LONG_FREEZE_MS + 10_000, intervalMs: 50 },
        );
        await waitFor('the freeze to last LONG_FREEZE_MS', async () => Date.now() - stoppedAt >= LONG_FREEZE_MS, {
          timeoutMs: LONG_FREEZE_MS + 5_000,
        });
        ex.sleeper?.kill('SIGCONT');
        const contAt = Date.now();
        const { code } = await Promise.race([
          exit ?? Promise.reject(new Error('no sleeper')),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the sleeper did not exit')), 15_000)),
        ]);
        await reaper.stop();
        await waitFor(
          'its workflows finish elsewhere',
          async () => {
            const r = await tdb.sql.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) AND status = 'SUCCESS' AND executor_id <> 'sleeper'`,
              [ids],
            );
            return r.rows[0]?.n === ids.length;
          },
          { timeoutMs: 60_000 },
        );
        const after = await tdb.sql.query(
          `SELECT workflow_id, step, at FROM public.step_runs WHERE executor_id = 'sleeper' AND phase = 'start' AND at >= $1`,
          [new Date(declaredAt)],
        );
        const checkpointedTwice = await tdb.sql.query(
          `SELECT workflow_uuid, function_id FROM dbos.operation_outputs WHERE workflow_uuid = ANY($1) GROUP BY 1, 2 HAVING count(*) > 1`,
          [ids],
        );
        console.log(
          `[detection:long-freeze] SIGSTOP ${contAt - stoppedAt} ms (lease ${DEFAULT_LIVENESS_LEASE_MS} ms): declared dead ${declaredAt - stoppedAt} ms after the stop; ` +
            `exit ${code} ${exitAt - contAt} ms after SIGCONT; step bodies started by it after the declaration: ${JSON.stringify(after.rows)}`,
        );
        expect(declaredAt - stoppedAt).toBeGreaterThanOrEqual(DEFAULT_LIVENESS_LEASE_MS - 1_000);
        expect(code).toBe(FENCED_EXIT_CODE);
        // Its own clock tells it first (runtime/stall.ts): it exits in the first timer after the wake, before the
        // reconnect that would ask the fence question, so no step whose start needs a round trip begins.
        expect(ex.sleeper?.output.join('')).toMatch(/stood still for \d+ ms, longer than its liveness lease \(8000 ms\) allows/);
        expect(after.rows).toEqual([]);
        expect(checkpointedTwice.rows).toEqual([]);
      } finally {
        ex.sleeper?.kill('SIGCONT');
        await reaper.stop().catch(() => undefined);
      }
    },
  );

  it('5: a step that blocks the event loop for 5 s is not a death', { timeout: 60_000 }, async () => {
    const { tdb, app, rt } = fx;
    const owned = { blocker: ['block-1', 'calm-1'] };
    await ex.blocker?.start('calm-1', { steps: 2, stepMs: 3_000 });
    await inFirstStep(['calm-1']);
    const reaper = startReaper(testReaperDeps(rt));
    try {
      await aliveOnBoth(reaper, ['blocker']);
      await ex.blocker?.start('block-1', { steps: 1, stepMs: 500, blockMs: BLOCK_MS });
      await inFirstStep(['block-1']);
      const blockedAt = Date.now();
      const expiredAt = await waitFor(
        'the blocked executor’s heartbeat key expires',
        async () => (!(await hasKey('blocker')) ? Date.now() : undefined),
        { timeoutMs: 2 * TTL_MS, intervalMs: 20 },
      );
      await waitFor(
        'the blocked step ends',
        async () => {
          const r = await tdb.sql.query(`SELECT 1 FROM public.step_runs WHERE workflow_id = 'block-1' AND phase = 'end'`);
          return r.rowCount === 1;
        },
        { timeoutMs: BLOCK_MS + 15_000 },
      );
      const endedAt = Date.now();
      const blockedTicks = reaper.ticks.filter((t) => t.at >= expiredAt && t.at < endedAt - 500);
      await waitFor('it beats again', () => hasKey('blocker'), { intervalMs: 20 });
      await waitFor('4 ticks after the block', async () => reaper.fullEvidenceTicksSince(endedAt).length >= 4);
      expect(await livenessHolder(tdb.sql, app, 'blocker')).toBeDefined();
      const summary = await reaper.stop();

      console.log(
        `[detection:blocked-loop] event loop blocked ~${endedAt - blockedAt} ms (key expired ${expiredAt - blockedAt} ms in); ${blockedTicks.length} ticks saw no key, none declared it dead`,
      );
      expect(blockedTicks.length).toBeGreaterThanOrEqual(4);
      expect(blockedTicks.filter((t) => !judgedAlive(t, ['blocker'])).map((t) => t.r.tick)).toEqual([]);
      expect(summary.declaredDead).toEqual([]);
      await expectUntouched(tdb.sql, owned);
      await finishedOnOwners(tdb.sql, owned);
    } finally {
      await reaper.stop().catch(() => undefined);
    }
  });

  it(
    '6: its liveness connection killed with pg_terminate_backend, it re-takes the lock; nothing is recovered',
    { timeout: 60_000 },
    async () => {
      const { tdb, app, rt } = fx;
      const owned = { cut: ['cut-1', 'cut-2'] };
      for (const id of owned.cut) await ex.cut?.start(id, { steps: 2, stepMs: 3_000 });
      await inFirstStep(owned.cut);
      const reaper = startReaper(testReaperDeps(rt));
      try {
        await aliveOnBoth(reaper, ['cut']);
        const before = await waitForLock(tdb.sql, app, 'cut');
        expect(before.applicationName).toMatch(/^afterlife_live_cut@[0-9a-f]{12}$/);
        const t = await tdb.sql.query<{ ok: boolean }>(
          `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1`,
          [before.applicationName],
        );
        expect(t.rows).toEqual([{ ok: true }]);
        const cutAt = Date.now();
        const after = await waitForLock(tdb.sql, app, 'cut', { notPid: before.pid, timeoutMs: 10_000 });
        const retakenMs = Date.now() - cutAt;
        // The same process (incarnation) on a new session.
        expect(after.applicationName).toBe(before.applicationName);
        await waitFor('8 ticks after the cut', async () => reaper.fullEvidenceTicksSince(cutAt).length >= 8);
        const summary = await reaper.stop();

        console.log(
          `[detection:terminated] liveness session ${before.pid} terminated; lock re-taken by session ${after.pid} within ${retakenMs} ms`,
        );
        expect(summary.declaredDead).toEqual([]);
        expect(
          reaper
            .fullEvidenceTicksSince(cutAt)
            .filter((t) => !judgedAlive(t, ['cut']))
            .map((t) => t.r.tick),
        ).toEqual([]);
        await expectUntouched(tdb.sql, owned);
        await finishedOnOwners(tdb.sql, owned);
      } finally {
        await reaper.stop().catch(() => undefined);
      }
    },
  );
});
