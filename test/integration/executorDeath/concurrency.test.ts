import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { handleDeathEvent } from '../../helpers/executorDeath.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { postEvent, pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { afterlifeDb, uniqueName } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';
import { knownExecutors } from '../../helpers/agents.js';
import { executorDeathFixture } from '../../helpers/executorDeath.js';

/**
 * A burst of deaths (issue 13): 200 concurrent deliveries against one instance with pool max 3.
 * afterlife's sessions in pg_stat_activity never exceed 3, no pool acquisition times out, and the excess
 * waits in the admission line instead of bouncing, so every notice is handled on its first delivery. A
 * delivery that cannot get a slot within half its budget still answers retry-later.
 */
describe('bounded database concurrency', () => {
  const session = uniqueName('afterlife-i');
  const f = executorDeathFixture('app-i', {
    poolMax: 3,
    db: (tdb) => afterlifeDb(tdb.url, { max: 3, sessionName: session }),
    // Known executors: a notice about one with no registry row and nothing PENDING is refused (issue 23).
    setup: (f) => knownExecutors(f.tdb.sql, f.app, [...Array.from({ length: 200 }, (_, i) => `exec-${i}`), 'exec-slow', 'exec-waiting']),
  });

  it('never exceeds the pool, never times out in it, and serves the whole burst on first delivery', async () => {
    const monitor = new pg.Client({ connectionString: f.tdb.url });
    await monitor.connect();
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const r = await monitor.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`, [
          session,
        ]);
        peak = Math.max(peak, r.rows[0]?.n ?? 0);
      }
    })();

    const events = Array.from({ length: 200 }, (_, i) =>
      pubsubCloudEvent(
        JSON.stringify(deathNotice({ executorId: `exec-${i}`, applicationName: f.app, reason: 'manual', detectedBy: 'test' })),
        { messageId: `i-${i}` },
      ),
    );
    const statuses = await Promise.all(
      events.map((ev) => postEvent(f.server.url, ev).then(async (r) => ({ status: r.status, body: await r.text() }))),
    );
    const nacked = statuses.filter((s) => s.status >= 300);
    expect(nacked).toEqual([]); // the burst was served in one pass, none bounced
    expect(f.rt.logger.lines.filter((l) => l.event === 'recovery_retry')).toEqual([]);
    expect(f.rt.logger.lines.some((l) => /timeout exceeded when trying to connect/i.test(JSON.stringify(l)))).toBe(false);
    sampling = false;
    await sampler;
    await monitor.end();
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(3);
    const done = await f.tdb.sql.query<{ n: number }>(
      `SELECT count(DISTINCT executor_id)::int AS n FROM afterlife.recoveries WHERE outcome = 'completed'`,
    );
    expect(done.rows[0]?.n).toBe(200);
    // Admitted whole: no delivery was cut off halfway (an audit row left open or failed by the budget).
    const cut = await f.tdb.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM afterlife.recoveries WHERE outcome IS DISTINCT FROM 'completed'`,
    );
    expect(cut.rows[0]?.n).toBe(0);
    console.log(`concurrency: 200 deliveries → all acked on first delivery; peak sessions ${peak}/3`);
  });

  it('answers retry-later when no slot frees within half the budget', async () => {
    // One slot, a one-second budget: the second delivery may wait 500 ms while the first holds its slot.
    const faults = new FaultInjector();
    const short = testRuntime({
      databaseUrl: f.tdb.url,
      applicationName: f.app,
      faults,
      poolMax: 1,
      env: { FUNCTION_TIMEOUT_S: '1', BUDGET_MARGIN_MS: '0' },
    });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    faults.onNth('db.beforeQuery', 1, () => held);
    const envelope = (executorId: string) =>
      JSON.parse(
        pubsubCloudEvent(JSON.stringify(deathNotice({ executorId, applicationName: f.app, reason: 'manual', detectedBy: 'test' }))).body,
      ) as unknown;
    try {
      const first = handleDeathEvent(short, envelope('exec-slow'));
      const started = Date.now();
      const second = await handleDeathEvent(short, envelope('exec-waiting'));
      const waited = Date.now() - started;
      expect(second).toMatchObject({ ack: false, kind: 'retry', code: 'db_busy' });
      expect(waited).toBeGreaterThanOrEqual(450);
      release();
      expect(await first).toMatchObject({ ack: true, kind: 'recovered' });
    } finally {
      release();
      await short.close();
    }
  });
});
