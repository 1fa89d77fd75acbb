import { beforeAll, describe, expect, it } from 'vitest';
import { VANISHED_HOST_S } from '../../../shared/executor/liveness.js';
import { heartbeatKey } from '../../../shared/heartbeat/index.js';
import { waitFor } from '../../helpers/db.js';
import { expectUntouched, finishedOnOwners, judgedAlive, livenessHolder, startReaper, waitForLock } from '../../helpers/detection.js';
import type { ExecutorHandle } from '../../helpers/executor.js';
import { reaperFixture, TEST_TTL_MS, testReaperDeps } from '../../helpers/reaper.js';

/**
 * Zero false deaths for a live executor whose heartbeat stops while its process lives, with real DBOS
 * executors and a real reaper ticking every 250 ms (HEARTBEAT_TTL_MS 3000, the default 250 ms beat):
 *   4. SIGSTOPped for twice the TTL (13 s: past the session's keepalives too), then SIGCONTed: its key
 *      expires, its session keeps the liveness lock, so it is never declared dead, and it finishes its
 *      work afterwards. The control, in the same
 *      reaper run: an executor SIGKILLed at the same moment IS declared dead (lock free, beat stale).
 *   5. a step that blocks the event loop for twice the TTL (AgentSpec.blockMs): the same, from inside.
 *   6. its liveness connection killed with pg_terminate_backend: it re-takes the lock on a new session
 *      (pg_locks), nothing is recovered.
 * In each, its workflows stay on it and finish there, and no step body starts twice.
 */
const TTL_MS = TEST_TTL_MS;
const BLOCK_MS = 2 * TTL_MS;
/**
 * Twice the TTL, and longer than the liveness session's keepalive / tcp_user_timeout window: at the
 * production TTL (15 s) twice the TTL is 30 s, well past VANISHED_HOST_S, so the freeze must outlast it
 * here too — a stopped process's kernel still acknowledges, so Postgres must keep the session.
 */
const FREEZE_MS = Math.max(2 * TTL_MS, (VANISHED_HOST_S + 2) * 1_000);

