import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heartbeatKey } from '../../../shared/heartbeat/index.js';
import { waitReady } from '../../../shared/lock/redis.js';
import { runReaper } from '../../../shared/reaper/index.js';
import { FaultInjector } from '../../../shared/testing/faults.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redisServer.js';

/**
 * Acceptance H, on a private redis-server (the shared one must never be flushed): while two executors are
 * alive, Redis is flushed twice in a row, their keys vanish on two consecutive ticks, Redis is killed (so
 * unreachable) and restarted empty. None is declared dead; the ticks without Redis say why. Events are
 * tied to tick numbers through the `reaper.tick` fault point, not to sleeps.
 */
describe('reaper: Redis flushed, unreachable and restarted while executors live', () => {
  const faults = new FaultInjector();
  let priv: PrivateRedis | undefined;
  const ids = ['hb-1', 'hb-2'];
  beforeAll(async () => {
    priv = await startPrivateRedis();
  });
  const fx = reaperFixture('app-redis', { faults, redisUrl: () => priv?.url ?? 'redis://127.0.0.1:1' });
  beforeAll(async () => {
    for (const [i, id] of ids.entries()) {
      const e = await fx.executor(`exec-${i + 1}`, { beat: true });
      await e.start(id, { steps: 1, stepMs: 60_000 });
    }
    await waitFor('both PENDING', async () => (await workflowRows(fx.tdb.sql, ids)).every((r) => r.status === 'PENDING'));
  });
  afterAll(async () => {
    await priv?.stop();
  });

  it('H: no executor is declared dead; the heartbeat pass is skipped while Redis is unreachable, saying why', { timeout: 90_000 }, async () => {
    const { tdb, rt, app } = fx;
    const redis = priv!;
    const before = await tdb.sql.query(`SELECT workflow_uuid, status, executor_id, owner_xid, recovery_attempts FROM dbos.workflow_status ORDER BY 1`);
    faults.on('reaper.tick', async (ctx) => {
      const tick = Number(ctx.tick);
      if (tick === 3 || tick === 4) await redis.flushAll(); // flushed on two consecutive ticks
      if (tick === 6) await redis.kill(); // unreachable for ticks 6–8
      if (tick === 9) {
        await redis.start(); // back, empty
        if (rt.redis && !(await waitReady(rt.redis, 5_000))) throw new Error('reaper redis did not reconnect');
      }
      // Only the heartbeat keys vanish (not the sentinel), on two consecutive ticks: two samples of
      // absence, but not a TTL of it.
      if (tick === 12 || tick === 13) await rt.redis?.del(heartbeatKey(app, 'exec-1'), heartbeatKey(app, 'exec-2'));
    });
    const summary = await runReaper(testReaperDeps(rt), { maxTicks: 16 });
    faults.off('reaper.tick');
    if (summary.outcome !== 'completed') throw new Error('skipped');
    expect(summary.ticks).toBe(16);
    expect(summary.declaredDead).toEqual([]);
    expect(summary.passes.dead.recoveredInline ?? 0).toBe(0);
    expect(summary.heartbeatSkipped.some((r) => r.startsWith('redis unreachable'))).toBe(true);
    expect(summary.heartbeatSkipped.some((r) => r.startsWith('redis lost its keys'))).toBe(true);

    const tickLines = rt.logger.lines.filter((l) => l.event === 'reaper_tick');
    const skippedTicks = tickLines.filter((l) => JSON.stringify(l.dead).includes('redis unreachable')).map((l) => l.tick);
    console.log(`[acceptance H] heartbeat pass skipped (redis unreachable) on ticks ${skippedTicks.join(', ')}`);
    expect(skippedTicks).toEqual(expect.arrayContaining([6, 7, 8]));
    // The two-sample absence at ticks 12–13 was recorded, and was not enough.
    const absentTicks = tickLines.filter((l) => (l.dead as { absent?: number }).absent === 2).map((l) => l.tick);
    expect(absentTicks).toEqual(expect.arrayContaining([12, 13]));

    const after = await tdb.sql.query(`SELECT workflow_uuid, status, executor_id, owner_xid, recovery_attempts FROM dbos.workflow_status ORDER BY 1`);
    expect(after.rows).toEqual(before.rows);
    expect((await tdb.sql.query(`SELECT count(*)::int AS n FROM afterlife.recoveries`)).rows[0]).toEqual({ n: 0 });
  });
});
