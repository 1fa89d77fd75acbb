import { describe, expect, it } from 'vitest';
import { handleDeathEvent } from '../../helpers/executorDeath.js';
import { deathNotice, type DeathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { createRedis } from '../../../packages/executor/src/lock/redis.js';
import { beat, makeOrphans, pendingIds } from '../../helpers/agents.js';
import { pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { testRuntime } from '../../helpers/runtime.js';
import { executorDeathFixture } from '../../helpers/executorDeath.js';
import { holdLiveness } from '../../helpers/liveness.js';

/**
 * Issue 10: a notice is a claim anyone on the topic can
 * make, so a death the heartbeat contradicts is refused (acked, logged, counted) unless forced, and an
 * inferred death whose heartbeat cannot be re-read waits instead of acting.
 */
describe('death notices about live executors', () => {
  const f = executorDeathFixture('app-live', {
    serve: false,
    setup: async ({ tdb, app }) => {
      const common = { databaseUrl: tdb.url, sql: tdb.sql, applicationName: app, applicationVersion: 'v1', stepMs: 60_000 };
      await makeOrphans({ ...common, executorId: 'live-1', ids: ['l1-a', 'l1-b', 'l1-c'] });
      await makeOrphans({ ...common, executorId: 'draining-1', ids: ['d1-a', 'd1-b'] });
      await makeOrphans({ ...common, executorId: 'lapsed-1', ids: ['h1-a', 'h1-b'] });
      await makeOrphans({ ...common, executorId: 'locked-1', ids: ['k1-a', 'k1-b'] });
    },
  });
  const envelope = (n: DeathNotice) => JSON.parse(pubsubCloudEvent(JSON.stringify(n)).body) as unknown;
  const notice = (executorId: string, reason: DeathNotice['reason'], force?: boolean) =>
    deathNotice({ executorId, applicationName: f.app, reason, detectedBy: 'forger', ...(force === undefined ? {} : { force }) });

  it('a manual notice about an executor whose heartbeat says alive is refused, logged and counted, and redelivered (issue 30); nothing moves', async () => {
    for (const reason of ['manual', 'sigterm', 'drained'] as const) {
      await beat(f.rt.redis!, f.app, 'live-1', 'v1');
      const before = f.rt.logger.lines.length;
      const out = await handleDeathEvent(f.rt, envelope(notice('live-1', reason)));
      expect(out).toMatchObject({ ack: false, kind: 'retry', code: 'heartbeat_alive' });
      const line = f.rt.logger.lines.slice(before).find((l) => l.event === 'death_notice_refused');
      expect(line?.reason).toMatch(/alive.*force/);
    }
    expect(await pendingIds(f.tdb.sql, 'live-1')).toHaveLength(3);
    const registry = await f.tdb.sql.query(`SELECT state FROM afterlife.executors WHERE executor_id = 'live-1'`);
    expect(registry.rows.map((r: { state: string }) => r.state)).not.toContain('dead');
  });

  it('a manual notice about an executor holding its liveness lock is refused, with Redis down too', async () => {
    // The lock as the kit takes it, held by a session of this test: Postgres's word that the process lives.
    const { session, took } = await holdLiveness(f.rt.db, f.tdb.url, {
      applicationName: f.app,
      executorId: 'locked-1',
      incarnation: 'inc-locked-1',
    });
    const down = createRedis('redis://127.0.0.1:1');
    const blind = testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app, redis: down });
    try {
      expect(took).toEqual([{ ok: true, recorded: true }]);
      const out = await handleDeathEvent(blind, envelope(notice('locked-1', 'manual')));
      expect(out).toMatchObject({ ack: true, kind: 'refused' });
      expect(blind.logger.lines.find((l) => l.event === 'death_notice_refused')?.reason).toMatch(/liveness lock/);
      expect(await pendingIds(f.tdb.sql, 'locked-1')).toHaveLength(2);
    } finally {
      await session.end();
      await blind.close();
      down.disconnect();
    }
  });

  it('"force": true overrides the heartbeat (the operator is sure)', async () => {
    await beat(f.rt.redis!, f.app, 'live-1', 'v1');
    const out = await handleDeathEvent(f.rt, envelope(notice('live-1', 'manual', true)));
    expect(out).toMatchObject({ ack: true, kind: 'recovered', summary: { reenqueued: 3 } });
  });

  it("an executor's own sigterm notice is accepted while its key says draining", async () => {
    await beat(f.rt.redis!, f.app, 'draining-1', 'v1', 60_000, 'draining');
    const out = await handleDeathEvent(f.rt, envelope(notice('draining-1', 'sigterm')));
    expect(out).toMatchObject({ ack: true, kind: 'recovered', summary: { reenqueued: 2 } });
  });

  it('a heartbeat-lapsed notice while Redis is down is nacked, not recovered without the re-check', async () => {
    const down = createRedis('redis://127.0.0.1:1');
    const blind = testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app, redis: down });
    try {
      const out = await handleDeathEvent(blind, envelope(notice('lapsed-1', 'heartbeat-lapsed')));
      expect(out).toMatchObject({ ack: false, kind: 'retry', code: 'heartbeat_unknown' });
      expect(await pendingIds(f.tdb.sql, 'lapsed-1')).toHaveLength(2);
    } finally {
      await blind.close();
      down.disconnect();
    }
    // Redis back and the key absent: the redelivery recovers.
    const out = await handleDeathEvent(f.rt, envelope(notice('lapsed-1', 'heartbeat-lapsed')));
    expect(out).toMatchObject({ ack: true, kind: 'recovered', summary: { reenqueued: 2 } });
  });
});
