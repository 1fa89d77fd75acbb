import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleDrainRequest } from '../../../functions/drain/handle.js';
import { heartbeatIndexKey, heartbeatKey, readLiveVersions } from '../../../packages/executor/src/contract/heartbeat.js';
import { judgeKit, type RuleSettings } from '../../../shared/reaper/deathRule.js';
import { readBeats, sentinelKey } from '../../../shared/reaper/evidence.js';
import { createRedis, waitReady } from '../../../packages/executor/src/lock/redis.js';
import { beat } from '../../helpers/agents.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { testReaperDeps } from '../../helpers/reaper.js';
import { testRuntime } from '../../helpers/runtime.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/**
 * Issue 23, observation 4: anyone with the shared Redis URL could suppress detection. Each forgery the
 * audit made is written here with the same commands, and the reaper's own reading of the evidence must call
 * it "no evidence" (as if the key were absent), never "alive": a garbage value with no TTL, a beat with
 * beatEveryMs 2^31-1, a beat from the future, a sentinel from the future; and 200k far-future members in
 * the heartbeat index must not make every reader slow.
 */
describe('Redis evidence bounded by what a kit writes', () => {
  let tdb: TestDatabase;
  const app = uniqueName('trust-redis');
  let rt: ReturnType<typeof testRuntime>;
  const TTL = 3_000;
  // Setup and the flood's timings on a client without the functions' 1 s command timeout: the point is
  // how long a read takes, not whether it times out.
  const raw = createRedis(TEST_REDIS_URL, { commandTimeoutMs: 60_000 });

  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = testRuntime({ databaseUrl: tdb.url, applicationName: app, env: { HEARTBEAT_TTL_MS: String(TTL) } });
    await waitReady(rt.redis!, 5_000);
    await waitReady(raw, 5_000);
  });
  afterAll(async () => {
    const r = raw;
    const keys = await r.keys(`afterlife:${app}:*`);
    if (keys.length) await r.del(...keys);
    raw.disconnect();
    await rt?.close();
    await tdb?.drop();
  });

  // Redis has kept its keys for longer than a TTL, so an absent key is evidence.
  const settings = (): RuleSettings => ({
    nowMs: Date.now(),
    intervalMs: rt.config.heartbeatIntervalMs,
    ttlMs: TTL,
    redisKeptKeysMs: 10 * TTL,
  });
  const judge = async (id: string, lock: 'free' | 'unavailable') => {
    const read = await readBeats(testReaperDeps(rt), [id]);
    if ('skipped' in read) throw new Error(read.skipped);
    return judgeKit({ lock, beat: read.beats.get(id) }, settings());
  };
  const kitValue = (id: string, o: Record<string, unknown>) =>
    JSON.stringify({
      executorId: id,
      applicationName: app,
      applicationVersion: 'v1',
      state: 'alive',
      startedAt: new Date().toISOString(),
      beatAt: new Date().toISOString(),
      inFlight: 0,
      ...o,
    });

  it('a garbage value with no TTL is no evidence: the executor is a suspect, not alive forever', async () => {
    await rt.redis!.set(heartbeatKey(app, 'exec-garbage'), 'not json at all');
    expect(await judge('exec-garbage', 'free')).toBe('suspect-liveness');
    expect(await judge('exec-garbage', 'unavailable')).toBe('suspect-heartbeat');
    // A readable value without a TTL is not what a kit writes either.
    await rt.redis!.set(heartbeatKey(app, 'exec-nottl'), kitValue('exec-nottl', {}));
    expect(await judge('exec-nottl', 'unavailable')).toBe('suspect-heartbeat');
  });

  it('beatEveryMs 2147483647 does not make a stale beat fresh', async () => {
    // Written ten minutes ago by Redis's clock (declared TTL 600 s, 10 s left), interval 2^31-1.
    await rt.redis!.set(
      heartbeatKey(app, 'exec-slowbeat'),
      kitValue('exec-slowbeat', { beatEveryMs: 2_147_483_647, ttlMs: 600_000 }),
      'PX',
      10_000,
    );
    expect(await judge('exec-slowbeat', 'free')).toBe('suspect-liveness');
  });

  it('a beat from the future is no evidence', async () => {
    await rt.redis!.set(heartbeatKey(app, 'exec-future'), kitValue('exec-future', { beatAt: '9999-01-01T00:00:00.000Z' }), 'PX', 60_000);
    expect(await judge('exec-future', 'unavailable')).toBe('suspect-heartbeat');
  });

  it("the reaper's sentinel says nothing by its value (a future date, garbage, now): how long Redis kept its keys is its identity's, kept in Postgres (issue 30)", async () => {
    const key = sentinelKey(app);
    await readBeats(testReaperDeps(rt), ['exec-none']); // the first sighting of this Redis
    for (const v of ['9999-01-01T00:00:00.000Z', 'garbage', new Date().toISOString()]) {
      await rt.redis!.set(key, v);
      const read = await readBeats(testReaperDeps(rt), ['exec-none']);
      if ('skipped' in read) throw new Error(read.skipped);
      expect({ v, lost: read.lostKeys, keptOverTtl: read.keptKeysMs > TTL }).toEqual({ v, lost: false, keptOverTtl: true });
    }
  });

  it('200k far-future members in the heartbeat index cost one pruning, not every read', { timeout: 120_000 }, async () => {
    const r = raw;
    await beat(r, app, 'exec-real', 'v1', 60_000);
    const idx = heartbeatIndexKey(app);
    for (let i = 0; i < 200_000; i += 10_000) {
      const args: Array<string | number> = [];
      for (let j = i; j < i + 10_000; j++) args.push(9e15, `forged-${j}`);
      await r.zadd(idx, ...args);
    }
    expect(await r.zcard(idx)).toBeGreaterThan(200_000);
    const t0 = performance.now();
    const first = await readLiveVersions(r, app);
    const firstMs = performance.now() - t0;
    expect([...first.versions]).toEqual(['v1']);
    // The forged members are gone after one read: members may expire at most a TTL bound ahead.
    expect(await r.zcard(idx)).toBeLessThan(10);
    const t1 = performance.now();
    await readLiveVersions(r, app);
    const secondMs = performance.now() - t1;
    // GET /drain reads the index too: it answers, from the one real member (bench/indexFlood.ts times it).
    const t2 = performance.now();
    const drain = await handleDrainRequest(rt, { method: 'GET', body: undefined, query: { applicationVersion: 'v1' } });
    const drainMs = performance.now() - t2;
    expect(drain.status).toBe(200);
    expect(JSON.stringify(drain.body)).toContain('exec-real');
    console.log(
      `heartbeat index flood: first read ${firstMs.toFixed(0)} ms (prunes 200k), next ${secondMs.toFixed(1)} ms, GET /drain ${drainMs.toFixed(1)} ms`,
    );
    expect(secondMs).toBeLessThan(100);
  });
});
