import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRuntime } from '../../../functions/runtime.js';
import '../../../functions/index.js';
import { DbBusyError } from '../../../packages/executor/src/errors.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { pubsubCloudEvent, postEvent, serve } from '../../helpers/cloudEvents.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';

type Served = Awaited<ReturnType<typeof serve>>;

/**
 * Issue 10, defects 4, 6, 8 and 9 over real HTTP: what each function answers to requests that are not what
 * it expects, and that every such answer is JSON with a code.
 */
describe('transport edges', () => {
  let tdb: TestDatabase;
  let rt: ReturnType<typeof testRuntime>;
  const faults = new FaultInjector();
  let death: Served;
  let drain: Served;
  let reaper: Served;
  const app = uniqueName('app-t');
  const valid = () => deathNotice({ executorId: 'exec-T', applicationName: app, reason: 'manual', detectedBy: 'test' });
  const recoveries = async () => (await tdb.sql.query('SELECT 1 FROM afterlife.recoveries')).rowCount;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = testRuntime({
      databaseUrl: tdb.url,
      applicationName: app,
      faults,
      env: { FUNCTION_TIMEOUT_S: '2', BUDGET_MARGIN_MS: '0', REAPER_TICK_MS: '100' },
    });
    useRuntime(rt);
    [death, drain, reaper] = await Promise.all([serve('executorDeath'), serve('drain'), serve('reaper')]);
  });
  afterAll(async () => {
    await Promise.all([death, drain, reaper].map((s) => s?.close()));
    await rt?.close();
    await tdb?.drop();
  });

  async function json(res: Response): Promise<{ error: string; code: string; [k: string]: unknown }> {
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    const body = (await res.json()) as { error: string; code: string };
    expect(typeof body.error).toBe('string');
    expect(typeof body.code).toBe('string');
    return body;
  }

  describe('executorDeath transport', () => {
    const ev = () => pubsubCloudEvent(JSON.stringify(valid()));
    it('GET is a 405 in JSON', async () => {
      const res = await fetch(death.url);
      expect(res.status).toBe(405);
      expect((await json(res)).code).toBe('method_not_allowed');
    });
    it('text/plain is a 415 in JSON, and nothing is recovered', async () => {
      const e = ev();
      const res = await fetch(death.url, { method: 'POST', headers: { ...e.headers, 'content-type': 'text/plain' }, body: e.body });
      expect(res.status).toBe(415);
      await json(res);
      expect(await recoveries()).toBe(0);
    });
    it('a urlencoded message[data]= body does not run a recovery', async () => {
      const data = Buffer.from(JSON.stringify(valid())).toString('base64');
      const res = await fetch(death.url, {
        method: 'POST',
        headers: { ...ev().headers, 'content-type': 'application/x-www-form-urlencoded' },
        body: `message[data]=${encodeURIComponent(data)}&message[messageId]=1`,
      });
      expect(res.status).toBe(415);
      await json(res);
      expect(await recoveries()).toBe(0);
    });
    it('malformed JSON is a 400 in JSON (not an HTML page)', async () => {
      const res = await fetch(death.url, { method: 'POST', headers: ev().headers, body: '{"message": {' });
      expect(res.status).toBe(400);
      expect((await json(res)).code).toBe('entity_parse_failed');
    });
    it.each([
      ['ce-type', 'google.cloud.storage.object.v1.finalized'],
      ['ce-specversion', '0.3'],
    ])('a wrong %s is a 400, and nothing is recovered', async (header, value) => {
      const e = ev();
      const res = await postEvent(death.url, { headers: { ...e.headers, [header]: value }, body: e.body });
      expect(res.status).toBe(400);
      expect((await json(res)).code).toBe('invalid_cloudevent');
      expect(await recoveries()).toBe(0);
    });
    it('a structured-mode CloudEvent is read like a binary one', async () => {
      const e = ev();
      const body = {
        specversion: '1.0',
        type: 'google.cloud.pubsub.topic.v1.messagePublished',
        id: 'structured-1',
        source: 'x',
        data: JSON.parse(e.body) as unknown,
      };
      const bad = { ...body, data: { message: { data: Buffer.from('nope').toString('base64') } } };
      const res = await fetch(death.url, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify(bad),
      });
      expect(res.status).toBe(204);
      expect(rt.logger.lines.some((l) => l.event === 'poison_message' && l.eventId === 'structured-1')).toBe(true);
    });
  });

  describe('NUL bytes are bad input, not a database failure', () => {
    it.each(['executorId', 'detectedBy', 'applicationVersions'])('NUL in %s: acked as poison with the field named', async (field) => {
      const n = { ...valid(), [field]: field === 'applicationVersions' ? ['v\u00001'] : 'exec\u0000T' } as Record<string, unknown>;
      const before = rt.logger.lines.length;
      const res = await postEvent(death.url, pubsubCloudEvent(JSON.stringify(n)));
      expect(res.status).toBe(204);
      const line = rt.logger.lines.slice(before).find((l) => l.event === 'poison_message');
      expect(JSON.stringify(line?.issues)).toMatch(new RegExp(`${field}.*NUL`));
      expect(rt.logger.lines.slice(before).some((l) => l.event === 'recovery_retry')).toBe(false);
    });
    it('drain: ?applicationVersion=a%00b is a 400, POST with a NUL too', async () => {
      const get = await fetch(`${drain.url}?applicationVersion=a%00b`);
      expect(get.status).toBe(400);
      expect((await json(get)).error).toMatch(/NUL/);
      const post = await fetch(drain.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ executorIds: ['e\u00001'] }),
      });
      expect(post.status).toBe(400);
      await json(post);
    });
  });

  describe('the reaper query is parsed strictly', () => {
    const post = (q: string, body: unknown = {}) =>
      fetch(`${reaper.url}${q}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    it.each([
      '?dryRun=TRUE',
      '?dryRun=True',
      '?dryRun=yes',
      '?dryRun=true&dryRun=true',
      '?dryRun[]=true',
      '?dryrun=true',
      '?maxTicks=0x2',
      '?maxTicks=abc',
      '?maxTicks=1&maxTicks=2',
    ])('%s is a 400 and nothing runs', async (q) => {
      const before = rt.logger.lines.length;
      const res = await post(q);
      expect(res.status).toBe(400);
      expect((await json(res)).code).toBe('invalid_input');
      expect(rt.logger.lines.slice(before).some((l) => typeof l.event === 'string' && /^reaper_(tick|ticks|summary)$/.test(l.event))).toBe(
        false,
      );
    });
    it('?dryRun=true&maxTicks=2 runs a dry run of exactly two ticks', async () => {
      const res = await post('?dryRun=true&maxTicks=2');
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ dryRun: true, ticks: 2 });
    });
    it('a value given in the query and the body is a 400', async () => {
      const res = await post('?dryRun=true', { dryRun: false });
      expect(res.status).toBe(400);
    });
    it('malformed JSON is a 400 in JSON', async () => {
      const res = await fetch(reaper.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{dryRun:' });
      expect(res.status).toBe(400);
      await json(res);
    });
  });

  describe('a drain POST that wrote its request says so', () => {
    it('the progress read failing after the write still answers 202 with the request IDs', async () => {
      faults.on('db.beforeQuery', (ctx) => {
        if (ctx.tag === 'executors.find') throw new DbBusyError(3, 3);
      });
      try {
        const res = await fetch(drain.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ applicationVersion: 'v9' }),
        });
        expect(res.status).toBe(202);
        const body = (await res.json()) as { written: boolean; requestIds: number[] };
        expect(body.written).toBe(true);
        const rows = await tdb.sql.query<{ id: string }>(`SELECT id::text FROM afterlife.drain_requests WHERE application_version = 'v9'`);
        expect(body.requestIds).toEqual(rows.rows.map((r) => Number(r.id)));
      } finally {
        faults.off('db.beforeQuery');
      }
    });
    it('a write turned away before it reached Postgres says nothing was written', async () => {
      faults.on('db.beforeQuery', (ctx) => {
        if (ctx.tag === 'drainRequests.insert') throw new DbBusyError(3, 3);
      });
      try {
        const res = await fetch(drain.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ applicationVersion: 'v10' }),
        });
        expect(res.status).toBe(503);
        expect(await json(res)).toMatchObject({ written: false, code: 'db_busy' });
        const rows = await tdb.sql.query(`SELECT 1 FROM afterlife.drain_requests WHERE application_version = 'v10'`);
        expect(rows.rowCount).toBe(0);
      } finally {
        faults.off('db.beforeQuery');
      }
    });
  });
});
