import { describe, expect, it } from 'vitest';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { runReaper } from '../../../shared/reaper/index.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { FAST_REAPER_ENV, reaperFixture, TEST_TTL_MS, testReaperDeps } from '../../helpers/reaper.js';

/**
 * Crash detection end to end: an executor with the kit's heartbeat (TTL 3 s; the reaper ticks every 1 s) is SIGKILLed
 * mid-step. The reaper, ticking inside one invocation, sees the key absent for a TTL over two ticks and
 * recovers it; the other executor claims its workflows. Measured from the key's expiry (when the death
 * becomes observable) and from the kill.
 */
const TTL_MS = TEST_TTL_MS;
const TICK_MS = Number(FAST_REAPER_ENV.REAPER_TICK_MS);
/** DBOS claims an ENQUEUED row 0.3–1 s after it appears (poll interval 1 s with jitter). */
const CLAIM_MS = 1_500;

describe('reaper: a SIGKILLed executor with the kit', () => {
  const fx = reaperFixture('app-kill', { env: { FUNCTION_TIMEOUT_S: '60' } });

  it('its workflows are claimed by a live executor within TTL + 2 ticks + a claim', async () => {
    const { tdb, rt, app } = fx;
    const victim = await fx.executor('exec-victim', { beat: true });
    await fx.executor('exec-survivor', { beat: true });
    const ids = ['kill-1', 'kill-2', 'kill-3'];
    for (const id of ids) await victim.start(id, { steps: 3, stepMs: 1_500 });
    await waitFor('a checkpoint on the victim', async () => {
      const r = await tdb.sql.query(`SELECT count(*)::int AS n FROM dbos.operation_outputs WHERE workflow_uuid = ANY($1)`, [ids]);
      return (r.rows[0] as { n: number }).n >= 1;
    });

    const stop = new AbortController();
    const reaper = runReaper(testReaperDeps(rt), { signal: stop.signal });
    // Let the reaper see the victim beating first (it learns the victim has the kit).
    await waitFor('the reaper saw the victim beat', async () => {
      const r = await tdb.sql.query(
        `SELECT 1 FROM afterlife.executor_observations WHERE executor_id = 'exec-victim' AND last_beat_seen_at IS NOT NULL`,
      );
      return r.rowCount === 1;
    });

    victim.kill('SIGKILL');
    const killedAt = Date.now();
    await victim.exited;
    const expiredAt = await waitFor(
      'the victim’s heartbeat key to expire',
      async () => ((await rt.redis?.exists(heartbeatKey(app, 'exec-victim'))) === 0 ? Date.now() : undefined),
      { intervalMs: 20 },
    );
    const claimedAt = await waitFor(
      'the survivor claims every workflow of the victim',
      async () => ((await workflowRows(tdb.sql, ids)).every((r) => r.executor_id === 'exec-survivor') ? Date.now() : undefined),
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    stop.abort();
    const summary = await reaper;

    const fromExpiry = claimedAt - expiredAt;
    const fromKill = claimedAt - killedAt;
    console.log(
      `[SIGKILL detection] heartbeat TTL ${TTL_MS} ms, tick ${TICK_MS} ms: key expired ${expiredAt - killedAt} ms after SIGKILL; ` +
        `claimed ${fromExpiry} ms after expiry (bound ${TTL_MS + 2 * TICK_MS + CLAIM_MS} ms), ${fromKill} ms after SIGKILL`,
    );
    expect(fromExpiry).toBeLessThanOrEqual(TTL_MS + 2 * TICK_MS + CLAIM_MS);
    expect(summary.outcome).toBe('completed');
    if (summary.outcome === 'completed') {
      expect(summary.declaredDead).toEqual(['exec-victim']);
      expect(summary.stoppedBecause).toBe('shutting-down');
    }
    await waitFor('all three finish on the survivor', async () => (await workflowRows(tdb.sql, ids)).every((r) => r.status === 'SUCCESS'), {
      timeoutMs: 30_000,
    });
  });
});
