import { describe, expect, it } from 'vitest';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { postEvent, pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { knownExecutors } from '../../helpers/agents.js';
import { executorDeathFixture } from '../../helpers/executorDeath.js';

/** Poison notices are acked (2xx) with a logged reason, nothing is recovered, the process stays up. */
describe('poison death notices', () => {
  const f = executorDeathFixture('app-p', {
    env: { GOOGLE_CLOUD_PROJECT: 'proj-p' },
    setup: (f) => knownExecutors(f.tdb.sql, f.app, ['exec-P']),
  });
  const valid = () => deathNotice({ executorId: 'exec-P', applicationName: f.app, reason: 'manual', detectedBy: 'test' });

  const raw = (data: string | undefined) => pubsubCloudEvent(data === undefined ? undefined : Buffer.from(data, 'latin1'));
  const withBase64 = (b64: string) => {
    const ev = pubsubCloudEvent('x');
    const body = JSON.parse(ev.body) as { message: { data: string } };
    body.message.data = b64;
    return { ...ev, body: JSON.stringify(body) };
  };
  const json = (v: unknown) => pubsubCloudEvent(JSON.stringify(v));

  const cases: Array<[string, { headers: Record<string, string>; body: string }, RegExp]> = [
    ['not JSON', raw('executor exec-P died'), /not JSON/],
    ['bad base64', withBase64('%%%not-base64%%%'), /base64/],
    ['wrong types', json({ ...valid(), version: '1', executorId: 42 }), /schema/],
    ['missing fields', json({ type: 'executor.dead', version: 1, executorId: 'exec-P' }), /schema/],
    ['unknown reason', json({ ...valid(), reason: 'bored' }), /schema/],
    ['1 MB payload', json({ ...valid(), padding: 'x'.repeat(1024 * 1024) }), /larger than/],
    ['empty data', raw(undefined), /no data/],
    ['empty body', { headers: pubsubCloudEvent('x').headers, body: '' }, /empty|envelope/],
    ['a JSON array', json([valid()]), /schema/],
    ['another application', json({ ...valid(), applicationName: 'someone-else' }), /guards/],
  ];

  it.each(cases)('%s → acked with a reason, nothing recovered', async (_name, ev, reason) => {
    const before = f.rt.logger.lines.length;
    const res = await postEvent(f.server.url, ev);
    expect(res.status).toBeGreaterThanOrEqual(200);
    expect(res.status).toBeLessThan(300);
    const logged = f.rt.logger.lines.slice(before).find((l) => l.event === 'poison_message');
    expect(logged?.reason).toMatch(reason);
    const audit = await f.tdb.sql.query('SELECT 1 FROM afterlife.recoveries');
    expect(audit.rowCount).toBe(0);
  });

  it('says which poison it was: undecodable, or another application’s notice (the `cause` a dashboard charts)', async () => {
    for (const [name, ev] of cases) {
      const before = f.rt.logger.lines.length;
      await postEvent(f.server.url, ev);
      const logged = f.rt.logger.lines.slice(before).find((l) => l.event === 'poison_message');
      expect(logged?.cause, name).toBe(name === 'another application' ? 'foreign-application' : 'undecodable');
    }
  });

  it('stays up: a valid notice after the poison is handled', async () => {
    const res = await postEvent(f.server.url, json(valid()));
    expect(res.status).toBe(204);
    const audit = await f.tdb.sql.query(`SELECT outcome FROM afterlife.recoveries WHERE executor_id = 'exec-P'`);
    expect(audit.rows).toEqual([{ outcome: 'completed' }]);
  });

  it('joins the trace Eventarc sets on the event (ce-traceparent)', async () => {
    const before = f.rt.logger.lines.length;
    const ev = json(valid());
    const res = await postEvent(f.server.url, {
      ...ev,
      headers: { ...ev.headers, 'ce-traceparent': '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
    });
    expect(res.status).toBe(204);
    const handled = f.rt.logger.lines.slice(before).find((l) => l.event === 'recovery');
    expect(handled?.['logging.googleapis.com/trace']).toBe('projects/proj-p/traces/4bf92f3577b34da6a3ce929d0e0e4736');
    expect(handled?.['logging.googleapis.com/spanId']).toBe('00f067aa0ba902b7');
  });
});
