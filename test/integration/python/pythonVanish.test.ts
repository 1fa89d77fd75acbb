import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIVENESS_LEASE_MS } from '../../../packages/executor/src/contract/lease.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { startReaper, waitForLock } from '../../helpers/detection.js';
import { type Forwarder, startForwarder } from '../../helpers/forwarder.js';
import { kitEnv } from '../../helpers/kit.js';
import { type PythonExecutor, pythonSkip, startPythonExecutor } from '../../helpers/pythonExecutor.js';
import { reaperFixture, TEST_TTL_MS, testReaperDeps } from '../../helpers/reaper.js';

/**
 * A lost host behind a proxy, for the Python kit: a DBOS for Python 2.30.0 app with the kit at the default
 * lease reaches Postgres — DBOS's pool and the kit's liveness session alike — through a TCP forwarder that
 * keeps its Postgres legs open forever once the host "vanishes" (test/helpers/forwarder.ts), then the process
 * is SIGKILLed, so no FIN or RST reaches Postgres. Only the server's lease (idle_session_timeout, set by the
 * kit on its own session) ends the silent session; the reaper then declares the victim dead and its work
 * runs on a live Python instance within the lease and a second and a half, nothing checkpointed twice.
 */
const noPython = pythonSkip('the Python kit on a lost host behind a proxy');
const LEASE_MS = DEFAULT_LIVENESS_LEASE_MS;

describe.skipIf(noPython)('the Python kit: a host that vanishes behind a proxy', () => {
  const fx = reaperFixture('py-vanish', { env: { REAPER_TICK_MS: '250', FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' } });
  let forwarder: Forwarder | undefined;
  const started: PythonExecutor[] = [];
  afterAll(async () => {
    await Promise.all(started.map((e) => e.stop()));
    await forwarder?.close();
  });

  it('is let go a lease after it vanished and recovered within the lease + 1.5 s', { timeout: 120_000 }, async () => {
    const { tdb, app, rt } = fx;
    const target = new URL(tdb.url);
    forwarder = await startForwarder({ host: target.hostname, port: Number(target.port || 5432) });
    const env = kitEnv({ ttlMs: TEST_TTL_MS });
    const victim = await startPythonExecutor({ databaseUrl: forwarder.via(tdb.url), applicationName: app, executorId: 'py-lost', env });
    started.push(victim);
    started.push(await startPythonExecutor({ databaseUrl: tdb.url, applicationName: app, executorId: 'py-heir', env }));
    const holder = await waitForLock(tdb.sql, app, 'py-lost');
    await waitForLock(tdb.sql, app, 'py-heir');
    const ids = Array.from({ length: 3 }, (_, i) => `lost-${i}`);
    for (const id of ids) await victim.start(id, { steps: 2, stepMs: 3_000 });
    await waitFor('every workflow in its first step on the victim', async () => {
      const r = await tdb.sql.query<{ n: number }>(
        `SELECT count(DISTINCT workflow_id)::int AS n FROM public.step_runs WHERE phase = 'start' AND executor_id = 'py-lost' AND workflow_id = ANY($1)`,
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
      expect((await tdb.sql.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [holder.pid])).rowCount).toBe(1);
      const endedAt = await waitFor(
        'the server ends the silent liveness session',
        async () =>
          (await tdb.sql.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [holder.pid])).rowCount === 0 ? Date.now() : undefined,
        { timeoutMs: LEASE_MS + 10_000, intervalMs: 50 },
      );
      const first = await waitFor(
        'a step of the victim elsewhere',
        async () => {
          const r = await tdb.sql.query<{ t: Date | null }>(
            `SELECT min(at) AS t FROM public.step_runs WHERE executor_id <> 'py-lost' AND phase = 'start' AND workflow_id = ANY($1)`,
            [ids],
          );
          return r.rows[0]?.t?.getTime();
        },
        { timeoutMs: LEASE_MS + 20_000, intervalMs: 50 },
      );
      await waitFor(
        'every workflow SUCCESS elsewhere',
        async () => (await workflowRows(tdb.sql, ids)).every((w) => w.status === 'SUCCESS' && w.executor_id !== 'py-lost'),
        { timeoutMs: 60_000 },
      );
      const twice = await tdb.sql.query(
        `SELECT workflow_uuid, function_id FROM dbos.operation_outputs WHERE workflow_uuid = ANY($1) GROUP BY 1, 2 HAVING count(*) > 1`,
        [ids],
      );
      console.log(
        `[python vanish] lease ${LEASE_MS} ms; session ended ${endedAt - vanishedAt} ms after the vanish, first step elsewhere ${first - vanishedAt} ms`,
      );
      expect(first - vanishedAt).toBeLessThanOrEqual(LEASE_MS + 1_500);
      expect(twice.rows).toEqual([]);
    } finally {
      await reaper.stop().catch(() => undefined);
    }
  });
});
