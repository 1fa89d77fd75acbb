import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitReady } from '../../../packages/executor/src/lock/redis.js';
import { runReaper } from '../../../shared/reaper/index.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redisServer.js';

/**
 * Issue 20: `npm start` on a fresh database against a Redis that had been up for 36 minutes warned "redis
 * lost its keys (flush or restart)" at the first candidate: the reaper's sentinel was missing because no
 * reaper had ever set it for this app. A sentinel this process never saw, in a Redis up for longer than a
 * restart would explain, is the first one: no warning, no redis_reset. A restarted Redis (up for seconds)
 * still warns, saying what it saw (a first sighting of a young Redis), not that its run_id changed.
 */
describe('reaper: the first sentinel in a long-running Redis is not a flush', () => {
  // The shared Redis has been up since the machine's services started (well over a minute).
  const fx = reaperFixture('app-first-sentinel');

  it('logs no redis_reset at the first candidate of a fresh app', { timeout: 60_000 }, async () => {
    if (fx.rt.redis && !(await waitReady(fx.rt.redis, 5_000))) throw new Error('redis not ready');
    const info = (await fx.rt.redis?.info('server')) ?? '';
    const uptimeS = Number(/^uptime_in_seconds:(\d+)/m.exec(info)?.[1] ?? 0);
    if (uptimeS < 120) throw new Error(`the shared Redis is up for only ${uptimeS} s: this test needs a long-running one`);
    const e = await fx.executor('exec-first', { beat: true });
    await e.start('first-1', { steps: 1, stepMs: 30_000 });
    await waitFor('PENDING', async () => (await workflowRows(fx.tdb.sql, ['first-1']))[0]?.status === 'PENDING');
    const summary = await runReaper(testReaperDeps(fx.rt), { maxTicks: 3 });
    if (summary.outcome !== 'completed') throw new Error('skipped');
    expect(summary.passes.dead.candidates).toBeGreaterThanOrEqual(3);
    expect(fx.rt.logger.lines.filter((l) => l.event === 'redis_reset' || /lost its keys/.test(l.message))).toEqual([]);
  });
});

describe('reaper: a Redis seconds old when the reaper first sees it', () => {
  let priv: PrivateRedis | undefined;
  beforeAll(async () => {
    priv = await startPrivateRedis();
  });
  afterAll(async () => {
    await priv?.stop();
  });
  const fx = reaperFixture('app-restarted', { redisUrl: () => priv?.url ?? 'redis://127.0.0.1:1' });

  // Issue 27: a fresh `npm start` (its own redis-server, then the first kit) warned "redis lost its keys".
  it('as new as its kits (a fresh local stack): nothing was lost, no redis_reset', { timeout: 60_000 }, async () => {
    const e = await fx.executor('exec-fresh', { beat: true });
    await e.start('fresh-1', { steps: 1, stepMs: 30_000 });
    await waitFor('PENDING', async () => (await workflowRows(fx.tdb.sql, ['fresh-1']))[0]?.status === 'PENDING');
    const summary = await runReaper(testReaperDeps(fx.rt), { maxTicks: 2 });
    if (summary.outcome !== 'completed') throw new Error('skipped');
    expect(summary.passes.dead.candidates).toBeGreaterThanOrEqual(2);
    expect(fx.rt.logger.lines.filter((l) => l.event === 'redis_reset' || /lost its keys/.test(l.message))).toEqual([]);
    await e.stop();
  });

  it('restarted under a kit that started before it: still a reset (redis_reset)', { timeout: 60_000 }, async () => {
    const e = await fx.executor('exec-restarted', { beat: true });
    await e.start('restarted-1', { steps: 1, stepMs: 30_000 });
    await waitFor('PENDING', async () => (await workflowRows(fx.tdb.sql, ['restarted-1']))[0]?.status === 'PENDING');
    // Restarted empty under the running kit, and first seen by this plane (no witness row yet: the first
    // sighting, judged by the Redis's age and the kits' start alone).
    await priv?.kill();
    await priv?.start();
    await fx.tdb.sql.query(`DELETE FROM afterlife.redis_witness`);
    const summary = await runReaper(testReaperDeps(fx.rt), { maxTicks: 2 });
    if (summary.outcome !== 'completed') throw new Error('skipped');
    const resets = fx.rt.logger.lines.filter((l) => l.event === 'redis_reset');
    expect(resets).toHaveLength(1);
    // A first sighting: no run_id was seen to change, and the line does not say one did.
    expect(resets[0]).toMatchObject({ change: 'young' });
    expect(resets[0]?.message).not.toMatch(/run_id/);
    expect(resets[0]?.message).toMatch(/first sees a redis that started \d+ s ago/);
  });
});
