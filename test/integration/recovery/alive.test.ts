import { describe, expect, it } from 'vitest';
import { type AliveDeps, type AliveQuestion, isAlive } from '../../../shared/recovery/alive.js';
import { beat } from '../../helpers/agents.js';
import { executorDeathFixture } from '../../helpers/executorDeath.js';
import { holdLiveness } from '../../helpers/liveness.js';

/**
 * "Is this named executor alive?" (shared/recovery/alive.ts), the one rule executorDeath's notice check
 * and `afterlife-plane recover` share, against real Postgres and Redis: the same witnesses for both, and the one
 * difference, `doubt`: a notice goes ahead when the heartbeat cannot prove death, an operator is refused.
 */
describe('is a named executor alive', () => {
  const f = executorDeathFixture('app-alive', { serve: false });
  /** `aheadMs`: the reader's clock that much later than now, so a beat ages without a sleep. */
  const deps = (redis = true, aheadMs = 0): AliveDeps => ({
    db: f.rt.db,
    redis: redis ? f.rt.redis : undefined,
    heartbeatIntervalMs: 250,
    clock: () => Date.now() + aheadMs,
  });
  const ask = (executorId: string, doubt: AliveQuestion['doubt'], more: Partial<AliveQuestion> = {}, redis = true) =>
    isAlive(deps(redis), { applicationName: f.app, executorId, reason: 'manual', force: false, doubt, ...more });

  it('no lock and no key: gone, for both', async () => {
    expect(await ask('gone-1', 'proceed')).toEqual({ alive: false });
    expect(await ask('gone-1', 'refuse')).toEqual({ alive: false });
  });

  it('a beat saying alive: alive for both, unless forced or the claim is heartbeat-lapsed (the recovery re-reads that)', async () => {
    await beat(f.rt.redis!, f.app, 'beating-1', 'v1');
    expect(await ask('beating-1', 'proceed')).toMatchObject({ alive: true, witness: 'heartbeat', state: 'alive', fresh: true });
    expect(await ask('beating-1', 'refuse')).toEqual({ alive: true, witness: 'heartbeat', state: 'alive' });
    expect(await ask('beating-1', 'refuse', { force: true })).toEqual({ alive: false });
    expect(await ask('beating-1', 'proceed', { reason: 'heartbeat-lapsed' })).toEqual({ alive: false });
    // A beat older than two intervals is no life for a kit whose (free) lock is the witness; for a
    // kit without a lock the key is the only witness, so it still counts (not fresh) until it expires.
    await beat(f.rt.redis!, f.app, 'stale-1', 'v1');
    const later = (livenessTracked: boolean) =>
      isAlive(deps(true, 600), {
        applicationName: f.app,
        executorId: 'stale-1',
        reason: 'manual',
        force: false,
        doubt: 'proceed',
        livenessTracked,
      });
    expect(await ask('stale-1', 'proceed', { livenessTracked: true })).toMatchObject({ alive: true, fresh: true });
    expect(await later(true)).toEqual({ alive: false });
    expect(await later(false)).toMatchObject({ alive: true, fresh: false });
  });

  it('doubt: a draining beat or no Redis lets a notice proceed and refuses an operator', async () => {
    await beat(f.rt.redis!, f.app, 'draining-1', 'v1', 60_000, 'draining');
    expect(await ask('draining-1', 'proceed')).toEqual({ alive: false });
    expect(await ask('draining-1', 'refuse')).toEqual({ alive: true, witness: 'heartbeat', state: 'draining' });
    await beat(f.rt.redis!, f.app, 'drained-1', 'v1', 60_000, 'drained');
    expect(await ask('drained-1', 'refuse')).toEqual({ alive: false });
    expect(await ask('gone-2', 'proceed', {}, false)).toEqual({ alive: false });
    expect(await ask('gone-2', 'refuse', {}, false)).toEqual({ alive: 'unknown', witness: 'heartbeat' });
  });

  it("a held liveness lock is life for both, Redis or not, except the executor's own notice while it is leaving", async () => {
    const { session, took } = await holdLiveness(f.rt.db, f.tdb.url, {
      applicationName: f.app,
      executorId: 'locked-1',
      incarnation: 'inc-1',
    });
    try {
      expect(took[0]?.ok).toBe(true);
      for (const doubt of ['proceed', 'refuse'] as const) {
        expect(await ask('locked-1', doubt, {}, false)).toEqual({ alive: true, witness: 'liveness-lock' });
      }
      expect(await ask('locked-1', 'proceed', { reason: 'sigterm' })).toEqual({ alive: true, witness: 'liveness-lock' });
      expect(await ask('locked-1', 'proceed', { reason: 'sigterm', registryState: 'draining' })).toEqual({ alive: false });
    } finally {
      await session.end();
    }
  });
});