describe('detection: no false death for a frozen, blocked or disconnected live executor', () => {
  const fx = reaperFixture('app-frozen', { env: { REAPER_TICK_MS: '250', FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' } });
  const ex: Record<string, ExecutorHandle> = {};
  const hasKey = async (id: string) => (await fx.rt.redis?.exists(heartbeatKey(fx.app, id))) === 1;
  const inFirstStep = (ids: string[]) =>
    waitFor(`${ids.join(', ')} in a step`, async () => {
      const r = await fx.tdb.sql.query<{ n: number }>(`SELECT count(DISTINCT workflow_id)::int AS n FROM public.step_runs WHERE phase = 'start' AND workflow_id = ANY($1)`, [ids]);
      return r.rows[0]?.n === ids.length;
    });
  const aliveOnBoth = (reaper: ReturnType<typeof startReaper>, ids: string[]) =>
    waitFor(`the reaper judges ${ids.join(', ')} alive on both witnesses`, async () =>
      reaper.fullEvidenceTicksSince(0).some((t) => judgedAlive(t, ids)),
    );

  beforeAll(async () => {
    for (const id of ['frozen', 'killed', 'blocker', 'cut']) {
      ex[id] = await fx.executor(id, { beat: true });
      await waitForLock(fx.tdb.sql, fx.app, id);
    }
  }, 120_000);

  it('4: SIGSTOPped for twice the TTL (and past the session keepalives), never declared dead while its session holds the lock; a SIGKILLed one is', { timeout: 60_000 }, async () => {
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
      const expiredAt = await waitFor('the frozen executor’s heartbeat key expires', async () => (!(await hasKey('frozen')) ? Date.now() : undefined), { timeoutMs: 2 * TTL_MS, intervalMs: 20 });
      // When the registry says dead (same host, same clock), not when this sequential wait noticed it.
      const declared = await waitFor('the SIGKILLed executor is declared dead', async () => {
        const r = await tdb.sql.query<{ at: Date }>(`SELECT state_changed_at AS at FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'killed' AND state = 'dead'`, [app]);
        return r.rows[0]?.at.getTime();
      }, { timeoutMs: 20_000 });
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
  });

  it('5: a step that blocks the event loop for twice the TTL is not a death', { timeout: 60_000 }, async () => {
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
      const expiredAt = await waitFor('the blocked executor’s heartbeat key expires', async () => (!(await hasKey('blocker')) ? Date.now() : undefined), { timeoutMs: 2 * TTL_MS, intervalMs: 20 });
      await waitFor('the blocked step ends', async () => {
        const r = await tdb.sql.query(`SELECT 1 FROM public.step_runs WHERE workflow_id = 'block-1' AND phase = 'end'`);
        return r.rowCount === 1;
      }, { timeoutMs: BLOCK_MS + 15_000 });
      const endedAt = Date.now();
      const blockedTicks = reaper.ticks.filter((t) => t.at >= expiredAt && t.at < endedAt - 500);
      await waitFor('it beats again', () => hasKey('blocker'), { intervalMs: 20 });
      await waitFor('4 ticks after the block', async () => reaper.fullEvidenceTicksSince(endedAt).length >= 4);
      expect(await livenessHolder(tdb.sql, app, 'blocker')).toBeDefined();
      const summary = await reaper.stop();

      console.log(`[detection:blocked-loop] event loop blocked ~${endedAt - blockedAt} ms (key expired ${expiredAt - blockedAt} ms in); ${blockedTicks.length} ticks saw no key, none declared it dead`);
      expect(blockedTicks.length).toBeGreaterThanOrEqual(4);
      expect(blockedTicks.filter((t) => !judgedAlive(t, ['blocker'])).map((t) => t.r.tick)).toEqual([]);
      expect(summary.declaredDead).toEqual([]);
      await expectUntouched(tdb.sql, owned);
      await finishedOnOwners(tdb.sql, owned);
    } finally {
      await reaper.stop().catch(() => undefined);
    }
  });

  it('6: its liveness connection killed with pg_terminate_backend, it re-takes the lock; nothing is recovered', { timeout: 60_000 }, async () => {
    const { tdb, app, rt } = fx;
    const owned = { cut: ['cut-1', 'cut-2'] };
    for (const id of owned.cut) await ex.cut?.start(id, { steps: 2, stepMs: 3_000 });
    await inFirstStep(owned.cut);
    const reaper = startReaper(testReaperDeps(rt));
    try {
      await aliveOnBoth(reaper, ['cut']);
      const before = await waitForLock(tdb.sql, app, 'cut');
      expect(before.applicationName).toBe('afterlife_live_cut');
      const t = await tdb.sql.query<{ ok: boolean }>(`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = 'afterlife_live_cut'`);
      expect(t.rows).toEqual([{ ok: true }]);
      const cutAt = Date.now();
      const after = await waitForLock(tdb.sql, app, 'cut', { notPid: before.pid, timeoutMs: 10_000 });
      const retakenMs = Date.now() - cutAt;
      expect(after.applicationName).toBe('afterlife_live_cut');
      await waitFor('8 ticks after the cut', async () => reaper.fullEvidenceTicksSince(cutAt).length >= 8);
      const summary = await reaper.stop();

      console.log(`[detection:terminated] liveness session ${before.pid} terminated; lock re-taken by session ${after.pid} within ${retakenMs} ms`);
      expect(summary.declaredDead).toEqual([]);
      expect(reaper.fullEvidenceTicksSince(cutAt).filter((t) => !judgedAlive(t, ['cut'])).map((t) => t.r.tick)).toEqual([]);
      await expectUntouched(tdb.sql, owned);
      await finishedOnOwners(tdb.sql, owned);
    } finally {
      await reaper.stop().catch(() => undefined);
    }
  });
});
