import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { createRedis, waitReady } from '../../../packages/executor/src/lock/redis.js';
import { sentinelKey } from '../../../shared/reaper/evidence.js';
import { REDIS_BLIND_FALLBACK_MS } from '../../../shared/reaper/deadExecutors.js';
import { pendingIds } from '../../helpers/agents.js';
import { waitFor } from '../../helpers/db.js';
import { type RunningReaper, startReaper, waitForLock } from '../../helpers/detection.js';
import { type PlaneRoles, planeRoles } from '../../helpers/planeRoles.js';
import { FAST_REAPER_ENV, reaperFixture, testReaperDeps } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * Issue 30: whoever holds the Redis URL cannot hide a death. An attacker rewrites the reaper's sentinel to
 * "now" every 100 ms (or deletes it every 100 ms) and deletes the app's heartbeat keys; a SIGKILLed executor
 * with the kit is still declared within 15 s: the sentinel's value is not read (Redis's own run_id and uptime,
 * kept in Postgres, say how long it kept its keys), and where Redis cannot judge, the liveness lock decides
 * after REDIS_BLIND_FALLBACK_MS with a WARNING naming why. The reaper runs as its role of infra/grants.sql;
 * the executors are real DBOS processes with the kit.
 */
describe('trust: an attacker with the Redis URL and the reaper sentinel', () => {
  const fx = reaperFixture('app-sentinel');
  let roles: PlaneRoles | undefined;
  let rt: ReturnType<typeof testRuntime> | undefined;
  let reaper: RunningReaper | undefined;
  const attacker = createRedis(TEST_REDIS_URL);
  beforeAll(async () => {
    roles = await planeRoles(fx.tdb.url, fx.tdb.sql);
    rt = testRuntime({ databaseUrl: roles.url('reaper'), applicationName: fx.app, env: { ...FAST_REAPER_ENV, REAPER_TICK_MS: '250' } });
    await waitReady(attacker, 5_000);
    await fx.executor('heir', { beat: true });
    reaper = startReaper(testReaperDeps(rt));
  });
  afterAll(async () => {
    await reaper?.stop().catch(() => undefined);
    attacker.disconnect();
    await rt?.close();
    await roles?.drop();
  });

  /** Every 100 ms: the sentinel rewritten to now (or deleted), and every heartbeat key of the app deleted. */
  const attack = (sentinel: 'now' | 'delete') => {
    const key = sentinelKey(fx.app);
    const timer = setInterval(() => {
      const m = attacker.multi();
      if (sentinel === 'now') m.set(key, new Date().toISOString());
      else m.del(key);
      m.del(heartbeatKey(fx.app, 'heir'), heartbeatKey(fx.app, 'victim-now'), heartbeatKey(fx.app, 'victim-del'));
      void m.exec().catch(() => undefined);
    }, 100);
    return () => clearInterval(timer);
  };

  /** A victim with PENDING work, SIGKILLed under attack: how long until the reaper declares it (its rows move). */
  const declaredAfterKill = async (id: string, sentinel: 'now' | 'delete'): Promise<number> => {
    const victim = await fx.executor(id, { beat: true });
    await waitForLock(fx.tdb.sql, fx.app, id);
    await victim.start(`${id}-wf`, { steps: 2, stepMs: 3_000 });
    await waitFor('its workflow PENDING', async () => (await pendingIds(fx.tdb.sql, id)).length === 1);
    const stop = attack(sentinel);
    try {
      await new Promise((r) => setTimeout(r, 1_000)); // the attack is on before the kill
      victim.kill('SIGKILL');
      await victim.exited;
      const killedAt = Date.now();
      await waitFor(
        `${id} declared`,
        async () => (await fx.tdb.sql.query(`SELECT 1 FROM afterlife.recoveries WHERE executor_id = $1`, [id])).rowCount === 1,
        { timeoutMs: 20_000 },
      );
      return Date.now() - killedAt;
    } finally {
      stop();
    }
  };

  it('the sentinel rewritten to now: the victim is declared (its value says nothing)', { timeout: 90_000 }, async () => {
    const ms = await declaredAfterKill('victim-now', 'now');
    console.log(`[sentinel attack] rewritten to now every 100 ms: declared ${ms} ms after the SIGKILL`);
    expect(ms).toBeLessThanOrEqual(15_000);
    await waitFor('its work runs on the heir', async () => (await pendingIds(fx.tdb.sql, 'heir')).includes('victim-now-wf'));
  });

  it(
    'the sentinel deleted every 100 ms: declared on the lock alone within the bound, a WARNING names why',
    { timeout: 90_000 },
    async () => {
      const ms = await declaredAfterKill('victim-del', 'delete');
      console.log(`[sentinel attack] deleted every 100 ms: declared ${ms} ms after the SIGKILL (fallback ${REDIS_BLIND_FALLBACK_MS} ms)`);
      expect(ms).toBeLessThanOrEqual(15_000);
      const warned = rt?.logger.lines.find((l) => l.event === 'redis_witness_blind' && l.executorId === 'victim-del');
      expect(warned?.severity).toBe('WARNING');
      expect(String(warned?.reason)).toMatch(/kept its keys for only/);
      // The heir held its lock throughout: alive on every tick, never declared.
      expect((await fx.tdb.sql.query(`SELECT 1 FROM afterlife.recoveries WHERE executor_id = 'heir'`)).rowCount).toBe(0);
    },
  );
});
