import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRuntime } from '../../../functions/runtime.js';
import '../../../functions/index.js';
import { deathNotice } from '../../../shared/events/deathNotice.js';
import { postEvent, pubsubCloudEvent, serve } from '../../helpers/cloudEvents.js';
import { afterlifeDb, createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * Acceptance I: 200 concurrent deliveries against one instance with pool max 3. afterlife's sessions in
 * pg_stat_activity never exceed 3, no pool acquisition times out, and the excess answers retry-later
 * (nack) instead of queueing; redelivered, every notice is eventually handled.
 */
describe('bounded database concurrency', () => {
  let tdb: TestDatabase;
  let rt: ReturnType<typeof testRuntime>;
  let server: Awaited<ReturnType<typeof serve>>;
  let db: ReturnType<typeof afterlifeDb>;
  const app = uniqueName('app-i');
  const session = uniqueName('afterlife-i');

  beforeAll(async () => {
    tdb = await createTestDatabase();
    db = afterlifeDb(tdb.url, { max: 3, sessionName: session });
    rt = testRuntime({ databaseUrl: tdb.url, applicationName: app, db, poolMax: 3 });
    useRuntime(rt);
    server = await serve('executorDeath');
  });
  afterAll(async () => {
    await server?.close();
    await rt?.close();
    await db?.end();
    await tdb?.drop();
  });

  it('never exceeds the pool, never times out in it, and nacks the excess', async () => {
    const monitor = new pg.Client({ connectionString: tdb.url });
    await monitor.connect();
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const r = await monitor.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`, [session]);
        peak = Math.max(peak, r.rows[0]?.n ?? 0);
      }
    })();

    const events = Array.from({ length: 200 }, (_, i) =>
      pubsubCloudEvent(JSON.stringify(deathNotice({ executorId: `exec-${i}`, applicationName: app, reason: 'manual', detectedBy: 'test' })), { messageId: `i-${i}` }),
    );
    const statuses = await Promise.all(events.map((ev) => postEvent(server.url, ev).then(async (r) => ({ status: r.status, body: await r.text() }))));
    const nacked = statuses.map((s, i) => ({ ...s, i })).filter((s) => s.status >= 300);
    const acked = statuses.filter((s) => s.status < 300);

    expect(acked.length + nacked.length).toBe(200);
    expect(acked.length).toBeGreaterThan(0);
    expect(nacked.length).toBeGreaterThan(0); // the excess was turned away, not queued
    const retryLogs = rt.logger.lines.filter((l) => l.event === 'recovery_retry');
    expect(retryLogs.length).toBe(nacked.length);
    expect(retryLogs.every((l) => l.code === 'db_busy')).toBe(true);
    expect(rt.logger.lines.some((l) => /timeout exceeded when trying to connect/i.test(JSON.stringify(l)))).toBe(false);

    // Redelivery: each nacked notice is handled in the end; the bound is the number of rounds.
    let pending = nacked.map((n) => n.i);
    for (let round = 0; round < 50 && pending.length; round++) {
      const again = await Promise.all(pending.map((i) => postEvent(server.url, events[i]!).then((r) => ({ i, ok: r.status < 300 }))));
      pending = again.filter((a) => !a.ok).map((a) => a.i);
    }
    expect(pending).toEqual([]);
    sampling = false;
    await sampler;
    await monitor.end();
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(3);
    const done = await tdb.sql.query<{ n: number }>(`SELECT count(DISTINCT executor_id)::int AS n FROM afterlife.recoveries WHERE outcome = 'completed'`);
    expect(done.rows[0]?.n).toBe(200);
    // Admitted whole: no delivery was cut off halfway (an audit row left open or failed by the budget).
    const cut = await tdb.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM afterlife.recoveries WHERE outcome IS DISTINCT FROM 'completed'`);
    expect(cut.rows[0]?.n).toBe(0);
    console.log(`concurrency: 200 deliveries → ${acked.length} acked at once, ${nacked.length} retry-later; peak sessions ${peak}/3`);
  });
});
