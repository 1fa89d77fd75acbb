import { parse as parseQuery } from 'node:querystring';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseReaperRequest } from '../../functions/reaper/handle.js';
import { useRuntime } from '../../functions/runtime.js';
import '../../functions/index.js';
import { serve } from '../helpers/cloudEvents.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../helpers/db.js';
import { pgSessions, redisClients, settlesTo } from '../helpers/leaks.js';
import { type PrivateRedis, startPrivateRedis } from '../helpers/redisServer.js';
import { testRuntime } from '../helpers/runtime.js';
import { nasty, queryString, runs } from './arbitraries.js';

/**
 * Generated drain and reaper requests. The reaper's query parsing is a pure function, fuzzed hard against
 * an oracle (a dry run must never silently become a real one); both functions are then fuzzed over real
 * HTTP for the answer contract: 2xx, or 400/405 JSON with a code; nothing written by a rejected request;
 * the process up; no connection or Redis client left behind.
 */
describe('fuzz: reaper query and body parsing', () => {
  const exact = (v: unknown, allowed: string[]) => typeof v === 'string' && allowed.includes(v);
  it('accepts exactly the understood values, and reads them as meant', () => {
    fc.assert(
      fc.property(
        queryString(['dryRun', 'maxTicks']),
        fc.oneof(fc.constant({}), fc.record({ source: fc.constant('cloud-scheduler') })),
        (qs, body) => {
          const query = parseQuery(qs.replace(/^\?/, '')) as Record<string, unknown>;
          const out = parseReaperRequest({ query, body });
          const keysOk = Object.keys(query).every((k) => k === 'dryRun' || k === 'maxTicks');
          const dryOk = query.dryRun === undefined || exact(query.dryRun, ['true', 'false', '1', '0']);
          const ticksOk =
            query.maxTicks === undefined ||
            (typeof query.maxTicks === 'string' && /^[1-9][0-9]{0,4}$/.test(query.maxTicks) && Number(query.maxTicks) <= 10_000);
          expect(out.ok, `${qs} → ${JSON.stringify(out)}`).toBe(keysOk && dryOk && ticksOk);
          if (out.ok) {
            if (query.dryRun !== undefined) expect(out.request.dryRun).toBe(query.dryRun === 'true' || query.dryRun === '1');
            else expect(out.request.dryRun).toBeUndefined();
            if (query.maxTicks !== undefined) expect(out.request.maxTicks).toBe(Number(query.maxTicks));
          }
        },
      ),
      runs(2_000),
    );
  });
});

describe('fuzz: drain and reaper over HTTP', () => {
  let tdb: TestDatabase;
  let redis: PrivateRedis;
  let rt: ReturnType<typeof testRuntime>;
  let drain: Awaited<ReturnType<typeof serve>>;
  let reaper: Awaited<ReturnType<typeof serve>>;
  const app = uniqueName('app-fzr');
  const drainRows = async () =>
    (await tdb.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM afterlife.drain_requests')).rows[0]?.n ?? 0;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    redis = await startPrivateRedis();
    // A short function timeout bounds any reaper run a generated request starts.
    rt = testRuntime({
      databaseUrl: tdb.url,
      applicationName: app,
      redisUrl: redis.url,
      env: { FUNCTION_TIMEOUT_S: '1', BUDGET_MARGIN_MS: '0', REAPER_TICK_MS: '100' },
    });
    useRuntime(rt);
    [drain, reaper] = await Promise.all([serve('drain'), serve('reaper')]);
  });
  afterAll(async () => {
    await Promise.all([drain?.close(), reaper?.close()]);
    await rt?.close();
    await redis?.stop();
    await tdb?.drop();
  });

  const method = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom('POST', 'GET') },
    { weight: 1, arbitrary: fc.constantFrom('PUT', 'DELETE', 'PATCH') },
  );
  const contentType = fc.oneof(
    { weight: 4, arbitrary: fc.constant('application/json') },
    { weight: 1, arbitrary: fc.constantFrom('text/plain', 'application/x-www-form-urlencoded') },
  );
  const drainBody = fc
    .oneof(
      fc.record({ applicationVersion: fc.oneof(fc.constant('v1'), nasty) }),
      fc.record(
        {
          executorIds: fc.array(fc.oneof(fc.constant('e-1'), nasty), { maxLength: 3 }),
          budgetMs: fc.oneof(fc.integer({ min: -5, max: 100_000_000 }), fc.constant(1_000)),
        },
        { requiredKeys: ['executorIds'] },
      ),
      fc.jsonValue({ maxDepth: 2 }),
    )
    .map((b) => JSON.stringify(b));
  const text = fc.oneof({ weight: 5, arbitrary: drainBody }, { weight: 1, arbitrary: fc.string({ maxLength: 40 }) });

  async function contract(res: Response): Promise<Record<string, unknown>> {
    expect([200, 202, 400, 405]).toContain(res.status);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    const body = (await res.json()) as Record<string, unknown>;
    if (res.status >= 400) {
      expect(typeof body.error).toBe('string');
      expect(typeof body.code).toBe('string');
    }
    return body;
  }

  it('drain: every answer by the contract; a 202 wrote exactly its requests, anything else wrote none', async () => {
    const redisBefore = await redisClients(redis.url);
    await fc.assert(
      fc.asyncProperty(method, contentType, queryString(['applicationVersion']), text, async (m, ct, qs, body) => {
        const rows = await drainRows();
        const res = await fetch(`${drain.url}${qs}`, { method: m, headers: { 'content-type': ct }, ...(m === 'GET' ? {} : { body }) });
        const out = await contract(res);
        const added = (await drainRows()) - rows;
        if (res.status === 202) {
          expect(out.written).toBe(true);
          expect(added).toBe((out.requestIds as unknown[]).length);
        } else expect(added).toBe(0);
      }),
      runs(120),
    );
    expect((await fetch(`${drain.url}?applicationVersion=v1`)).status).toBe(200);
    expect(await settlesTo(() => pgSessions(tdb.name, 'afterlife'), rt.config.database.poolMax)).toBeLessThanOrEqual(
      rt.config.database.poolMax,
    );
    expect(await settlesTo(() => redisClients(redis.url), redisBefore)).toBe(redisBefore);
  });

  it('reaper: every answer by the contract; a rejected request runs no tick', async () => {
    const body = fc.oneof(
      { weight: 3, arbitrary: fc.record({ dryRun: fc.constant(true), maxTicks: fc.constantFrom(1, 2) }).map((b) => JSON.stringify(b)) },
      {
        weight: 2,
        arbitrary: fc
          .record(
            { dryRun: fc.oneof(fc.boolean(), nasty), maxTicks: fc.oneof(fc.integer({ min: -2, max: 20_000 }), nasty), source: nasty },
            { requiredKeys: [] },
          )
          .map((b) => JSON.stringify({ maxTicks: 1, ...b })),
      },
      { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
    );
    await fc.assert(
      fc.asyncProperty(method, contentType, queryString(['dryRun', 'maxTicks']), body, async (m, ct, qs, b) => {
        const before = rt.logger.lines.length;
        const res = await fetch(`${reaper.url}${qs}`, { method: m, headers: { 'content-type': ct }, ...(m === 'GET' ? {} : { body: b }) });
        await contract(res);
        if (res.status !== 200)
          expect(
            rt.logger.lines.slice(before).some((l) => typeof l.event === 'string' && /^reaper_(tick|ticks|summary)$/.test(l.event)),
          ).toBe(false);
      }),
      runs(60),
    );
    expect((await fetch(reaper.url)).status).toBe(405);
  });
});
