import { afterAll, describe, expect, it } from 'vitest';
import { LockContendedError, LockLostError, LockUnavailableError } from '../../../shared/lock/errors.js';
import { RedisLock } from '../../../shared/lock/lock.js';
import { createRedis } from '../../../packages/executor/src/lock/redis.js';
import { uniqueName, waitFor } from '../../helpers/db.js';
import { TEST_REDIS_URL } from '../../helpers/services.js';

/** The lock against a real Redis: contention, extension, loss signal, compare-and-delete release. */
describe('RedisLock', () => {
  const redis = createRedis(TEST_REDIS_URL);
  const lock = new RedisLock(redis);
  afterAll(() => redis.disconnect());

  it('excludes a second holder and releases after a throw', async () => {
    const key = uniqueName('lock');
    await expect(
      lock.using(key, 5_000, async () => {
        await expect(lock.using(key, 5_000, async () => 'no')).rejects.toBeInstanceOf(LockContendedError);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await redis.exists(key)).toBe(0);
    expect(await lock.using(key, 5_000, async () => 'yes')).toBe('yes');
  });

  it('extends while work runs past the TTL', async () => {
    const key = uniqueName('lock');
    const t0 = Date.now();
    const out = await lock.using(key, 300, async (signal) => {
      await waitFor('three TTLs', async () => (await redis.pttl(key)) > 0 && Date.now() > t0 + 900, { intervalMs: 50 });
      return signal.aborted;
    });
    expect(out).toBe(false);
  });
  it('aborts the signal when the lock is taken over, and does not delete the new owner’s key', async () => {
    const key = uniqueName('lock');
    const reason = await lock.using(key, 400, async (signal) => {
      await redis.set(key, 'someone-else', 'PX', 10_000); // expiry + takeover, compressed
      await waitFor('loss signal', async () => signal.aborted, { timeoutMs: 2_000, intervalMs: 20 });
      return signal.reason as unknown;
    });
    expect(reason).toBeInstanceOf(LockLostError);
    expect(await redis.get(key)).toBe('someone-else');
  });

  it('says Redis is unavailable (not contended) when it cannot be reached', async () => {
    const down = createRedis('redis://127.0.0.1:1');
    try {
      await expect(new RedisLock(down, { connectWaitMs: 100 }).using('k', 1_000, async () => 1)).rejects.toBeInstanceOf(
        LockUnavailableError,
      );
    } finally {
      down.disconnect();
    }
  });
});
