import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { handleDeathEvent } from '../../helpers/executorDeath.js';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { recoverExecutor } from '../../../shared/recovery/recoverExecutor.js';
import { BudgetExhaustedError, RowsLockedError } from '../../../packages/executor/src/errors.js';
import { RedisLock } from '../../../shared/lock/lock.js';
import { createRedis } from '../../../packages/executor/src/lock/redis.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { auditedIds, beat, makeOrphans, pendingIds } from '../../helpers/agents.js';
import { pubsubCloudEvent } from '../../helpers/cloudEvents.js';
import { afterlifeDb, waitFor, workflowRows } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';
import { silentLogger } from '../../../packages/executor/src/log.js';
import { executorDeathFixture } from '../../helpers/executorDeath.js';

/** A recovery stays safe through duplicate deliveries, Redis down, a connection killed mid-batch, a false alarm. */
const envelope = (n: ReturnType<typeof deathNotice>, messageId = 'm') =>
  JSON.parse(pubsubCloudEvent(JSON.stringify(n), { messageId }).body) as unknown;

describe('executor-death safety', () => {
  const f = executorDeathFixture('app-s', {
    serve: false,
    setup: async ({ tdb, app }) => {
      const ids = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}-${i}`);
      const common = { databaseUrl: tdb.url, sql: tdb.sql, applicationName: app, applicationVersion: 'v1' };
      // One real dead executor per scenario; none of their steps completes before the kill.
      await makeOrphans({ ...common, executorId: 'exec-C', ids: ids('c', 8), stepMs: 60_000 });
      await makeOrphans({ ...common, executorId: 'exec-D', ids: ids('d', 3), stepMs: 60_000 });
      await makeOrphans({ ...common, executorId: 'exec-E', ids: ids('e', 7), stepMs: 60_000 });
      await makeOrphans({ ...common, executorId: 'exec-G', ids: ids('g', 2), stepMs: 60_000 });
      await makeOrphans({ ...common, executorId: 'exec-T', ids: ids('t', 5), stepMs: 60_000 });
      await makeOrphans({ ...common, executorId: 'exec-L', ids: ids('l', 5), stepMs: 60_000 });
      await makeOrphans({ ...common, executorId: 'exec-K', ids: ids('k', 4), stepMs: 60_000 });
      await makeOrphans({ ...common, executorId: 'exec-U', ids: ids('u', 3), stepMs: 60_000 });
    },
  });
  const notice = (executorId: string, reason: 'manual' | 'heartbeat-lapsed' = 'manual') =>
    deathNotice({ executorId, applicationName: f.app, reason, detectedBy: 'test' });

  it('five concurrent deliveries re-enqueue each workflow once; contended ones nack, then ack with nothing to do', async () => {
    const faults = new FaultInjector();
    const rt = testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app, faults, poolMax: 5 });
    f.onClose(rt.close);
    const before = await pendingIds(f.tdb.sql, 'exec-C');
    expect(before).toHaveLength(8);

    // The first delivery to reach a batch holds there until the four others have answered.
    let release!: () => void;
    const othersAnswered = new Promise<void>((r) => (release = r));
    faults.onNth('recover.beforeBatch', 1, () => othersAnswered);
    const deliveries = Array.from({ length: 5 }, (_, i) => handleDeathEvent(rt, envelope(notice('exec-C'), `c-${i}`)));
    const settled: Array<Awaited<(typeof deliveries)[number]>> = [];
    const others = deliveries.map((d) => d.then((o) => (settled.push(o), o)));
    await waitFor('four deliveries answered', async () => settled.length >= 4);
    release();
    const outcomes = await Promise.all(others);

    const nacked = outcomes.filter((o) => !o.ack);
    const acked = outcomes.filter((o) => o.ack);
    expect(acked).toHaveLength(1);
    expect(nacked).toHaveLength(4);
    for (const n of nacked) expect(n).toMatchObject({ kind: 'retry', code: 'lock_contended' });

    // Redelivery of the nacked ones: acked, nothing to do.
    for (const [i] of nacked.entries()) {
      const again = await handleDeathEvent(rt, envelope(notice('exec-C'), `c-redelivered-${i}`));
      expect(again).toMatchObject({ ack: true, kind: 'recovered', summary: { outcome: 'nothing-to-do', reenqueued: 0 } });
    }
    const audited = await auditedIds(f.tdb.sql, 'exec-C');
    expect(audited).toEqual([...before].sort()); // each exactly once
    expect(await pendingIds(f.tdb.sql, 'exec-C')).toEqual([]);
  });

  it('with Redis unreachable, recovery still completes and is logged as degraded', async () => {
    const down = createRedis('redis://127.0.0.1:1'); // nothing listens on port 1
    f.onClose(async () => down.disconnect());
    const rt = testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app, redis: down });
    f.onClose(rt.close);
    const before = await pendingIds(f.tdb.sql, 'exec-D');
    expect(before).toHaveLength(3);
    const out = await handleDeathEvent(rt, envelope(notice('exec-D')));
    expect(out).toMatchObject({ ack: true, kind: 'recovered', summary: { lockMode: 'degraded', reenqueued: 3, liveVersionsKnown: false } });
    expect(rt.logger.lines.some((l) => l.severity === 'WARNING' && /degraded/.test(l.message))).toBe(true);
    expect(await pendingIds(f.tdb.sql, 'exec-D')).toEqual([]);
    const audit = await f.tdb.sql.query(`SELECT lock_mode, outcome FROM afterlife.recoveries WHERE executor_id = 'exec-D'`);
    expect(audit.rows).toEqual([{ lock_mode: 'degraded', outcome: 'completed' }]);
  });

  it('a connection killed mid-batch nacks that delivery; the redelivery finishes; nothing is re-enqueued twice', async () => {
    const faults = new FaultInjector();
    const db = afterlifeDb(f.tdb.url, { faults, sessionName: 'afterlife-e' });
    const rt = testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app, faults, db, env: { RECOVERY_BATCH_SIZE: '3' } });
    f.onClose(async () => {
      await rt.close();
      await db.end();
    });
    const before = await pendingIds(f.tdb.sql, 'exec-E');
    expect(before).toHaveLength(7);

    // On the second batch statement, terminate the very backend that is about to run it.
    const admin = new pg.Client({ connectionString: f.tdb.url });
    await admin.connect();
    f.onClose(() => admin.end());
    let batchNo = 0;
    faults.on('db.beforeQuery', async (ctx) => {
      if (ctx.tag !== 'recover.batch' || ++batchNo !== 2) return;
      await admin.query('SELECT pg_terminate_backend($1)', [ctx.pid]);
      await waitFor('backend gone', async () => {
        const r = await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [ctx.pid]);
        return r.rowCount === 0;
      });
    });
    const first = await handleDeathEvent(rt, envelope(notice('exec-E'), 'e-1'));
    expect(first).toMatchObject({ ack: false, kind: 'retry' });
    const afterFirst = await auditedIds(f.tdb.sql, 'exec-E');
    expect(afterFirst).toHaveLength(3); // batch 1 committed with its audit; batch 2 died

    faults.off('db.beforeQuery');
    const second = await handleDeathEvent(rt, envelope(notice('exec-E'), 'e-1'));
    expect(second).toMatchObject({ ack: true, summary: { reenqueued: 4 } });
    const audited = await auditedIds(f.tdb.sql, 'exec-E');
    expect(audited).toEqual([...before].sort());
    expect(new Set(audited).size).toBe(audited.length);
    const rows = await workflowRows(f.tdb.sql, before);
    expect(rows.every((r) => r.status === 'ENQUEUED')).toBe(true);
    const runs = await f.tdb.sql.query(`SELECT outcome FROM afterlife.recoveries WHERE executor_id = 'exec-E' ORDER BY id`);
    expect(runs.rows.map((r: { outcome: string }) => r.outcome)).toEqual(['failed', 'completed']);
  });

  it('a heartbeat-lapsed notice for an executor whose heartbeat is fresh is a false alarm', async () => {
    const rt = testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app });
    f.onClose(rt.close);
    if (!rt.redis) throw new Error('redis required');
    await beat(rt.redis, f.app, 'exec-G', 'v1', 10_000);
    const out = await handleDeathEvent(rt, envelope(notice('exec-G', 'heartbeat-lapsed')));
    expect(out).toMatchObject({ ack: true, kind: 'recovered', summary: { outcome: 'false-alarm' } });
    expect(await pendingIds(f.tdb.sql, 'exec-G')).toHaveLength(2);
    const audit = await f.tdb.sql.query(`SELECT 1 FROM afterlife.recoveries WHERE executor_id = 'exec-G'`);
    expect(audit.rowCount).toBe(0);
    const registry = await f.tdb.sql.query(`SELECT 1 FROM afterlife.executors WHERE executor_id = 'exec-G' AND state = 'dead'`);
    expect(registry.rowCount).toBe(0);
  });

  it('stops at a batch boundary when the invocation budget runs out, and the redelivery finishes the rest', async () => {
    const faults = new FaultInjector();
    const rt = testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app, faults });
    f.onClose(rt.close);
    let expired = false;
    faults.onNth('recover.afterBatch', 1, () => {
      expired = true; // the deadline passes while the first batch runs
    });
    const deps = { db: rt.db, redis: rt.redis, lock: rt.lock, logger: rt.logger, faults, batchSize: 2, lockTtlMs: 5_000, clock: Date.now };
    const budget = { deadline: 0, remaining: () => (expired ? 0 : 1_000), expired: () => expired };
    await expect(recoverExecutor(deps, notice('exec-T'), { budget })).rejects.toBeInstanceOf(BudgetExhaustedError);
    expect(await auditedIds(f.tdb.sql, 'exec-T')).toHaveLength(2);
    expect(await pendingIds(f.tdb.sql, 'exec-T')).toHaveLength(3);
    // The lock was released on the way out, so the redelivery is not contended.
    const rest = await recoverExecutor(deps, notice('exec-T'));
    expect(rest).toMatchObject({ outcome: 'completed', reenqueued: 3 });
    const outcomes = await f.tdb.sql.query(`SELECT outcome FROM afterlife.recoveries WHERE executor_id = 'exec-T' ORDER BY id`);
    expect(outcomes.rows.map((r: { outcome: string }) => r.outcome)).toEqual(['partial', 'completed']);
  });

  it('a row another transaction holds is passed over: the rest moves, the delivery nacks (rows_locked), the redelivery after the transaction moves it; nothing twice', async () => {
    const db = afterlifeDb(f.tdb.url, { sessionName: 'afterlife-k' });
    const rt = testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app, db, env: { RECOVERY_BATCH_SIZE: '2' } });
    f.onClose(async () => {
      await rt.close();
      await db.end();
    });
    const before = await pendingIds(f.tdb.sql, 'exec-K');
    expect(before).toHaveLength(4);
    // Another session holds the newest row (a host lost inside a transaction): the batches must not wait on it.
    const held = [...before].sort().at(-1) ?? '';
    const holder = new pg.Client({ connectionString: f.tdb.url });
    await holder.connect();
    f.onClose(() => holder.end());
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM dbos.workflow_status WHERE workflow_uuid = $1 FOR NO KEY UPDATE`, [held]);
    const first = await handleDeathEvent(rt, envelope(notice('exec-K'), 'k-1'));
    expect(first).toMatchObject({ ack: false, kind: 'retry', code: 'rows_locked' });
    expect(await pendingIds(f.tdb.sql, 'exec-K')).toEqual([held]);
    const partial = await f.tdb.sql.query<{ outcome: string; reenqueued: number; error: string }>(
      `SELECT outcome, reenqueued, error FROM afterlife.recoveries WHERE executor_id = 'exec-K' ORDER BY id`,
    );
    expect(partial.rows).toEqual([{ outcome: 'partial', reenqueued: 3, error: expect.stringContaining(held) as unknown }]);

    await holder.query('ROLLBACK');
    const second = await handleDeathEvent(rt, envelope(notice('exec-K'), 'k-1'));
    expect(second).toMatchObject({ ack: true, summary: { outcome: 'completed', reenqueued: 1 } });
    const audited = await auditedIds(f.tdb.sql, 'exec-K');
    expect(audited).toEqual([...before].sort());
    expect(await pendingIds(f.tdb.sql, 'exec-K')).toEqual([]);
  });

  it('stops at a batch boundary when the lock is lost, leaves the new holder its key, and the redelivery finishes', async () => {
    const faults = new FaultInjector();
    const rt = testRuntime({ databaseUrl: f.tdb.url, applicationName: f.app, faults });
    f.onClose(rt.close);
    if (!rt.redis) throw new Error('redis required');
    const redis = rt.redis;
    // The real lock, with a window on the signal it hands the recovery.
    let signal: AbortSignal | undefined;
    const lock = new (class extends RedisLock {
      override using<T>(resource: string, ttlMs: number, fn: (s: AbortSignal) => Promise<T>): Promise<T> {
        return super.using(resource, ttlMs, (s) => ((signal = s), fn(s)));
      }
    })(redis);
    const resource = `afterlife:${f.app}:recover:exec-L`;
    faults.onNth('recover.afterBatch', 1, async () => {
      // Someone else takes the key over (our TTL lapsed during a pause, say); our next extension sees it.
      await redis.set(resource, 'someone-else', 'PX', 60_000);
      await waitFor('the lock reported lost', async () => signal?.aborted, { timeoutMs: 5_000, intervalMs: 20 });
    });
    // A TTL long enough that a stall on a loaded machine does not lose the lock before the fault does.
    const deps = { db: rt.db, redis, lock, logger: rt.logger, faults, batchSize: 2, lockTtlMs: 3_000, clock: Date.now };
    const err = await recoverExecutor(deps, notice('exec-L')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BudgetExhaustedError);
    expect(String(err)).toMatch(/lock lost/);
    expect(await auditedIds(f.tdb.sql, 'exec-L')).toHaveLength(2);
    expect(await pendingIds(f.tdb.sql, 'exec-L')).toHaveLength(3);
    expect(await redis.get(resource)).toBe('someone-else'); // compare-and-delete left the new holder's key

    await redis.del(resource);
    faults.off('recover.afterBatch');
    const rest = await recoverExecutor(deps, notice('exec-L'));
    expect(rest).toMatchObject({ outcome: 'completed', reenqueued: 3 });
    const outcomes = await f.tdb.sql.query(`SELECT outcome FROM afterlife.recoveries WHERE executor_id = 'exec-L' ORDER BY id`);
    expect(outcomes.rows.map((r: { outcome: string }) => r.outcome)).toEqual(['partial', 'completed']);
  });

  it('a row a writer holds while the recovery runs is not left behind: skipped, named, and moved by the next attempt', async () => {
    const db = afterlifeDb(f.tdb.url, { sessionName: 'afterlife-u' });
    f.onClose(() => db.end());
    const before = await pendingIds(f.tdb.sql, 'exec-U');
    expect(before).toHaveLength(3);
    // A writer touches u-1 without changing anything the recovery decides on, and has not committed yet.
    const writer = new pg.Client({ connectionString: f.tdb.url });
    await writer.connect();
    f.onClose(() => writer.end());
    await writer.query('BEGIN');
    await writer.query(`UPDATE dbos.workflow_status SET updated_at = updated_at + 1 WHERE workflow_uuid = 'u-1'`);
    const deps = { db, redis: undefined, lock: undefined, logger: silentLogger(), batchSize: 10, lockTtlMs: 5_000, clock: Date.now };
    const err = await recoverExecutor(deps, notice('exec-U')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RowsLockedError);
    expect(err).toMatchObject({ workflowIds: ['u-1'], reenqueued: 2 });
    await writer.query('COMMIT');
    expect(await recoverExecutor(deps, notice('exec-U'))).toMatchObject({ outcome: 'completed', reenqueued: 1 });
    expect(await pendingIds(f.tdb.sql, 'exec-U')).toEqual([]);
    expect(await auditedIds(f.tdb.sql, 'exec-U')).toEqual([...before].sort());
  });
});
