import { beforeAll, describe, expect, it } from 'vitest';
import { readLease } from '../../../shared/db/queries/leases.js';
import { ConfigError } from '../../../packages/executor/src/errors.js';
import { leaseName, runReaper, type ReaperSummary } from '../../../shared/reaper/index.js';
import { FaultInjector } from '../../../packages/executor/src/testing/faults.js';
import { auditedIds, makeOrphans, pendingIds } from '../../helpers/agents.js';
import { backdateSentinel, reaperFixture, testReaperDeps } from '../../helpers/reaper.js';

/**
 * The lease is renewed after every tick, so one tick's work must stop at a boundary once the lease it
 * holds would lapse. A real dead executor (a DBOS executor SIGKILLed with four workflows in flight) is
 * recovered inline, one row per batch, while a fault point advances the reaper's clock 4 s per batch — a
 * slow recovery without sleeping. With a 6 s lease the tick stops at the boundary after two batches, well
 * inside the 55 s invocation budget (the next tick carries on). With a long lease the same recovery runs
 * to the end in one tick. A lease shorter than two ticks is refused before anything runs.
 */
describe('reaper: a tick never outlives its lease', () => {
  const faults = new FaultInjector();
  const env = { FUNCTION_TIMEOUT_S: '60', BUDGET_MARGIN_MS: '5000', DB_STATEMENT_TIMEOUT_MS: '30000', RECOVERY_BATCH_SIZE: '1' };
  const fx = reaperFixture('app-lease', { faults, env: { ...env, REAPER_LEASE_MS: '6000' } });
  const ids = ['lease-0', 'lease-1', 'lease-2', 'lease-3'];
  let skewMs = 0;
  // Frozen at each invocation's start, so only the simulated 4 s per batch moves it: a loaded machine's
  // real seconds must not decide after how many batches the tick stops.
  let base = Date.now();
  const clock = () => base + skewMs;

  const reap = async (leaseMs: number): Promise<Extract<ReaperSummary, { outcome: 'completed' }>> => {
    base = Date.now();
    const deps = testReaperDeps(fx.rt, { clock, config: { ...fx.rt.config, reaper: { ...fx.rt.config.reaper, leaseMs } } });
    const s = await runReaper(deps, { maxTicks: 1 });
    if (s.outcome !== 'completed') throw new Error('skipped');
    return s;
  };
  /** It beat once (the reaper knows it has the kit); its key has been gone for 10 s over one tick. */
  const absentForTenSeconds = async () => {
    await backdateSentinel(fx.rt);
    await fx.tdb.sql.query(
      `INSERT INTO afterlife.executor_observations AS o
         (application_name, executor_id, last_beat_seen_at, evidence, first_absent_at, last_absent_at, absent_ticks)
       VALUES ($1, 'exec-dead', now() - interval '15 s', 'heartbeat', now() - interval '10 s', now(), 1)
       ON CONFLICT (application_name, executor_id) DO UPDATE
          SET last_beat_seen_at = now() - interval '15 s', evidence = 'heartbeat', first_absent_at = now() - interval '10 s', last_absent_at = now(), absent_ticks = 1, declared_dead_at = NULL`,
      [fx.app],
    );
  };

  beforeAll(async () => {
    await makeOrphans({
      databaseUrl: fx.tdb.url,
      sql: fx.tdb.sql,
      applicationName: fx.app,
      executorId: 'exec-dead',
      applicationVersion: 'v1',
      ids,
      stepMs: 60_000,
    });
    // A first tick plants the reaper's Redis sentinel (the tick that plants it treats absences as a reset).
    expect((await reap(90_000)).declaredDead).toEqual([]);
    faults.on('recover.afterBatch', () => {
      skewMs += 4_000; // each batch "takes" 4 s
    });
  });

  it('stops the recovery at a batch boundary once the lease (not the invocation) runs short', async () => {
    await absentForTenSeconds();
    const s = await reap(6_000);
    expect(s.errors).toEqual([expect.objectContaining({ pass: 'dead', error: expect.stringContaining('work budget') })]);
    expect(await auditedIds(fx.tdb.sql, 'exec-dead')).toHaveLength(2);
    expect(await pendingIds(fx.tdb.sql, 'exec-dead')).toHaveLength(2);
    // Released on the way out, never lapsed under the holder.
    expect((await readLease(fx.rt.db, leaseName(fx.app)))?.holder).toBeNull();
  });

  it('control: with a lease longer than the invocation, the same recovery finishes in one tick', async () => {
    await absentForTenSeconds();
    skewMs = 0;
    const s = await reap(120_000);
    expect(s.errors).toEqual([]);
    expect(s.declaredDead).toEqual(['exec-dead']);
    expect(await pendingIds(fx.tdb.sql, 'exec-dead')).toEqual([]);
    expect(await auditedIds(fx.tdb.sql, 'exec-dead')).toEqual(ids);
  });

  it('a lease shorter than two ticks is refused before the lease is taken', async () => {
    await fx.tdb.sql.query(`DELETE FROM afterlife.leases`);
    await expect(reap(1_500)).rejects.toBeInstanceOf(ConfigError);
    expect(await readLease(fx.rt.db, leaseName(fx.app))).toBeUndefined();
  });
});
