import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startingRuntime, useRuntime } from '../../../functions/runtime.js';
import '../../../functions/index.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { Lifecycle } from '../../../packages/executor/src/lifecycle/orderedShutdown.js';
import { memoryLogger } from '../../../packages/executor/src/log.js';
import { RuntimeUnavailableError } from '../../../shared/runtime.js';
import { postEvent, pubsubCloudEvent, serve } from '../../helpers/cloudEvents.js';
import { pgSessions, redisClients, settlesTo } from '../../helpers/leaks.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redisServer.js';
import { ADMIN_DATABASE_URL, databaseUrl } from '../../helpers/services.js';

/**
 * Issue 10, defects 1 and 5: a function whose runtime cannot be built (a database without DBOS's schema,
 * Postgres down) closes what it opened, rebuilds with backoff instead of on every request, logs one ERROR
 * line with an event per failed start, and answers 503 JSON on HTTP / nacks on Pub/Sub.
 */
describe('a runtime that cannot start', () => {
  const empty = `afterlife_nodbos_${process.pid}_${randomBytes(4).toString('hex')}`;
  let redis: PrivateRedis;
  const app = 'app-start';
  const env = (over: Record<string, string> = {}) => ({
    DATABASE_URL: databaseUrl(empty),
    REDIS_URL: redis.url,
    DBOS_APPLICATION_NAME: app,
    ...over,
  });

  beforeAll(async () => {
    const a = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
    await a.connect();
    await a.query(`CREATE DATABASE ${empty}`);
    await a.end();
    redis = await startPrivateRedis();
  });
  afterAll(async () => {
    useRuntime(() => Promise.reject(new Error('test over')));
    await redis?.stop();
    const a = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
    await a.connect();
    await a.query(`DROP DATABASE IF EXISTS ${empty} WITH (FORCE)`);
    await a.end();
  });

  it('twenty failed builds (no DBOS schema) leave no Postgres session and no Redis client behind', async () => {
    const sessionName = `afterlife-leak-${randomBytes(3).toString('hex')}`;
    const log = memoryLogger();
    // No backoff, so every call really builds: the leak is per build, not per request.
    const factory = startingRuntime(
      { env: env(), sessionName, lifecycle: new Lifecycle(), publisher: 'none' },
      { initialBackoffMs: 0, maxBackoffMs: 0 },
      log,
    );
    const redisBefore = await redisClients(redis.url);
    for (let i = 0; i < 20; i++) await expect(factory()).rejects.toBeInstanceOf(RuntimeUnavailableError);
    expect(log.lines.filter((l) => l.event === 'runtime_start_failed')).toHaveLength(20);
    expect(log.lines[0]).toMatchObject({ severity: 'ERROR', code: 'dbos_schema' });
    expect(await settlesTo(() => pgSessions(empty, sessionName), 0)).toBe(0);
    expect(await settlesTo(() => redisClients(redis.url), redisBefore)).toBe(redisBefore);
  });

  it('with Postgres down, failed builds leak no Redis client either', async () => {
    const log = memoryLogger();
    const factory = startingRuntime(
      {
        env: env({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', DB_CONNECT_TIMEOUT_MS: '500' }),
        lifecycle: new Lifecycle(),
        publisher: 'none',
      },
      { initialBackoffMs: 0, maxBackoffMs: 0 },
      log,
    );
    const before = await redisClients(redis.url);
    for (let i = 0; i < 10; i++) await expect(factory()).rejects.toBeInstanceOf(RuntimeUnavailableError);
    expect(log.lines.every((l) => l.event === 'runtime_start_failed' && l.code === 'ECONNREFUSED')).toBe(true);
    expect(await settlesTo(() => redisClients(redis.url), before)).toBe(before);
  });

  it('requests during the backoff do not rebuild; one ERROR line per failed start', async () => {
    const log = memoryLogger();
    const factory = startingRuntime({ env: env(), lifecycle: new Lifecycle(), publisher: 'none' }, { initialBackoffMs: 60_000 }, log);
    const answers = await Promise.allSettled(Array.from({ length: 25 }, () => factory()));
    expect(answers.every((a) => a.status === 'rejected' && a.reason instanceof RuntimeUnavailableError)).toBe(true);
    for (let i = 0; i < 25; i++) await expect(factory()).rejects.toMatchObject({ code: 'dbos_schema' });
    expect(log.lines.filter((l) => l.event === 'runtime_start_failed')).toHaveLength(1);
  });

  it('every function answers 503 JSON {error, code}; executorDeath nacks a valid notice and acks poison', async () => {
    const log = memoryLogger();
    const sessionName = `afterlife-http-${randomBytes(3).toString('hex')}`;
    useRuntime(
      startingRuntime({ env: env(), sessionName, lifecycle: new Lifecycle(), publisher: 'none' }, { initialBackoffMs: 60_000 }, log),
    );
    const redisBefore = await redisClients(redis.url);
    const servers = await Promise.all(['drain', 'reaper', 'executorDeath'].map((t) => serve(t)));
    try {
      const [drain, reaper, death] = servers as [
        Awaited<ReturnType<typeof serve>>,
        Awaited<ReturnType<typeof serve>>,
        Awaited<ReturnType<typeof serve>>,
      ];
      const answers = [
        await fetch(drain.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ applicationVersion: 'v1' }),
        }),
        await fetch(`${drain.url}?applicationVersion=v1`),
        await fetch(reaper.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }),
        await postEvent(
          death.url,
          pubsubCloudEvent(JSON.stringify(deathNotice({ executorId: 'e-1', applicationName: app, reason: 'manual', detectedBy: 't' }))),
        ),
      ];
      for (const res of answers) {
        expect(res.status).toBe(503);
        expect(res.headers.get('content-type')).toMatch(/application\/json/);
        const body = (await res.json()) as { error: string; code: string };
        expect(body).toMatchObject({ code: 'dbos_schema' });
        expect(body.error).toMatch(/could not start/);
      }
      // Poison is decoded before the runtime is awaited: acked, not nacked until it dead-letters.
      const poison = await postEvent(death.url, pubsubCloudEvent('not json'));
      expect(poison.status).toBe(204);
      expect(log.lines.filter((l) => l.event === 'runtime_start_failed')).toHaveLength(1);
      expect(await settlesTo(() => pgSessions(empty, sessionName), 0)).toBe(0);
      expect(await settlesTo(() => redisClients(redis.url), redisBefore)).toBe(redisBefore);
    } finally {
      await Promise.all(servers.map((s) => s.close()));
    }
  });
});
