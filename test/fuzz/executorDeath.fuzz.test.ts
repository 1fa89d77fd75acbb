import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startingRuntime, useRuntime } from '../../functions/runtime.js';
import { DeathNotice } from '../../packages/executor/src/contract/deathNotice.js';
import { decodePubSubJson } from '../../shared/events/pubsub.js';
import { Lifecycle } from '../../packages/executor/src/lifecycle/orderedShutdown.js';
import { memoryLogger } from '../../packages/executor/src/log.js';
import '../../functions/index.js';
import { PUBSUB_EVENT_TYPE } from '../../functions/executorDeath/transport.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../helpers/db.js';
import { pgSessions, redisClients, settlesTo } from '../helpers/leaks.js';
import { type PrivateRedis, startPrivateRedis } from '../helpers/redisServer.js';
import { testRuntime } from '../helpers/runtime.js';
import { serve } from '../helpers/cloudEvents.js';
import { deathDelivery, type GeneratedRequest, runs } from './arbitraries.js';

/**
 * Generated CloudEvents against the real executorDeath server (real Postgres, a private Redis so its clients
 * can be counted). The contract: transport mistakes are 4xx JSON; every delivery that is a CloudEvent is
 * acked (204) with a logged outcome, poison with a reason; nothing is nacked while Postgres and Redis are
 * up; the process stays up; no connection or client is left behind.
 */
describe('fuzz: executorDeath deliveries', () => {
  let tdb: TestDatabase;
  let redis: PrivateRedis;
  let rt: ReturnType<typeof testRuntime>;
  let server: Awaited<ReturnType<typeof serve>>;
  const app = uniqueName('app-fz');

  beforeAll(async () => {
    tdb = await createTestDatabase();
    redis = await startPrivateRedis();
    rt = testRuntime({ databaseUrl: tdb.url, applicationName: app, redisUrl: redis.url });
    useRuntime(rt);
    server = await serve('executorDeath');
  });
  afterAll(async () => {
    await server?.close();
    await rt?.close();
    await redis?.stop();
    await tdb?.drop();
  });

  /** What the transport must answer, from the request alone; 'handled' is a 204 with a logged outcome. */
  function expected(r: GeneratedRequest): number | 'handled' {
    const media = r.headers['content-type']?.split(';')[0];
    const json = media === 'application/json' || media === 'application/cloudevents+json';
    const text = (r.body ?? '').trim();
    // The framework parses a JSON body before any function runs, whatever the method: body-parser's strict
    // JSON (an object or an array) or a 400.
    if (json && text !== '' && !isJsonContainer(text)) return 400;
    if (r.method !== 'POST') return 405;
    if (!json) return 415;
    if (media === 'application/cloudevents+json') return 400; // a generated envelope is never a structured event
    const [spec, type] = [r.headers['ce-specversion'], r.headers['ce-type']];
    if (spec === undefined && type === undefined) {
      // A raw push body: handled when it is an envelope with a message object.
      const body = text === '' ? {} : (JSON.parse(text) as { message?: unknown });
      const m = typeof body === 'object' && body !== null && !Array.isArray(body) ? body.message : undefined;
      return typeof m === 'object' && m !== null && !Array.isArray(m) ? 'handled' : 400;
    }
    if (spec !== '1.0' || type !== PUBSUB_EVENT_TYPE) return 400;
    return 'handled';
  }

  function isJsonContainer(text: string): boolean {
    if (!/^[[{]/.test(text)) return false;
    try {
      JSON.parse(text);
      return true;
    } catch {
      return false;
    }
  }

  it('answers every generated delivery by the contract, and leaks nothing', async () => {
    const redisBefore = await redisClients(redis.url);
    await fc.assert(
      fc.asyncProperty(deathDelivery(app), async (r) => {
        const before = rt.logger.lines.length;
        const res = await fetch(server.url, { method: r.method, headers: r.headers, ...(r.body === undefined ? {} : { body: r.body }) });
        const want = expected(r);
        if (want === 'handled') {
          expect(res.status).toBe(204);
          const outcome = rt.logger.lines
            .slice(before)
            .find(
              (l) =>
                l.eventId === r.id &&
                typeof l.event === 'string' &&
                ['poison_message', 'recovery', 'death_notice_refused'].includes(l.event),
            );
          expect(outcome, `no logged outcome for ${JSON.stringify(r)}`).toBeDefined();
          if (outcome?.event === 'poison_message') expect(String(outcome.reason)).not.toBe('');
        } else {
          expect(res.status).toBe(want);
          expect(res.headers.get('content-type')).toMatch(/application\/json/);
          const body = (await res.json()) as { error?: unknown; code?: unknown };
          expect(typeof body.error).toBe('string');
          expect(typeof body.code).toBe('string');
        }
        expect(rt.logger.lines.slice(before).some((l) => l.event === 'recovery_retry')).toBe(false);
      }),
      runs(150),
    );
    // The process is up and still recovers.
    const alive = await fetch(server.url, { method: 'GET' });
    expect(alive.status).toBe(405);
    expect(await settlesTo(() => pgSessions(tdb.name, 'afterlife'), rt.config.database.poolMax)).toBeLessThanOrEqual(
      rt.config.database.poolMax,
    );
    expect(await settlesTo(() => redisClients(redis.url), redisBefore)).toBe(redisBefore);
  });

  it('with Postgres down: poison is still acked with a reason, every decodable notice is nacked (503 JSON), nothing leaks', async () => {
    const log = memoryLogger();
    const down = {
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none',
      DB_CONNECT_TIMEOUT_MS: '200',
      REDIS_URL: redis.url,
      DBOS_APPLICATION_NAME: app,
    };
    useRuntime(
      startingRuntime(
        { env: down, lifecycle: new Lifecycle(), publisher: 'none', logger: log },
        { initialBackoffMs: 0, maxBackoffMs: 0 },
        log,
      ),
      { logger: log },
    );
    const redisBefore = await redisClients(redis.url);
    try {
      await fc.assert(
        fc.asyncProperty(deathDelivery(app), async (r) => {
          if (expected(r) !== 'handled') return; // the transport answers are the same with or without a runtime
          const res = await fetch(server.url, { method: r.method, headers: r.headers, ...(r.body === undefined ? {} : { body: r.body }) });
          const body = JSON.parse(r.body ?? '{}') as unknown;
          let decodes = true;
          try {
            decodePubSubJson(body, DeathNotice);
          } catch {
            decodes = false;
          }
          if (decodes) {
            expect(res.status).toBe(503);
            expect(await res.json()).toMatchObject({ code: 'ECONNREFUSED' });
          } else {
            expect(res.status).toBe(204);
            expect(log.lines.some((l) => l.event === 'poison_message' && l.eventId === r.id && String(l.reason) !== '')).toBe(true);
          }
        }),
        runs(80),
      );
      expect(await settlesTo(() => redisClients(redis.url), redisBefore)).toBe(redisBefore);
    } finally {
      useRuntime(rt);
    }
  });
});
