import { Redis } from 'ioredis';
import { z } from 'zod';

/**
 * REDIS_CA_CERT: the PEM certificates (one or more, as Memorystore's server_ca_certs during a rotation)
 * that sign the server's certificate; only with a rediss:// URL.
 */
export const RedisCaCert = z
  .string()
  .refine((v) => /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.test(v), 'must hold PEM certificates (-----BEGIN CERTIFICATE-----)');

/** A CA without TLS is a misconfiguration, not something to ignore: the operator meant encryption. */
export function redisTlsProblem(url: string | undefined, ca: string | undefined): string | undefined {
  if (ca === undefined) return undefined;
  if (url === undefined) return 'REDIS_CA_CERT: is set but REDIS_URL is not';
  if (!url.startsWith('rediss://')) return 'REDIS_CA_CERT: is set but REDIS_URL is not a rediss:// (TLS) URL';
  return undefined;
}

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
