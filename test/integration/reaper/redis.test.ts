import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { waitReady } from '../../../packages/executor/src/lock/redis.js';
import { runReaper } from '../../../shared/reaper/index.js';
import type { TickResult } from '../../../shared/reaper/types.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { reaperFixture, TEST_TTL_MS, testReaperDeps } from '../../helpers/reaper.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redisServer.js';

/**
 * Redis flushed, down and restarted empty, on a private redis-server (the shared one must never be flushed): while two executors are
 * alive, Redis is flushed at the start of six consecutive ticks (ticks 3–8, ~5 s, longer than the 3 s TTL),
 * then killed (unreachable) and restarted empty. None is declared dead; the ticks without Redis say why.
 * Run twice: with the kits' liveness locks (the default: a held lock is life, whatever Redis says — so also
 * when only their keys vanish on two consecutive ticks, 16 and 17), and with the heartbeat alone
 * (AFTERLIFE_LIVENESS=off), where only the reset sentinel keeps them alive: for a TTL after a flush or a
 * restart, a missing key is no evidence. Events are tied to tick numbers through the `reaper.tick` fault
 * point, not to sleeps.
 */
const FLUSH_FROM = 3;
const FLUSH_TO = 8;

describe.each([
  { liveness: 'on', ticks: 20 },
  { liveness: 'off', ticks: 15 },
])('reaper: Redis flushed, unreachable and restarted while executors live (liveness $liveness)', ({ liveness, ticks }) => {
  const faults = new FaultInjector();
  let priv: PrivateRedis | undefined;
  const ids = ['hb-1', 'hb-2'];
  beforeAll(async () => {
    priv = await startPrivateRedis();
  });
  const fx = reaperFixture('app-redis', { faults, redisUrl: () => priv?.url ?? 'redis://127.0.0.1:1' });
  beforeAll(async () => {
    for (const [i, id] of ids.entries()) {
      const e = await fx.executor(`exec-${i + 1}`, { beat: true, env: { AFTERLIFE_LIVENESS: liveness } });
      await e.start(id, { steps: 1, stepMs: 60_000 });
    }
    await waitFor('both PENDING', async () => (await workflowRows(fx.tdb.sql, ids)).every((r) => r.status === 'PENDING'));
  });
  afterAll(async () => {
    await priv?.stop();
  });

  it(
    'no executor is declared dead; the heartbeat pass is skipped while Redis is unreachable, saying why',
    { timeout: 90_000 },
    async () => {
      const { tdb, rt, app } = fx;
      const redis = priv!;
      const before = await tdb.sql.query(
        `SELECT workflow_uuid, status, executor_id, owner_xid, recovery_attempts FROM dbos.workflow_status ORDER BY 1`,
      );
      const flushedAt: number[] = [];
      faults.on('reaper.tick', async (ctx) => {
        const tick = Number(ctx.tick);
        // Flushed just before each of six ticks reads the heartbeats: every key is gone at every read, for
        // longer than a TTL, while the kits keep beating in between.
        if (tick >= FLUSH_FROM && tick <= FLUSH_TO) {
          await redis.flushAll();
          flushedAt.push(Date.now());
        }
        if (tick === 10) await redis.kill(); // unreachable for ticks 10–12
        if (tick === 13) {
          await redis.start(); // back, empty
          if (rt.redis && !(await waitReady(rt.redis, 5_000))) throw new Error('reaper redis did not reconnect');
        }
        // Only the heartbeat keys vanish (not the sentinel), on two consecutive ticks: two samples of
        // absence, but not a TTL of it.
        if (tick === 16 || tick === 17) await rt.redis?.del(heartbeatKey(app, 'exec-1'), heartbeatKey(app, 'exec-2'));
      });
      const tickLines: TickResult[] = [];
      const summary = await runReaper(testReaperDeps(rt), { maxTicks: ticks, onTick: (r) => tickLines.push(r) });
      faults.off('reaper.tick');
      if (summary.outcome !== 'completed') throw new Error('skipped');
      expect(summary.ticks).toBe(ticks);
      expect(summary.declaredDead).toEqual([]);
      expect(summary.passes.dead.recoveredInline ?? 0).toBe(0);
      expect(summary.heartbeatSkipped.some((r) => r.startsWith('redis unreachable'))).toBe(true);
      expect(summary.heartbeatSkipped.some((r) => r.startsWith('redis lost its keys'))).toBe(true);

      const skippedTicks = tickLines.filter((l) => JSON.stringify(l.dead).includes('redis unreachable')).map((l) => l.tick);
      console.log(`[redis lost] heartbeat pass skipped (redis unreachable) on ticks ${skippedTicks.join(', ')}`);
      expect(skippedTicks).toEqual(expect.arrayContaining([10, 11, 12]));
      // Every flushed tick was recognised as a reset, not counted as absence.
      const resetTicks = tickLines.filter((l) => JSON.stringify(l.dead).includes('redis lost its keys')).map((l) => l.tick);
      expect(resetTicks).toEqual(expect.arrayContaining(Array.from({ length: FLUSH_TO - FLUSH_FROM + 1 }, (_, i) => FLUSH_FROM + i)));
      // The outage lasted longer than a TTL, over six ticks: the TTL rule alone would have fired.
      expect(flushedAt).toHaveLength(FLUSH_TO - FLUSH_FROM + 1);
      expect(Math.max(...flushedAt) - Math.min(...flushedAt)).toBeGreaterThan(TEST_TTL_MS);
      if (liveness === 'on') {
        // Keys gone at ticks 16–17 with Redis up: both kits still read alive, by their held locks.
        const aliveTicks = tickLines.filter((l) => (l.dead as { alive?: number }).alive === 2).map((l) => l.tick);
        expect(aliveTicks).toEqual(expect.arrayContaining([16, 17]));
      }

      const after = await tdb.sql.query(
        `SELECT workflow_uuid, status, executor_id, owner_xid, recovery_attempts FROM dbos.workflow_status ORDER BY 1`,
      );
      expect(after.rows).toEqual(before.rows);
      expect((await tdb.sql.query(`SELECT count(*)::int AS n FROM afterlife.recoveries`)).rows[0]).toEqual({ n: 0 });
    },
  );
});
