import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, createPool } from '../../../packages/executor/src/db/pool.js';
import { cancelIfStillQuiet } from '../../../shared/dbos/reaper.js';
import { waitFor, workflowRows } from '../../helpers/db.js';
import { judgedAlive, type TickSeen, waitForLock } from '../../helpers/detection.js';
import { runReaper } from '../../../shared/reaper/index.js';
import { reaperFixture, testReaperDeps } from '../../helpers/reaper.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redisServer.js';

/**
 * Issue 19: a host lost while one of DBOS's pool connections is inside a transaction. Its session
 * (a proxy's open leg, in production) keeps the row locks the transaction took for as long as it lives.
 * Simulated exactly: a client of the victim's role and DBOS's session name BEGINs, takes the lock DBOS's
 * checkpoint takes (`SELECT owner_xid … FOR NO KEY UPDATE`) on one of the victim's workflows, and goes
 * silent with its session open. The victim (a real DBOS executor with the kit) is then SIGKILLed; the
 * reaper ticks every 250 ms as it is served (inline recovery, the default statement timeout).
 *
 * What must hold: the reaper keeps ticking (a second executor killed meanwhile is declared and recovered
 * within the same bound), every other workflow of the victim runs on the survivor within the normal bound,
 * the locked one stays where it is — and is recovered within a few ticks of the transaction ending (here,
 * as `idle_in_transaction_session_timeout` would end it: the server terminates the session). And the stuck
 * pass's cancel does not wait on such a row either (the tests' pool has no statement timeout: a wait would hang).
 */
const TICK_MS = 250;
/** Lock free → declared on two ticks → re-enqueued → claimed (DBOS polls every second): generous for a loaded machine. */
const RECOVERED_MS = 8_000;

