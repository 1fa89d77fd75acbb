import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deathNotice } from '../../../packages/executor/src/contract/deathNotice.js';
import { heartbeatKey } from '../../../packages/executor/src/contract/heartbeat.js';
import { recoverExecutor, type RecoveryDeps } from '../../../shared/recovery/recoverExecutor.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { auditedIds, beat, makeOrphans, pendingIds } from '../../helpers/agents.js';
import { createTestDatabase, type TestDatabase, uniqueName } from '../../helpers/db.js';
import { testRuntime } from '../../helpers/runtime.js';

/**
 * A death contradicted mid-recovery: the reaper's `heartbeat-lapsed` recovery re-reads the heartbeat at
 * every batch boundary. A key that comes back between batches (the `recover.beforeBatch` fault point,
 * batch size 1) stops it: the rest stays PENDING on the executor, the registry does not say dead and the
 * audit says why. The same fault point writing nothing lets every row be recovered. Real orphans: a real
 * DBOS executor started the workflows and was SIGKILLed; no executor claims them afterwards, so a moved
 * row stays ENQUEUED and an unmoved one PENDING.
 */
describe('recovery: a heartbeat returning mid-recovery', () => {
  const app = uniqueName('app-recheck');
  const faults = new FaultInjector();
  let tdb: TestDatabase;
  let rt: ReturnType<typeof testRuntime>;
  const ids = (p: string) => [0, 1, 2].map((i) => `${p}-${i}`);

  const deps = (): RecoveryDeps => ({
    db: rt.db,
    redis: rt.redis,
    lock: rt.lock,
    logger: rt.logger,
    faults,
    batchSize: 1,
    lockTtlMs: 5_000,
    clock: Date.now,
    recoveredBy: 'recheck-test',
  });
  const lapsed = (executorId: string) =>
    deathNotice({ executorId, applicationName: app, reason: 'heartbeat-lapsed', detectedBy: 'reaper-test' });
  const registryState = async (executorId: string) =>
    (await tdb.sql.query<{ state: string }>(`SELECT state FROM afterlife.executors WHERE executor_id = $1`, [executorId])).rows[0]?.state;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    rt = testRuntime({ databaseUrl: tdb.url, applicationName: app, faults });
    const common = { databaseUrl: tdb.url, sql: tdb.sql, applicationName: app, applicationVersion: 'v1', stepMs: 60_000 };
    await makeOrphans({ ...common, executorId: 'exec-back', ids: ids('back') });
    await makeOrphans({ ...common, executorId: 'exec-gone', ids: ids('gone') });
  });
  afterAll(async () => {
    await rt?.close();
    await tdb?.drop();
  });

  it('stops at the next batch boundary once the key is back; the rest stays PENDING on the executor', async () => {
    faults.on('recover.beforeBatch', async (ctx) => {
      // After the first batch moved one row, the executor's kit writes its key again.
      // As the kit writes it: a garbage value is no evidence of life (issue 23).
      if (ctx.batchNo === 2) await beat(rt.redis!, app, 'exec-back', 'v1', 10_000);
    });
    try {
      const summary = await recoverExecutor(deps(), lapsed('exec-back'));
      expect(summary).toMatchObject({ outcome: 'false-alarm', contradictedBy: 'heartbeat', reenqueued: 1, batches: 1 });
    } finally {
      faults.off('recover.beforeBatch');
      await rt.redis?.del(heartbeatKey(app, 'exec-back'));
    }
    expect(await pendingIds(tdb.sql, 'exec-back')).toHaveLength(2);
    expect(await auditedIds(tdb.sql, 'exec-back')).toHaveLength(1);
    expect(await registryState('exec-back')).toBeUndefined();
    const audit = await tdb.sql.query(`SELECT outcome, reenqueued, error FROM afterlife.recoveries WHERE executor_id = 'exec-back'`);
    expect(audit.rows).toEqual([{ outcome: 'partial', reenqueued: 1, error: expect.stringContaining('heartbeat returned') }]);
  });

  it('control: the same fault point writing nothing lets every row be recovered, and the registry says dead', async () => {
    faults.on('recover.beforeBatch', () => undefined);
    try {
      const summary = await recoverExecutor(deps(), lapsed('exec-gone'));
      expect(summary).toMatchObject({ outcome: 'completed', reenqueued: 3 });
    } finally {
      faults.off('recover.beforeBatch');
    }
    expect(await pendingIds(tdb.sql, 'exec-gone')).toEqual([]);
    expect(await auditedIds(tdb.sql, 'exec-gone')).toEqual(ids('gone'));
    expect(await registryState('exec-gone')).toBe('dead');
  });
});
