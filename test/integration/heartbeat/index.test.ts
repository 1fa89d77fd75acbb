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

  it(
    'reads are bounded in bytes: a 16 KB value is never read (unreadable), an index over 4 MiB is flooded (issue 30)',
    { timeout: 60_000 },
    async () => {
      const app = uniqueName('bytes');
      const live = value(app, 'real');
      await writeHeartbeat(redis, live, 60_000, prefix);
      // An attacker with the Redis URL: members whose keys hold 16 KB each.
      const big = 'x'.repeat(16 * 1024);
      for (let i = 0; i < 200; i++) await writeHeartbeat(redis, value(app, `fat-${i}`), 60_000, prefix);
      const pipe = redis.pipeline();
      for (let i = 0; i < 200; i++) pipe.set(heartbeatKey(app, `fat-${i}`, prefix), big, 'PX', 60_000);
      await pipe.exec();
      const before = Number(/total_net_output_bytes:(\d+)/.exec(await redis.info('stats'))?.[1] ?? 0);
      const all = await readAllHeartbeats(redis, app, prefix);
      const sent = Number(/total_net_output_bytes:(\d+)/.exec(await redis.info('stats'))?.[1] ?? 0) - before;
      expect(all.get('real')?.executorId).toBe('real');
      expect([...all.entries()].filter(([id, v]) => id.startsWith('fat-') && v === undefined)).toHaveLength(200);
      // 200 × 16 KB = 3.2 MB stayed in Redis: what came back is IDs, one real value and the INFO reply.
      expect(sent).toBeLessThan(64 * 1024);
      // Values just under the per-key bound, past the 4 MiB budget in all: flooded, no evidence.
      const fill = 'y'.repeat(4_000);
      const more = redis.pipeline();
      for (let i = 0; i < 1_100; i++) {
        more.zadd(heartbeatIndexKey(app, prefix), Date.now() + 60_000, `mid-${i}`);
        more.set(heartbeatKey(app, `mid-${i}`, prefix), fill, 'PX', 60_000);
      }
      await more.exec();
      await expect(readAllHeartbeats(redis, app, prefix)).rejects.toThrow(/flooded/);
    },
  );
});
