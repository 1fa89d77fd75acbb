import { Redis } from 'ioredis';
import { redisTlsProblem } from '../contract/redisTls.js';

export interface RedisOptions {
  commandTimeoutMs?: number;
  /** PEM CA bundle for a rediss:// URL; without it the system's CAs verify the server. */
  tlsCa?: string | undefined;
}

/**
 * A Redis client that fails fast instead of queueing commands while disconnected: a recovery must fall
 * back to degraded mode in milliseconds, not wait on a reconnect loop. rediss:// connects with TLS and
 * verifies the server's certificate (and its name) against tlsCa; there is no switch to skip that.
 */
export function createRedis(url: string, opts: RedisOptions = {}): Redis {
  const problem = redisTlsProblem(url, opts.tlsCa);
  if (problem) throw new Error(problem);
  const redis = new Redis(url, {
    ...(url.startsWith('rediss://') ? { tls: opts.tlsCa ? { ca: opts.tlsCa } : {} } : {}),
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
