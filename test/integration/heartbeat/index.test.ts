import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  deleteHeartbeat,
  heartbeatIndexKey,
  heartbeatKey,
  type HeartbeatValue,
  readAllHeartbeats,
  readLiveVersions,
  writeHeartbeat,
} from '../../../packages/executor/src/contract/heartbeat.js';
import { createRedis, waitReady } from '../../../packages/executor/src/lock/redis.js';
import { uniqueName, waitFor } from '../../helpers/db.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redisServer.js';

/**
 * The per-application heartbeat index (issue 13): written with the key in one script, read instead of a
 * SCAN, stale members pruned; SCAN only for an app whose kits never wrote it. A private redis-server, so
 * counting SCAN commands sees only this suite's.
 */
describe('heartbeat index', () => {
  let server: PrivateRedis;
  let redis: Redis;
  const prefix = uniqueName('hbidx');
  const value = (app: string, executorId: string, over: Partial<HeartbeatValue> = {}): HeartbeatValue => {
    const now = new Date().toISOString();
    return {
      executorId,
      applicationName: app,
      applicationVersion: 'v1',
      state: 'alive',
      startedAt: now,
      beatAt: now,
      inFlight: 0,
      ...over,
    };
  };
  const scans = async () => Number(/cmdstat_scan:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);

  beforeAll(async () => {
    server = await startPrivateRedis();
    redis = createRedis(server.url);
    await waitReady(redis, 5_000);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('reads the index, not the keyspace, and sees exactly the keys that exist', async () => {
    const app = uniqueName('app');
    await writeHeartbeat(redis, value(app, 'exec-1'), 60_000, prefix);
    await writeHeartbeat(redis, value(app, 'exec-2', { applicationVersion: 'v2', state: 'draining' }), 60_000, prefix);
    await writeHeartbeat(redis, value(uniqueName('other-app'), 'exec-9'), 60_000, prefix);
    expect(await redis.pttl(heartbeatKey(app, 'exec-1', prefix))).toBeGreaterThan(59_000);

    const before = await scans();
    const all = await readAllHeartbeats(redis, app, prefix);
    expect([...all.keys()].sort()).toEqual(['exec-1', 'exec-2']);
    expect(all.get('exec-2')).toMatchObject({ state: 'draining', applicationVersion: 'v2' });
    expect(await readLiveVersions(redis, app, prefix)).toEqual({ versions: new Set(['v1']), unreadable: [] });
    expect(await scans()).toBe(before);

    // A key deleted behind the index's back reads as absent (the key is the evidence); deleteHeartbeat removes both.
    await redis.del(heartbeatKey(app, 'exec-2', prefix));
    expect([...(await readAllHeartbeats(redis, app, prefix)).keys()]).toEqual(['exec-1']);
    await deleteHeartbeat(redis, app, 'exec-1', prefix);
    expect(await redis.exists(heartbeatKey(app, 'exec-1', prefix))).toBe(0);
    expect(await redis.zscore(heartbeatIndexKey(app, prefix), 'exec-1')).toBeNull();
    // Every executor gone: an empty answer from the index, still no SCAN.
    await redis.zrem(heartbeatIndexKey(app, prefix), 'exec-2');
    expect((await readAllHeartbeats(redis, app, prefix)).size).toBe(0);
    expect(await scans()).toBe(before);
  });

  it('prunes members whose key expired, on read and on the next write', async () => {
    const app = uniqueName('app');
    await writeHeartbeat(redis, value(app, 'exec-short'), 150, prefix);
    await writeHeartbeat(redis, value(app, 'exec-long'), 60_000, prefix);
    await waitFor('the short key to expire', async () => (await redis.exists(heartbeatKey(app, 'exec-short', prefix))) === 0);
    // Redis expires keys lazily; the member's score is its expiry on Redis's clock, so it is past by now.
    expect([...(await readAllHeartbeats(redis, app, prefix)).keys()]).toEqual(['exec-long']);
    expect(await redis.zrange(heartbeatIndexKey(app, prefix), '0', '-1')).toEqual(['exec-long']);

    await writeHeartbeat(redis, value(app, 'exec-short2'), 150, prefix);
    await waitFor('the second short key to expire', async () => (await redis.exists(heartbeatKey(app, 'exec-short2', prefix))) === 0);
    await writeHeartbeat(redis, value(app, 'exec-long'), 60_000, prefix);
    expect(await redis.zrange(heartbeatIndexKey(app, prefix), '0', '-1')).toEqual(['exec-long']);
  });

  it('falls back to SCAN for an app whose kits never wrote the index', async () => {
    const app = uniqueName('app');
    await redis.set(heartbeatKey(app, 'exec-old', prefix), JSON.stringify(value(app, 'exec-old')), 'PX', 60_000);
    const before = await scans();
    expect([...(await readAllHeartbeats(redis, app, prefix)).keys()]).toEqual(['exec-old']);
    expect(await scans()).toBeGreaterThan(before);
  });
});
