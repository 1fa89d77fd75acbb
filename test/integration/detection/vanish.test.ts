import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIVENESS_LEASE_MS } from '../../../packages/executor/src/contract/lease.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { startReaper, waitForLock } from '../../helpers/detection.js';
import { startExecutor } from '../../helpers/executor.js';
import { type Forwarder, startForwarder } from '../../helpers/forwarder.js';
import { kitEnv } from '../../helpers/kit.js';
import { reaperFixture, TEST_TTL_MS, testReaperDeps } from '../../helpers/reaper.js';

/**
 * A lost host behind a proxy (issue 19): a real DBOS executor with the kit at the default lease reaches
 * Postgres — DBOS's pool and the kit's liveness session alike — through a TCP forwarder that opens its own
 * session to Postgres (test/helpers/forwarder.ts, a stand-in for Cloud SQL's proxy). Its host vanishes: the
 * forwarder stops piping both ways and keeps its Postgres legs open forever, then the process is SIGKILLed,
 * so no FIN or RST reaches Postgres. Before the lease its lock stayed held for as long as the proxy kept
 * the leg (never freed in 600 s); now the server ends the silent session a lease later, the reaper declares it
 * dead, and its workflows finish on a live executor with no step checkpointed twice.
 */
describe('detection: a host that vanishes behind a proxy', () => {
  const fx = reaperFixture('app-vanish', { env: { REAPER_TICK_MS: '250', FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' } });
  let forwarder: Forwarder | undefined;
  afterAll(async () => {
    await forwarder?.close();
  });

  it('is let go a lease after it vanished, declared dead and recovered; nothing is checkpointed twice', { timeout: 120_000 }, async () => {
    const { tdb, app, rt } = fx;
    const target = new URL(tdb.url);
    forwarder = await startForwarder({ host: target.hostname, port: Number(target.port || 5432) });
    const victim = await startExecutor({
      databaseUrl: forwarder.via(tdb.url),
      applicationName: app,
      applicationVersion: 'v1',
      executorId: 'lost',
      env: kitEnv({ ttlMs: TEST_TTL_MS }),
    });
    fx.executors.push(victim);
    await fx.executor('heir', { beat: true });
    const holder = await waitForLock(tdb.sql, app, 'lost');
    const ids = Array.from({ length: 4 }, (_, i) => `lost-${i}`);
    for (const id of ids) await victim.start(id, { steps: 2, stepMs: 3_000 });
    await waitFor('every workflow in its first step on the victim', async () => {
      const r = await tdb.sql.query<{ n: number }>(
        `SELECT count(DISTINCT workflow_id)::int AS n FROM public.step_runs WHERE phase = 'start' AND executor_id = 'lost' AND workflow_id = ANY($1)`,
        [ids],
      );
      return r.rows[0]?.n === ids.length;
    });
    const reaper = startReaper(testReaperDeps(rt));
    try {
      forwarder.vanish();
      victim.kill('SIGKILL');
      const vanishedAt = Date.now();
      await victim.exited;
      // The proxy's leg is still there, idle: only the server's lease timer can end it.
      const r = await tdb.sql.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [holder.pid]);
      expect(r.rowCount).toBe(1);
      const endedAt = await waitFor(
        'the server ends the silent liveness session',
        async () => {
          const s = await tdb.sql.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [holder.pid]);
          return s.rowCount === 0 ? Date.now() : undefined;
        },
        { timeoutMs: DEFAULT_LIVENESS_LEASE_MS + 10_000, intervalMs: 50 },
      );
      const declaredAt = await waitFor(
        'the victim is declared dead',
        async () => {
          const d = await tdb.sql.query<{ at: Date }>(
            `SELECT state_changed_at AS at FROM afterlife.executors WHERE application_name = $1 AND executor_id = 'lost' AND state = 'dead'`,
            [app],
          );
          return d.rows[0]?.at.getTime();
        },
        { timeoutMs: 20_000, intervalMs: 50 },
      );
      await waitFor(
        'every workflow SUCCESS elsewhere',
        async () => (await workflowRows(tdb.sql, ids)).every((w) => w.status === 'SUCCESS' && w.executor_id !== 'lost'),
        { timeoutMs: 60_000 },
      );
      const firstElsewhere = await tdb.sql.query<{ t: Date }>(
        `SELECT min(at) AS t FROM public.step_runs WHERE executor_id <> 'lost' AND phase = 'start' AND workflow_id = ANY($1)`,
        [ids],
      );
      const twice = await tdb.sql.query(
        `SELECT workflow_uuid, function_id FROM dbos.operation_outputs WHERE workflow_uuid = ANY($1) GROUP BY 1, 2 HAVING count(*) > 1`,
        [ids],
      );
      console.log(
        `[detection:vanish] lease ${DEFAULT_LIVENESS_LEASE_MS} ms; session ended ${endedAt - vanishedAt} ms after the vanish, declared dead ${declaredAt - vanishedAt} ms, ` +
          `first step elsewhere ${(firstElsewhere.rows[0]?.t.getTime() ?? NaN) - vanishedAt} ms; the forwarder still holds ${forwarder.connections} leg(s)`,
      );
      expect(endedAt - vanishedAt).toBeLessThan(DEFAULT_LIVENESS_LEASE_MS + 3_000);
      expect(twice.rows).toEqual([]);
    } finally {
      await reaper.stop().catch(() => undefined);
    }
  });
});
