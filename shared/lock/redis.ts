import { Redis } from 'ioredis';

/**
 * A Redis client that fails fast instead of queueing commands while disconnected: a recovery must fall
 * back to degraded mode in milliseconds, not wait on a reconnect loop.
 */
export function createRedis(url: string, opts: { commandTimeoutMs?: number } = {}): Redis {
  const redis = new Redis(url, {
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1_000,
    commandTimeout: opts.commandTimeoutMs ?? 1_000,
    retryStrategy: (times) => Math.min(times * 200, 2_000),
  });
  // ioredis emits 'error' on every failed reconnect; without a listener Node prints and may crash.
  redis.on('error', () => undefined);
  return redis;
}

export async function waitReady(redis: Redis, timeoutMs = 1_000): Promise<boolean> {
  if (redis.status === 'ready') return true;
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    redis.once('ready', onReady);
  });
}