describe('reaper: a lost host holding a row lock inside a transaction', () => {
  // A Redis of its own: another suite flushing the shared one would make every missing key no evidence.
  let priv: PrivateRedis | undefined;
  beforeAll(async () => {
    priv = await startPrivateRedis();
  });
  afterAll(async () => {
    await priv?.stop();
  });
  const fx = reaperFixture('app-losttx', {
    redisUrl: () => priv?.url ?? 'redis://127.0.0.1:1',
    env: { REAPER_TICK_MS: String(TICK_MS), FUNCTION_TIMEOUT_S: '600', BUDGET_MARGIN_MS: '1000' },
  });
  let holder: pg.Client | undefined;
  let closePool: (() => Promise<void>) | undefined;
  afterAll(async () => {
    await holder?.end().catch(() => undefined);
    await closePool?.();
  });

  it(
    'recovers every other workflow at once, keeps ticking, and recovers the locked one once its transaction ends',
    { timeout: 180_000 },
    async () => {
      const { tdb, app, rt } = fx;
      const victim = await fx.executor('victim', { beat: true });
      const other = await fx.executor('other', { beat: true });
      await fx.executor('survivor', { beat: true });
      for (const id of ['victim', 'other', 'survivor']) await waitForLock(tdb.sql, app, id);

      const locked = 'lost-0';
      const free = ['lost-1', 'lost-2', 'lost-3', 'lost-4'];
      const otherIds = ['other-0', 'other-1'];
      for (const id of [locked, ...free]) await victim.start(id, { steps: 2, stepMs: 3_000 });
      for (const id of otherIds) await other.start(id, { steps: 2, stepMs: 3_000 });
      await waitFor('PENDING on their executors', async () => {
        const rows = await workflowRows(tdb.sql, [locked, ...free, ...otherIds]);
        return (
          rows.length === 7 &&
          rows.every((r) => r.status === 'PENDING' && r.executor_id === (r.workflow_uuid.startsWith('other') ? 'other' : 'victim'))
        );
      });

      // The lost leg: DBOS's session name, inside a transaction, holding the checkpoint's row lock, silent.
      holder = new pg.Client({ connectionString: tdb.url, application_name: 'dbos_transact_victim_v1' });
      await holder.connect();
      holder.on('error', () => undefined); // terminated below, as the server's idle-in-transaction limit would
      await holder.query('BEGIN');
      await holder.query(`SELECT owner_xid FROM dbos.workflow_status WHERE workflow_uuid = $1 FOR NO KEY UPDATE`, [locked]);
      const holderPid = (holder as unknown as { processID: number }).processID;

      // The reaper's pool as production builds it (DB_STATEMENT_TIMEOUT_MS and all), not the tests' bare one.
      const { pool, close } = await createPool(rt.config, rt.logger, 'afterlife-reaper');
      closePool = close;
      const db = createDb(pool, rt.config.database.poolMax, {
        dbosSchema: rt.config.dbosSchema,
        afterlifeSchema: rt.config.afterlifeSchema,
        logger: rt.logger,
      });
      // As the Scheduler runs it (standby): a first lease attempt that fails on a loaded machine is retried.
      const ticks: TickSeen[] = [];
      const stop = new AbortController();
      const running = runReaper(testReaperDeps(rt, { db }), {
        signal: stop.signal,
        standby: true,
        onTick: (r) => ticks.push({ at: Date.now(), r }),
      });
      const reaper = {
        ticks,
        stop: async () => {
          stop.abort();
          const s = await running;
          if (s.outcome !== 'completed') throw new Error(`reaper skipped: ${s.reason}`);
          return s;
        },
      };
      try {
        await waitFor('the reaper judges both alive', async () => reaper.ticks.some((t) => judgedAlive(t, ['victim', 'other'])));
        victim.kill('SIGKILL');
        const killedAt = Date.now();
        await victim.exited;

        const freeAt = await waitFor(
          // Both live executors run the victim's version, so either may dequeue what the recovery re-enqueued.
          'every unlocked workflow of the victim claimed by a live executor',
          async () =>
            (await workflowRows(tdb.sql, free)).every((r) => r.executor_id === 'survivor' || r.executor_id === 'other')
              ? Date.now()
              : undefined,
          { timeoutMs: 60_000, intervalMs: 50 },
        );
        console.log(
          `[lost transaction] unlocked workflows on a live executor ${freeAt - killedAt} ms after SIGKILL (bound ${RECOVERED_MS} ms)`,
        );
        expect(freeAt - killedAt).toBeLessThanOrEqual(RECOVERED_MS);

        // The reaper still sees other deaths while the lock is held.
        other.kill('SIGKILL');
        const otherKilledAt = Date.now();
        await other.exited;
        const otherAt = await waitFor(
          'the other executor’s workflows claimed by the survivor',
          async () => ((await workflowRows(tdb.sql, otherIds)).every((r) => r.executor_id === 'survivor') ? Date.now() : undefined),
          { timeoutMs: 60_000, intervalMs: 50 },
        );
        console.log(`[lost transaction] a second death recovered ${otherAt - otherKilledAt} ms after its SIGKILL, lock still held`);
        expect(otherAt - otherKilledAt).toBeLessThanOrEqual(RECOVERED_MS);

        const [row] = await workflowRows(tdb.sql, [locked]);
        expect(row).toMatchObject({ status: 'PENDING', executor_id: 'victim' });
        const during = reaper.ticks.filter((t) => t.at >= killedAt);
        const longest = Math.max(...during.map((t) => t.r.durationMs));
        console.log(`[lost transaction] ${during.length} ticks while the lock was held, longest ${longest} ms`);
        expect(longest).toBeLessThan(2_000);

        // The transaction ends (the server ends the idle-in-transaction session): the locked row follows.
        await tdb.sql.query('SELECT pg_terminate_backend($1)', [holderPid]);
        const endedAt = Date.now();
        const lockedAt = await waitFor(
          'the formerly locked workflow claimed by the survivor',
          async () => ((await workflowRows(tdb.sql, [locked]))[0]?.executor_id === 'survivor' ? Date.now() : undefined),
          { timeoutMs: 60_000, intervalMs: 50 },
        );
        console.log(`[lost transaction] locked workflow on the survivor ${lockedAt - endedAt} ms after its transaction ended`);
        expect(lockedAt - endedAt).toBeLessThanOrEqual(RECOVERED_MS);
      } finally {
        const summary = await reaper.stop();
        console.log(`[lost transaction] reaper: ${summary.ticks} ticks, errors ${JSON.stringify(summary.errors.slice(0, 3))}`);
      }
      await waitFor(
        'all finish',
        async () => (await workflowRows(tdb.sql, [locked, ...free, ...otherIds])).every((r) => r.status === 'SUCCESS'),
        { timeoutMs: 60_000 },
      );

      // The audit never says a recovery of the victim finished while its row was left behind.
      const audit = await tdb.sql.query<{ outcome: string; reenqueued: number; error: string | null }>(
        `SELECT outcome, reenqueued, error FROM afterlife.recoveries WHERE executor_id = 'victim' ORDER BY id`,
      );
      console.log(`[lost transaction] audit: ${JSON.stringify(audit.rows)}`);
      expect(audit.rows.at(-1)).toMatchObject({ outcome: 'completed', reenqueued: 1 });
      expect(audit.rows.slice(0, -1).every((r) => r.outcome === 'partial' && /locked/.test(r.error ?? ''))).toBe(true);
      expect(audit.rows.reduce((n, r) => n + r.reenqueued, 0)).toBe(5);
    },
  );

  it("the stuck pass's cancel passes over a row another transaction holds at once, and cancels it once the lock is gone", async () => {
    const { tdb, app, rt } = fx;
    const live = fx.executors.find((e) => e.executorId === 'survivor') ?? (await fx.executor('survivor', { beat: true }));
    await live.start('quiet-0', { steps: 1, stepMs: 60_000 });
    await waitFor('quiet-0 PENDING on the survivor', async () => (await workflowRows(tdb.sql, ['quiet-0']))[0]?.status === 'PENDING');
    const lost = new pg.Client({ connectionString: tdb.url, application_name: 'dbos_transact_survivor_v1' });
    await lost.connect();
    try {
      await lost.query('BEGIN');
      await lost.query(`SELECT owner_xid FROM dbos.workflow_status WHERE workflow_uuid = 'quiet-0' FOR NO KEY UPDATE`);
      // Quiet since an hour from now: only the lock can stop the cancel.
      const target = { applicationName: app, workflowId: 'quiet-0', executorId: 'survivor', cutoffMs: Date.now() + 3_600_000 };
      const t0 = Date.now();
      expect(await cancelIfStillQuiet(rt.db, target)).toBe(false);
      expect(Date.now() - t0).toBeLessThan(2_000);
      await lost.query('ROLLBACK');
      expect(await cancelIfStillQuiet(rt.db, target)).toBe(true);
      expect((await workflowRows(tdb.sql, ['quiet-0']))[0]?.status).toBe('CANCELLED');
    } finally {
      await lost.end();
    }
  });
});
